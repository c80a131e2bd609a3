"""LlamaIndex ``MetadataFilters`` in the core's filter language (``surreal_kgrag.retrieval.filters``).

Keys are metadata keys. Each operator matches the nodes llama_index.core's own filter function
(``build_metadata_filter_fn``, used by ``SimpleVectorStore``) matches on the same metadata:

- a missing key or a null value matches only ``NE``, ``NIN`` and ``IS_EMPTY`` (``IS_EMPTY`` also
  matches ``""`` and ``[]``);
- ``CONTAINS``, ``ANY``, ``ALL`` and ``TEXT_MATCH`` test a list value for an element and a string
  value for a substring (case-sensitive);
- ``IN []`` and ``ANY []`` match no node, ``NIN []`` every node, ``ALL []`` every node with a value;
- ``NOT`` matches when none of its filters match; nested ``MetadataFilters`` are taken too.

Filters whose LlamaIndex meaning is not what they read as, or that the core cannot express, raise
``UnsupportedFilterError`` (a ``ValueError``) naming the operator and what to use instead:
``EQ``/``NE`` with ``None`` (there ``EQ`` never matches and ``NE`` always does: use ``IS_EMPTY``),
``EQ``/``NE`` with a list (use ``IN``/``NIN``), a list for ``GT``..``LTE`` or ``CONTAINS``, a
single value for ``IN``/``NIN``/``ANY``/``ALL`` (LlamaIndex would test substrings or characters of
it), ``None`` for any other operator but ``IS_EMPTY``, and ``TEXT_MATCH_INSENSITIVE``.

Two differences remain where Python and the store disagree: a stored boolean is not a number
(LlamaIndex's ``True == 1``), and a comparison with a value of another type does not match where
LlamaIndex raises ``TypeError`` (``GT 5`` on a string). A dot in a key reads a nested key
(``"a.b"`` is ``metadata["a"]["b"]``), where LlamaIndex reads a key named ``"a.b"``.
"""

from __future__ import annotations

from typing import Any

from llama_index.core.vector_stores.types import (
    ExactMatchFilter,
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)

from surreal_kgrag.retrieval.filters import MAX_FILTER_DEPTH, FilterError

_SCALARS = {
    FilterOperator.EQ: "$eq",
    FilterOperator.NE: "$ne",
    FilterOperator.GT: "$gt",
    FilterOperator.GTE: "$gte",
    FilterOperator.LT: "$lt",
    FilterOperator.LTE: "$lte",
    FilterOperator.CONTAINS: "$contains",
    FilterOperator.TEXT_MATCH: "$contains",  # a string value holding the text; "in" is CONTAINS's test
}
_LISTS = (FilterOperator.IN, FilterOperator.NIN, FilterOperator.ANY, FilterOperator.ALL)
# what a list value means for EQ/NE in LlamaIndex (the whole value equals the list), and what was likely meant
_INSTEAD_OF_LIST = {
    FilterOperator.EQ: "IN (any of these values) or ALL (a list value holding each)",
    FilterOperator.NE: "NIN (none of these values)",
}
_INSTEAD_OF_NONE = {
    FilterOperator.EQ: "IS_EMPTY (a missing key, null, \"\" or [])",
    FilterOperator.NE: "IS_EMPTY inside MetadataFilters(condition=FilterCondition.NOT) (a key with a value)",
}


class UnsupportedFilterError(FilterError):
    """A ``MetadataFilter`` the core's filter language cannot express, or whose LlamaIndex meaning
    differs from what it reads as; the message names the operator to use instead."""


def to_core_filter(filters: MetadataFilters | None) -> dict[str, Any] | None:
    """``filters`` as a core filter dict on metadata keys (``metadata.<key>``); None for no filter."""
    if filters is None or not filters.filters:
        return None
    return _group(filters, 1)


def _group(filters: MetadataFilters, depth: int) -> dict[str, Any]:
    # the core refuses a filter nested deeper (check_filter_size); refused here before recursion runs out
    if depth > MAX_FILTER_DEPTH:
        raise FilterError(f"the filters are nested more than {MAX_FILTER_DEPTH} levels deep: flatten them")
    parts = [_group(item, depth + 1) if isinstance(item, MetadataFilters) else _one(item) for item in filters.filters]
    condition = filters.condition or FilterCondition.AND
    if condition == FilterCondition.NOT:
        # LlamaIndex's NOT matches when none of its filters match (llama_index.core's build_metadata_filter_fn).
        return {"$not": parts[0] if len(parts) == 1 else {"$or": parts}}
    if len(parts) == 1:
        return parts[0]
    return {"$or" if condition == FilterCondition.OR else "$and": parts}


def _one(item: MetadataFilter | ExactMatchFilter) -> dict[str, Any]:
    key = f"metadata.{item.key}"
    operator = getattr(item, "operator", FilterOperator.EQ)
    value = item.value
    if operator == FilterOperator.IS_EMPTY:
        # missing, null, "" or [] (as llama_index.core's build_metadata_filter_fn)
        return {"$or": [{key: {"$exists": False}}, {key: {"$eq": None}}, {key: {"$eq": ""}}, {key: {"$eq": []}}]}
    if operator == FilterOperator.TEXT_MATCH_INSENSITIVE:
        raise _refuse(item, "is not supported (the store has no case-insensitive match on metadata): use TEXT_MATCH or CONTAINS "
                      "(case-sensitive substring), or the hybrid retriever's full-text search over chunk text")
    if value is None:
        instead = _INSTEAD_OF_NONE.get(operator, "a value, or IS_EMPTY for a missing key")
        why = "in LlamaIndex a missing or null value matches only NE, NIN and IS_EMPTY"
        raise _refuse(item, f"takes a value, not None ({why}): use {instead}")
    if operator in _LISTS:
        if not isinstance(value, list):
            single = "EQ" if operator == FilterOperator.IN else "NE" if operator == FilterOperator.NIN else "CONTAINS"
            raise _refuse(item, f"takes a list of values (LlamaIndex would test the characters or substrings of {value!r}): "
                          f"pass [{value!r}] or use {single}")
        return _list(key, operator, value)
    if operator in _SCALARS:
        if isinstance(value, list):
            if operator in _INSTEAD_OF_LIST and not value:  # the value is the empty list
                return {key: {_SCALARS[operator]: []}}
            instead = _INSTEAD_OF_LIST.get(operator, "ANY or ALL (a list value holding any or each)")
            raise _refuse(item, f"takes one value, not a list: use {instead}")
        return {key: {_SCALARS[operator]: value}}
    raise _refuse(item, "is not a LlamaIndex operator surreal-kgrag knows: use EQ, NE, GT, GTE, LT, LTE, IN, NIN, "
                  "CONTAINS, TEXT_MATCH, ANY, ALL or IS_EMPTY")


def _list(key: str, operator: FilterOperator, values: list[Any]) -> dict[str, Any]:
    if not values:
        # as LlamaIndex: IN [] and ANY [] match nothing, NIN [] everything, ALL [] every node with a value
        present = {key: {"$exists": True, "$ne": None}}
        if operator == FilterOperator.ALL:
            return present
        always = {"$or": [{key: {"$exists": True}}, {key: {"$exists": False}}]}
        return always if operator == FilterOperator.NIN else {"$not": always}
    if operator in (FilterOperator.IN, FilterOperator.NIN):
        return {key: {"$in" if operator == FilterOperator.IN else "$nin": values}}
    parts = [{key: {"$contains": v}} for v in values]
    if len(parts) == 1:
        return parts[0]
    return {"$or" if operator == FilterOperator.ANY else "$and": parts}


def _refuse(item: MetadataFilter | ExactMatchFilter, why: str) -> UnsupportedFilterError:
    operator = getattr(item, "operator", FilterOperator.EQ)
    return UnsupportedFilterError(f"the {operator.name} filter on {item.key!r} {why}")
