"""Which texts a vector-store operation means: the caller's ids, checked, and metadata filters put in
the core filter language (every bare key a metadata key)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import ConfigurationError
from ..retrieval.filters import FilterError, check_filter_size

__all__ = ["metadata_filter", "search_filter", "text_key", "text_keys"]


def metadata_filter(spec: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A vector-store filter in the core language: bare keys (``id``, ``title``, anything) are
    metadata keys, ``$and`` / ``$or`` / ``$not`` nest as usual; ``metadata.x`` stays as written."""
    if spec is None:
        return None
    if not isinstance(spec, Mapping):
        raise FilterError(f"a filter is a dict of metadata conditions, got {spec!r}")
    check_filter_size(spec)  # before the walk below recurses

    def key(name: Any) -> Any:
        if not isinstance(name, str) or name.startswith(("$", "metadata.")):
            return name
        return f"metadata.{name}"

    def walk(node: Any) -> Any:
        if not isinstance(node, Mapping):
            return node
        out: dict[str, Any] = {}
        for name, value in node.items():
            if name in ("$and", "$or") and isinstance(value, (list, tuple)):
                out[name] = [walk(item) for item in value]
            elif name == "$not":
                out[name] = walk(value)
            else:
                out[key(name)] = value
        return out

    return walk(spec) or None


def search_filter(filters: Mapping[str, Any] | None, ids: Sequence[str] | None) -> dict[str, Any] | None:
    """A search filter in the core language: ``filters`` on metadata, and the texts in ``ids``."""
    spec = metadata_filter(filters)
    if ids is None:
        return spec
    restrict = {"id": {"$in": text_keys(ids)}} if ids else {"$not": {"id": {"$exists": True}}}
    return restrict if spec is None else {"$and": [spec, restrict]}


def text_key(position: int, key: Any) -> str:
    """The id at ``position`` of a caller's list, which must be a non-empty string."""
    if not isinstance(key, str) or not key:
        raise ConfigurationError(f"id {position} must be a non-empty string, got {key!r}")
    return key


def text_keys(ids: Sequence[str]) -> list[str]:
    """A caller's list of ids, each checked (:func:`text_key`)."""
    if isinstance(ids, str):
        raise ConfigurationError("ids is a list of strings, not one string")
    return [text_key(i, key) for i, key in enumerate(ids)]
