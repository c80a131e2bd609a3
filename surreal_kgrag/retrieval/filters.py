"""A small typed filter language over document fields and metadata, compiled to a SurrealQL condition.

Filters are written as a dict, in the form LangChain and LlamaIndex users know::

    {"metadata.year": {"$gte": 2000}, "title": {"$in": ["Warsaw", "Paris"]}}
    {"$or": [{"source": "a.md"}, {"metadata.tags": {"$contains": "physics"}}]}

A bare key that is not a document field (``title``, ``source``, ``content_type``, ``created_at``,
``updated_at``, ``id``) is a metadata key: ``{"year": 2000}`` means ``metadata.year``; dots separate
nested keys. Metadata keys may hold any characters (``"my key"``, ``"a-b"``, ``"größe"``): every key
and every value is a bound ``$param``, so nothing a caller writes becomes query text.

Comparisons are typed, never coerced by accident:

- document fields have fixed types: ``title``, ``source``, ``content_type`` and ``id`` take strings,
  ``created_at`` and ``updated_at`` datetimes or ISO 8601 strings (``"2024-05-01"``, naive times are
  UTC); any other value is a :class:`FilterError`, so ``{"title": {"$gt": 5}}`` cannot match
  every document;
- on metadata, ``$gt``/``$gte``/``$lt``/``$lte``/``$between`` only match values of the filter value's
  type: numbers compare with numbers, strings with strings (as text), datetimes with datetimes; an
  ISO 8601 string also compares with stored datetimes as a datetime;
- ``None`` means a stored ``null``: ``{"x": None}`` matches documents whose ``x`` is null, not those
  without ``x`` (use ``{"x": {"$exists": False}}``); ``$exists`` is true for a null value;
- integers must fit in 64 bits and floats be finite.

The compiled condition is evaluated on a row with ``doc`` (the document record) and ``access`` (its
labels), inside the search query, so a filtered search still returns k documents when k match.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Mapping
from typing import Any

from ..db.sdk import Null
from ..errors import ConfigurationError
from ..surql import NO_FILTER, CompiledFilter


class FilterError(ConfigurationError, ValueError):
    """A filter that cannot be compiled: unknown operator, bad field name or value."""


DOCUMENT_FIELDS = frozenset({"id", "title", "source", "content_type", "created_at", "updated_at"})
_STRING_FIELDS = frozenset({"id", "title", "source", "content_type"})
_DATETIME_FIELDS = frozenset({"created_at", "updated_at"})
_COMPARISONS = {"$eq": "=", "$ne": "!=", "$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}
_ORDERINGS = frozenset({"$gt", "$gte", "$lt", "$lte"})
_OPERATORS = set(_COMPARISONS) | {"$in", "$nin", "$contains", "$between", "$exists"}
_INT64 = (-(2**63), 2**63 - 1)
_MAX_KEY = 256
#: A filter nests dicts and lists at most this deep, and holds at most this many keys and list items.
MAX_FILTER_DEPTH = 12
MAX_FILTER_ITEMS = 1_000
#: Most characters of text (keys and string values together) one filter holds: each is copied into
#: the request several times over on its way to the engine.
MAX_FILTER_CHARS = 1_000_000
_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2})?)?$")


class _Path:
    """A filter key resolved to a SurrealQL path on the row, with its type when it is a document field."""

    def __init__(self, text: str, kind: str | None) -> None:
        self.text = text
        self.kind = kind  # "string", "datetime" or None (metadata: any type)


class _Compiler:
    """Compiles a filter for a row with ``doc`` and ``access`` (a chunk's), or with
    ``on_document`` for a document row itself (its own fields)."""

    def __init__(self, prefix: str, *, on_document: bool = False) -> None:
        self.prefix = prefix
        self.params: dict[str, Any] = {}
        self.record, self.fields = ("id", "") if on_document else ("doc", "doc.")

    def bind(self, value: Any) -> str:
        name = f"{self.prefix}{len(self.params)}"
        self.params[name] = value
        return f"${name}"

    def node(self, spec: Any) -> str:
        if not isinstance(spec, Mapping) or not spec:
            raise FilterError(f"a filter must be a non-empty dict of field conditions, got {spec!r}")
        parts = []
        for key, value in spec.items():
            if key in ("$and", "$or"):
                if not isinstance(value, (list, tuple)) or not value:
                    raise FilterError(f"{key} takes a non-empty list of filters, got {value!r}")
                parts.append(f"({_join([self.node(item) for item in value], key[1:].upper())})")
            elif key == "$not":
                parts.append(f"!({self.node(value)})")
            elif isinstance(key, str) and key.startswith("$"):
                raise FilterError(f"unknown filter operator {key!r}: combine filters with $and, $or, $not; compare with $eq, $gt, $in, ...")
            else:
                parts.append(self.field(self.path(key), key, value))
        return _join(parts, "AND")

    def path(self, key: Any) -> _Path:
        """The SurrealQL path of a filter key on a row: a fixed document field, or the metadata
        object indexed by bound key names."""
        if not isinstance(key, str) or not key:
            raise FilterError(f"filter field names are non-empty strings, got {key!r}")
        check_text(key, "filter field name")
        segments = key.split(".")
        if segments[0] in DOCUMENT_FIELDS:
            if len(segments) > 1:
                raise FilterError(f"invalid filter field {key!r}: {segments[0]!r} has no sub-fields")
            name = segments[0]
            if name == "id":
                return _Path(f"record::id({self.record})", "string")
            return _Path(f"{self.fields}{name}", "datetime" if name in _DATETIME_FIELDS else "string")
        if segments[0] == "metadata":
            segments = segments[1:]
            if not segments:
                raise FilterError("filter on a metadata key, e.g. 'metadata.year', not on 'metadata' itself")
        if any(not segment or len(segment) > _MAX_KEY for segment in segments):
            raise FilterError(
                f"invalid filter field {key!r}: dots separate nested keys, and each key is 1 to {_MAX_KEY} characters"
            )
        return _Path(f"{self.fields}metadata" + "".join(f"[{self.bind(segment)}]" for segment in segments), None)

    def field(self, path: _Path, key: str, condition: Any) -> str:
        if not isinstance(condition, Mapping):
            condition = {"$eq": condition}
        if not condition:
            raise FilterError(f"empty condition for field {key!r}")
        return _join([self.operator(path, key, op, value) for op, value in condition.items()], "AND")

    def operator(self, path: _Path, key: str, op: Any, value: Any) -> str:
        p = path.text
        if op not in _OPERATORS:
            raise FilterError(f"unknown operator {op!r} on {key!r}: use one of {', '.join(sorted(_OPERATORS))}")
        if op == "$exists":
            if not isinstance(value, bool):
                raise FilterError(f"$exists on {key!r} takes true or false, got {value!r}")
            return f"{p} {'!=' if value else '='} NONE"
        if op in ("$eq", "$ne"):
            if value is None:  # metadata: a stored null; a document field: no value
                return f"{p} {_COMPARISONS[op]} {'NULL' if path.kind is None else 'NONE'}"
            if isinstance(value, (list, tuple)) and not value and path.kind is None:  # an empty list in metadata
                return f"{p} {_COMPARISONS[op]} []"
            return self.equality(path, key, op, _COMPARISONS[op], value)
        if op in ("$in", "$nin"):
            values = [self.equatable(path, key, op, item) for item in _non_empty_list(key, op, value)]
            return f"{p} {'IN' if op == '$in' else 'NOT IN'} {self.bind(values)}"
        if op == "$contains":
            return f"{p} CONTAINS {self.bind(_scalar(key, op, value))}"
        if op == "$between":
            values = _non_empty_list(key, op, value)
            if len(values) != 2:
                raise FilterError(f"$between on {key!r} takes [low, high], got {value!r}")
            low, high = (_ordered(path, key, op, item) for item in values)
            if low[0] != high[0]:
                raise FilterError(f"$between on {key!r} takes two values of one type, got {value!r}")
            return self.ordering(path, ">=", low) + " AND " + self.ordering(path, "<=", high)
        return self.ordering(path, _COMPARISONS[op], _ordered(path, key, op, value))

    def equality(self, path: _Path, key: str, op: str, sign: str, value: Any) -> str:
        p = path.text
        value = self.equatable(path, key, op, value)
        if path.kind is None and isinstance(value, str) and (moment := _iso_datetime(value)) is not None:
            joiner = "OR" if op == "$eq" else "AND"
            return f"({p} {sign} {self.bind(value)} {joiner} {p} {sign} {self.bind(moment)})"
        return f"{p} {sign} {self.bind(value)}"

    def equatable(self, path: _Path, key: str, op: str, value: Any) -> Any:
        if value is None and path.kind is None:
            return Null
        if path.kind is not None:
            return _typed(path, key, op, value)
        return _scalar(key, op, value)

    def ordering(self, path: _Path, sign: str, typed: tuple[str, Any]) -> str:
        """A guarded comparison: NONE and values of other types sort before or after everything on
        SurrealDB (``'abc' > 5`` is true), so the stored value's type is checked first."""
        kind, value = typed
        p = path.text
        if path.kind is not None:  # a document field of known type
            return f"({p} != NONE AND {p} {sign} {self.bind(value)})"
        if kind == "string" and (moment := _iso_datetime(value)) is not None:
            return (
                f"((type::is_string({p}) AND {p} {sign} {self.bind(value)}) OR "
                f"(type::is_datetime({p}) AND {p} {sign} {self.bind(moment)}))"
            )
        return f"(type::is_{kind}({p}) AND {p} {sign} {self.bind(value)})"


def _join(parts: list[str], operator: str) -> str:
    """Conditions joined by AND or OR; a long list as ``array::all([...])`` / ``array::any([...])``,
    because the engine refuses a chain of more than about a hundred operators."""
    if len(parts) <= 8:
        return f" {operator} ".join(parts)
    return f"array::{'all' if operator == 'AND' else 'any'}([{', '.join(parts)}])"


def check_filter_size(spec: Any, what: str = "filter") -> None:
    """Refuse a filter nested deeper than :data:`MAX_FILTER_DEPTH` or holding more than
    :data:`MAX_FILTER_ITEMS` keys and list items or :data:`MAX_FILTER_CHARS` characters of text,
    with a :class:`FilterError` (walked without recursion, so no depth raises ``RecursionError``)."""
    stack: list[tuple[Any, int]] = [(spec, 1)]
    items = chars = 0
    while stack:
        node, depth = stack.pop()
        children: list[Any] | None = None
        if isinstance(node, Mapping):
            children = list(node.values())
            chars += sum(len(key) for key in node if isinstance(key, str))
        elif isinstance(node, (list, tuple, set, frozenset)):
            children = list(node)
        elif isinstance(node, str):
            chars += len(node)
        if chars > MAX_FILTER_CHARS:
            raise FilterError(f"the {what} holds more than {MAX_FILTER_CHARS:,} characters of text: narrow it")
        if children is None:
            continue
        if depth > MAX_FILTER_DEPTH:
            raise FilterError(f"the {what} is nested more than {MAX_FILTER_DEPTH} levels deep: flatten it ($and/$or take lists)")
        items += len(children)
        if items > MAX_FILTER_ITEMS:
            raise FilterError(
                f"the {what} holds more than {MAX_FILTER_ITEMS:,} keys and list items: narrow it, or split the work into several calls"
            )
        stack.extend((child, depth + 1) for child in children)


def check_text(value: str, what: str) -> None:
    """Refuse text SurrealDB cannot hold (a lone surrogate) with a :class:`FilterError` naming it."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        raise FilterError(f"the {what} {value!r} is not valid Unicode text ({error.reason})") from None


def _scalar(key: str, op: str, value: Any) -> Any:
    """A value SurrealDB can hold and compare: str, bool, a 64-bit int, a finite float, a datetime."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        if not _INT64[0] <= value <= _INT64[1]:
            raise FilterError(f"{op} on {key!r}: the integer {value} does not fit in 64 bits")
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise FilterError(f"{op} on {key!r} takes a finite number, got {value!r}")
        return value
    if isinstance(value, str):
        check_text(value, f"value for {key!r}")
        return value
    if isinstance(value, dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)
    if isinstance(value, dt.date):
        return dt.datetime(value.year, value.month, value.day, tzinfo=dt.timezone.utc)
    raise FilterError(f"{op} on {key!r} takes a string, number, boolean, datetime or null, got {value!r}")


def _typed(path: _Path, key: str, op: str, value: Any) -> Any:
    """A value for a document field of fixed type: a string, or a datetime (ISO strings parsed)."""
    if path.kind == "string":
        if not isinstance(value, str):
            raise FilterError(f"{op} on {key!r} takes a string ({key} is text), got {value!r}")
        return _scalar(key, op, value)
    if isinstance(value, str):
        moment = _iso_datetime(value)
        if moment is None:
            raise FilterError(f"{op} on {key!r} takes a datetime or an ISO 8601 string such as '2024-05-01', got {value!r}")
        return moment
    if isinstance(value, (dt.datetime, dt.date)):
        return _scalar(key, op, value)
    raise FilterError(f"{op} on {key!r} takes a datetime or an ISO 8601 string such as '2024-05-01', got {value!r}")


def _ordered(path: _Path, key: str, op: str, value: Any) -> tuple[str, Any]:
    """A value an ordering operator can take, with the type stored values must have to compare."""
    if path.kind is not None:
        return path.kind, _typed(path, key, op, value)
    if value is None or isinstance(value, bool):
        raise FilterError(f"{op} on {key!r} takes a number, string or datetime, got {value!r}")
    value = _scalar(key, op, value)
    if isinstance(value, (int, float)):
        return "number", value
    return ("string" if isinstance(value, str) else "datetime"), value


def _non_empty_list(key: str, op: str, value: Any) -> list[Any]:
    if not isinstance(value, (list, tuple, set, frozenset)) or not value:
        raise FilterError(f"{op} on {key!r} takes a non-empty list, got {value!r}")
    return list(value)


def _iso_datetime(text: str) -> dt.datetime | None:
    if not _ISO_DATE.match(text):
        return None
    try:
        moment = dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.timezone.utc)


def compile_filter(spec: Mapping[str, Any] | None, *, prefix: str = "filter_") -> CompiledFilter:
    """Compile a filter dict; ``None`` or ``{}`` means no filter. Only a dict is taken: a condition
    compiled elsewhere is SurrealQL text, which could undo the scope it is ANDed with."""
    if spec is None:
        return NO_FILTER
    if isinstance(spec, CompiledFilter):
        raise FilterError("filters takes a filter dict (see surreal_kgrag.retrieval.filters), not a CompiledFilter")
    if isinstance(spec, Mapping) and not spec:
        return NO_FILTER
    check_filter_size(spec)
    compiler, on_document = _Compiler(prefix), _Compiler(prefix, on_document=True)
    condition, document = compiler.node(spec), on_document.node(spec)
    assert compiler.params == on_document.params  # one walk of the same filter binds the same values
    return CompiledFilter(condition, compiler.params, document)


def combine(*filters: CompiledFilter) -> CompiledFilter:
    """AND several compiled filters (their parameter names must not clash)."""
    parts = [f for f in filters if f.condition]
    if not parts:
        return NO_FILTER
    if len(parts) == 1:
        return parts[0]
    params: dict[str, Any] = {}
    for f in parts:
        clash = params.keys() & f.params.keys()
        if clash:
            raise ValueError(f"compiled filters bind the same parameters {sorted(clash)}: compile them with different prefixes")
        params.update(f.params)
    on_documents = None
    if all(f.document is not None for f in parts):
        on_documents = " AND ".join(f"({f.document})" for f in parts)
    return CompiledFilter(" AND ".join(f"({f.condition})" for f in parts), params, on_documents)
