"""A small typed filter language over document fields and metadata, compiled to a SurrealQL condition.

Filters are written as a dict, in the form LangChain and LlamaIndex users know::

    {"metadata.year": {"$gte": 2000}, "title": {"$in": ["Warsaw", "Paris"]}}
    {"$or": [{"source": "a.md"}, {"metadata.tags": {"$contains": "physics"}}]}

A bare key that is not a document field (``title``, ``source``, ``content_type``, ``created_at``,
``updated_at``, ``id``) is a metadata key: ``{"year": 2000}`` means ``metadata.year``. Every key segment
must be a plain identifier, so a key can never change what the query does; every value is a bound
``$param``. The compiled condition is evaluated on each chunk inside the search query (through its
``doc`` link), so a filtered search still returns exactly k documents when k match.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import ConfigurationError


class FilterError(ConfigurationError, ValueError):
    """A filter that cannot be compiled: unknown operator, bad field name or value."""


DOCUMENT_FIELDS = frozenset({"id", "title", "source", "content_type", "created_at", "updated_at"})
_SEGMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_COMPARISONS = {"$eq": "=", "$ne": "!=", "$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}
_OPERATORS = set(_COMPARISONS) | {"$in", "$nin", "$contains", "$between", "$exists"}
_SCALARS = (str, int, float, bool, dt.datetime, dt.date)


@dataclass(frozen=True)
class CompiledFilter:
    """A SurrealQL boolean expression over a chunk row, and the values it binds."""

    condition: str
    params: dict[str, Any] = field(default_factory=dict)

    def clause(self, keyword: str = "AND") -> str:
        """The condition prefixed by ``keyword``, or nothing when there is no condition."""
        return f"{keyword} ({self.condition})" if self.condition else ""


NO_FILTER = CompiledFilter("")


class _Compiler:
    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.params: dict[str, Any] = {}

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
                joined = f" {key[1:].upper()} ".join(self.node(item) for item in value)
                parts.append(f"({joined})")
            elif key == "$not":
                parts.append(f"!({self.node(value)})")
            elif isinstance(key, str) and key.startswith("$"):
                raise FilterError(f"unknown filter operator {key!r}: use $and, $or, $not at the top level")
            else:
                parts.append(self.field(field_path(key), value))
        return " AND ".join(parts)

    def field(self, path: str, condition: Any) -> str:
        if not isinstance(condition, Mapping):
            condition = {"$eq": condition}
        if not condition:
            raise FilterError(f"empty condition for field {path!r}")
        return " AND ".join(self.operator(path, op, value) for op, value in condition.items())

    def operator(self, path: str, op: str, value: Any) -> str:
        if op not in _OPERATORS:
            raise FilterError(f"unknown operator {op!r} on {path!r}: use one of {', '.join(sorted(_OPERATORS))}")
        if op in ("$eq", "$ne"):
            return f"{path} {_COMPARISONS[op]} {self.bind(_scalar(path, op, value))}"
        if op in _COMPARISONS:  # NONE sorts before every value: a missing field must not pass `< x`
            return f"({path} != NONE AND {path} {_COMPARISONS[op]} {self.bind(_scalar(path, op, value))})"
        if op in ("$in", "$nin"):
            values = _scalar_list(path, op, value)
            return f"{path} {'IN' if op == '$in' else 'NOT IN'} {self.bind(values)}"
        if op == "$contains":
            return f"{path} CONTAINS {self.bind(_scalar(path, op, value))}"
        if op == "$between":
            values = _scalar_list(path, op, value)
            if len(values) != 2:
                raise FilterError(f"$between on {path!r} takes [low, high], got {value!r}")
            return f"({path} != NONE AND {path} >= {self.bind(values[0])} AND {path} <= {self.bind(values[1])})"
        if not isinstance(value, bool):
            raise FilterError(f"$exists on {path!r} takes true or false, got {value!r}")
        return f"{path} {'!=' if value else '='} NONE"


def field_path(key: Any) -> str:
    """The SurrealQL path of a filter key on a chunk row, every segment escaped as an identifier."""
    if not isinstance(key, str) or not key:
        raise FilterError(f"filter field names are non-empty strings, got {key!r}")
    segments = key.split(".")
    if segments[0] not in DOCUMENT_FIELDS and segments[0] != "metadata":
        segments = ["metadata", *segments]
    for segment in segments:
        if not _SEGMENT.match(segment):
            raise FilterError(
                f"invalid filter field {key!r}: each dot-separated part must be letters, digits and underscores"
            )
    if segments[0] in DOCUMENT_FIELDS and len(segments) > 1:
        raise FilterError(f"invalid filter field {key!r}: {segments[0]!r} has no sub-fields")
    if segments == ["metadata"]:
        raise FilterError("filter on a metadata key, e.g. 'metadata.year', not on 'metadata' itself")
    if segments[0] == "id":
        return "record::id(doc)"
    return "doc." + ".".join(f"`{segment}`" for segment in segments)


def _scalar(path: str, op: str, value: Any) -> Any:
    if value is None or not isinstance(value, _SCALARS):
        raise FilterError(f"{op} on {path!r} takes a string, number, boolean or datetime, got {value!r}")
    return value


def _scalar_list(path: str, op: str, value: Any) -> list[Any]:
    if not isinstance(value, (list, tuple, set, frozenset)) or not value:
        raise FilterError(f"{op} on {path!r} takes a non-empty list, got {value!r}")
    return [_scalar(path, op, item) for item in value]


def compile_filter(spec: Mapping[str, Any] | CompiledFilter | None, *, prefix: str = "filter_") -> CompiledFilter:
    """Compile a filter dict; ``None`` or ``{}`` means no filter."""
    if spec is None or isinstance(spec, CompiledFilter):
        return spec or NO_FILTER
    if isinstance(spec, Mapping) and not spec:
        return NO_FILTER
    compiler = _Compiler(prefix)
    return CompiledFilter(compiler.node(spec), compiler.params)


def combine(*filters: CompiledFilter) -> CompiledFilter:
    """AND several compiled filters (their parameter names must not clash)."""
    parts = [f for f in filters if f.condition]
    if not parts:
        return NO_FILTER
    params: dict[str, Any] = {}
    for f in parts:
        params.update(f.params)
    return CompiledFilter(" AND ".join(f"({f.condition})" for f in parts), params)


def access_filter(labels: list[str] | None) -> CompiledFilter:
    """Only chunks whose document carries at least one of ``labels`` (``None``: no restriction)."""
    if labels is None:
        return NO_FILTER
    if isinstance(labels, str) or not all(isinstance(label, str) for label in labels):
        raise FilterError(f"access labels are a list of strings, got {labels!r}")
    return CompiledFilter("access CONTAINSANY $access_labels", {"access_labels": list(labels)})
