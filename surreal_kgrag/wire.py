"""Values on their way to and from SurrealDB: ``None`` as SurrealDB's NULL and back, numpy values
as plain lists (``plain``). How requests are encoded is ``surreal_kgrag.db.sdk``'s business
(``encode_query`` is the embedded engine's fast path, kept here for imports)."""

from __future__ import annotations

from typing import Any

from .db.sdk import Null, plain
from .db.sdk_fastpath import encode_query

__all__ = ["encode_query", "plain", "with_nulls", "without_nulls"]


def with_nulls(value: Any) -> Any:
    """``value`` with every ``None`` inside it sent as SurrealDB's NULL. The SDK sends ``None`` as
    NONE, and an object field set to NONE is dropped: a ``null`` metadata value would vanish."""
    if value is None:
        return Null
    if isinstance(value, dict):
        return {k: with_nulls(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [with_nulls(v) for v in value]
    return value


def without_nulls(value: Any) -> Any:
    """``value`` as read back, with SurrealDB's NULL (the SDK's ``Null``) as ``None`` again."""
    if value is Null:
        return None
    if isinstance(value, dict):
        return {k: without_nulls(v) for k, v in value.items()}
    if isinstance(value, list):
        return [without_nulls(v) for v in value]
    return value
