"""LlamaIndex ``MetadataFilters`` in the core's filter language (``surreal_kgrag.retrieval.filters``).

Every ``FilterOperator`` that has a meaning on stored metadata is translated; keys are metadata keys.
``TEXT_MATCH`` and ``TEXT_MATCH_INSENSITIVE`` are not (substring search over metadata is not a
filter the core offers): they raise ``UnsupportedFilterError`` naming the key.
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

_COMPARISONS = {
    FilterOperator.EQ: "$eq",
    FilterOperator.NE: "$ne",
    FilterOperator.GT: "$gt",
    FilterOperator.GTE: "$gte",
    FilterOperator.LT: "$lt",
    FilterOperator.LTE: "$lte",
    FilterOperator.IN: "$in",
    FilterOperator.NIN: "$nin",
    FilterOperator.CONTAINS: "$contains",
}


class UnsupportedFilterError(FilterError):
    """A ``MetadataFilter`` operator the core's filter language cannot express."""


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
    if operator in _COMPARISONS:
        return {key: {_COMPARISONS[operator]: value}}
    if operator in (FilterOperator.ANY, FilterOperator.ALL):
        values = value if isinstance(value, list) else [value]
        if not values:
            raise FilterError(f"{operator.name} on {item.key!r} takes a non-empty list of values")
        parts = [{key: {"$contains": v}} for v in values]
        return {"$or" if operator == FilterOperator.ANY else "$and": parts}
    if operator == FilterOperator.IS_EMPTY:
        # missing, null, "" or [] (as llama_index.core's build_metadata_filter_fn)
        return {"$or": [{key: {"$exists": False}}, {key: {"$eq": None}}, {key: {"$eq": ""}}, {key: {"$eq": []}}]}
    raise UnsupportedFilterError(
        f"the {operator.name} filter on {item.key!r} is not supported by surreal-kgrag: use EQ, NE, GT, GTE, LT, LTE, "
        "IN, NIN, CONTAINS, ANY, ALL or IS_EMPTY (full-text search over chunk text is the hybrid retriever's job)"
    )
