"""Run one model-written SurrealQL statement, read-only, with a row and a time limit.

:func:`run_readonly_query` (and ``arun_readonly_query``):

1. the guard (:func:`.guard.check_readonly`) accepts only one ``SELECT`` with nothing in it that
   writes, defines, sleeps or reaches outside the database, and :func:`.bounds.check_bounded` only
   one the engine can bound (row-limited LIMIT/START/KNN, no subquery, no table outside the graph;
   a top-level LIMIT is added when there is none);
2. the engine plans it with ``EXPLAIN`` (``surql/readonly_explain.surql``), which runs nothing: a
   statement that does not parse, or that the planner cannot read as a query, stops here;
3. it runs with ``TIMEOUT`` appended (the engine stops it at the time limit) and its rows are
   cut to the row limit (``surql/readonly_query.surql``), then to the size limit: the rows kept
   are the first ones whose JSON fits in ``max_bytes`` (one row can hold a whole table:
   ``SELECT array::group(content) FROM chunk GROUP ALL``), and ``note`` tells the model what to
   change. The engine still builds every row it returns (the row and time limits bound that, not
   this one): the size limit bounds what is copied on and sent to the model.

Scope: a caller restricted to access labels must pass a store signed in as a *record user* (see
the README's tenancy mode) whose labels are all among the caller's: the database then applies them
to whatever the statement reads. The query text cannot be trusted to carry a condition, so on a
root (or unauthenticated) connection a scoped call is refused, and a filter, which only the
package's own queries can apply, is refused everywhere (:func:`scope_plan`).
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from .. import surql
from ..db import SurrealStore
from ..db.sdk import RecordID
from ..errors import QueryExecutionError
from ..retrieval.plan import SEARCH, Call, Plan, Query, arun, run
from ..retrieval.scope import Scope
from .bounds import check_bounded
from .guard import MAX_CHARS, CheckedStatement, ReadonlyQueryError

#: Size of the rows a query returns, as UTF-8 JSON (about 64k tokens of a model's context).
MAX_BYTES = 256 * 1024


class ReadonlyLimits(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    rows: int = Field(100, ge=1, le=10_000, description="rows returned at most (the rest is cut, truncated=True)")
    timeout_ms: int = Field(2000, ge=10, le=600_000, description="time limit the engine enforces on the statement")
    max_chars: int = Field(MAX_CHARS, ge=16, le=100_000, description="longest statement accepted")
    max_bytes: int = Field(
        MAX_BYTES, ge=1_024, le=64 * 1024 * 1024, description="size of the rows as UTF-8 JSON at most (the rest is cut, truncated=True)"
    )


class ReadonlyQueryResult(BaseModel):
    statement: str = Field(description="the statement that ran (without a trailing ';')")
    rows: list[Any] = Field(description="result rows as JSON values: record ids as 'table:id' strings, datetimes in ISO 8601")
    truncated: bool = Field(description="rows were cut: there were more than the row limit, or their JSON was over the size limit")
    note: str | None = Field(None, description="why rows were cut and what to change in the query; None when nothing was cut")
    elapsed_ms: float


def readonly_plan(
    store: SurrealStore,
    statement: str,
    *,
    limits: ReadonlyLimits | None = None,
    access: Sequence[str] | None = None,
    filters: Mapping[str, Any] | None = None,
    scope: Scope | None = None,
) -> Plan[ReadonlyQueryResult]:
    limits = limits or ReadonlyLimits()
    yield from scope_plan(store, Scope.of(scope, access=access, filters=filters))
    checked = check_bounded(statement, max_rows=limits.rows, max_chars=limits.max_chars)
    explain = _render("readonly_explain", checked)
    started = time.perf_counter()
    results = yield _run(store, "readonly_explain", explain, "the database refused to plan the query", "engine_rejected")
    if len(results) != 1 or not isinstance(results[0], (str, dict)):
        raise ReadonlyQueryError("the query did not plan as exactly one read statement", "engine_rejected")
    text = _render("readonly_query", checked, rows=limits.rows + 1, timeout_ms=limits.timeout_ms)
    results = yield _run(store, "readonly_query", text, "the query failed", "failed")
    rows = results[-1] if isinstance(results[-1], list) else [] if results[-1] is None else [results[-1]]
    kept, note = _within_size(rows[: limits.rows], limits.max_bytes)
    if note is None and len(rows) > limits.rows:
        note = f"more rows than the row limit {limits.rows}: the first {limits.rows} are shown; narrow the WHERE clause or count them"
    return ReadonlyQueryResult(
        statement=checked.text,
        rows=kept,
        truncated=note is not None,
        note=note,
        elapsed_ms=round((time.perf_counter() - started) * 1000, 3),
    )


def _within_size(rows: list[Any], max_bytes: int) -> tuple[list[Any], str | None]:
    """The first rows, as JSON values, whose JSON array fits in ``max_bytes`` (UTF-8), and why the
    rest was cut (None when nothing was). Rows after the first that does not fit are not converted."""
    kept: list[Any] = []
    size = 2  # the array's brackets
    for row in rows:
        value = to_json(row)
        row_bytes = len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())
        size += row_bytes + bool(kept)  # and a comma
        if size > max_bytes:
            shown = f"row 1 alone is {row_bytes:,} bytes" if not kept else f"the first {len(kept)} rows are shown"
            return kept, (
                f"the rows were cut: the answer may hold {max_bytes:,} bytes of JSON and {shown}; select fewer or shorter "
                "fields (string::slice(content, 0, 300), array::slice(list, 0, 20), count()) or fewer rows (LIMIT)"
            )
        kept.append(value)
    return kept, None


def run_readonly_query(
    store: SurrealStore,
    statement: str,
    *,
    limits: ReadonlyLimits | None = None,
    access: Sequence[str] | None = None,
    filters: Mapping[str, Any] | None = None,
    scope: Scope | None = None,
) -> ReadonlyQueryResult:
    """Run one read-only SELECT written by a model (or a person); raises :class:`ReadonlyQueryError`
    with the reason when it is refused or fails. ``access``, ``filters``, ``scope``: the caller's
    scope, which only a record-user store can enforce (see the module docs and :func:`scope_plan`)."""
    return run(store, readonly_plan(store, statement, limits=limits, access=access, filters=filters, scope=scope))


async def arun_readonly_query(
    store: SurrealStore,
    statement: str,
    *,
    limits: ReadonlyLimits | None = None,
    access: Sequence[str] | None = None,
    filters: Mapping[str, Any] | None = None,
    scope: Scope | None = None,
) -> ReadonlyQueryResult:
    return await arun(store, readonly_plan(store, statement, limits=limits, access=access, filters=filters, scope=scope))


def scope_plan(store: SurrealStore, scope: Scope) -> Plan[None]:
    """Refuse a caller whose scope the database would not enforce on a free-form query.

    - no restriction: any connection;
    - a filter: refused everywhere (only the package's own queries can apply one);
    - access labels: only on a store signed in as a record user (tenancy mode) whose own labels
      are all among the caller's, so that what the database lets the statement read is inside
      the caller's scope (a reader with labels the caller lacks would widen it).
    """
    if scope.filters:
        raise ReadonlyQueryError(
            "a filter cannot be applied to a model-written query; restrict the caller with access labels "
            "enforced by the database (a record-user store) instead",
            "scope",
        )
    if scope.access is None and not scope.record_user:
        return
    if store.config.access is None:
        raise ReadonlyQueryError(
            "this caller is restricted to access labels, but the store is not signed in as a record user, so a "
            "model-written query could read other documents; open the store with access=<record access> and "
            "access_variables=... (the database-enforced tenancy mode) for scoped text-to-SurrealQL",
            "scope",
        )
    if scope.access is not None:
        labels = (yield Query("readonly_reader_labels"))[-1]
        if not isinstance(labels, list):
            raise ReadonlyQueryError(
                "the store's record user has no `access` labels to compare with this caller's; sign in as a reader "
                "of the tenancy mode (surreal_kgrag.tenancy.add_reader) for scoped text-to-SurrealQL",
                "scope",
            )
        wider = sorted(set(labels) - set(scope.access))
        if wider:
            raise ReadonlyQueryError(
                f"the store's reader may read documents labelled {wider}, which this caller's access labels exclude; "
                "sign in as a reader whose labels are all among the caller's for scoped text-to-SurrealQL",
                "scope",
            )


def _run(store: SurrealStore, name: str, text: str, failure: str, code: str) -> Call:
    """The step that runs ``text``; the engine's refusal comes back as a :class:`ReadonlyQueryError`
    raised by the step itself, so any plan driver reports it the same way."""

    def execute() -> list[Any]:
        try:
            return store.query_text(name, text)
        except QueryExecutionError as error:
            raise ReadonlyQueryError(f"{failure}: {_reason(error)}", code) from error

    async def aexecute() -> list[Any]:
        try:
            return await store.aquery_text(name, text)
        except QueryExecutionError as error:
            raise ReadonlyQueryError(f"{failure}: {_reason(error)}", code) from error

    return Call(execute, aexecute, SEARCH)


def _render(name: str, statement: CheckedStatement, **integers: int) -> str:
    """The SurrealQL file with the checked statement in its ``{{statement}}`` slot and checked
    integers in the others (the statement itself is never searched for placeholders)."""
    before, marker, after = surql.load(name).partition("{{statement}}")
    if not marker:
        raise AssertionError(f"{name}.surql has no {{{{statement}}}} slot")
    return surql.render(before, **integers) + statement.text + surql.render(after, **integers)


def _reason(error: QueryExecutionError) -> str:
    message = str(error)
    return message.split(".surql: ", 1)[-1]


def to_json(value: Any) -> Any:
    """A query result as plain JSON values."""
    if isinstance(value, RecordID):
        return f"{value.table_name}:{value.id!s}"
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [to_json(v) for v in value]
    if isinstance(value, (dt.datetime, dt.date)):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode()
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)  # durations, geometries and other SDK types: their SurrealQL text
