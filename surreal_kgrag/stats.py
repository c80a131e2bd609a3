"""Counts and index state of a store."""

from __future__ import annotations

from typing import Any

from .db import SurrealStore
from .models import StoreStats
from .schema import read_meta


def get_stats(store: SurrealStore) -> StoreStats:
    """Documents, chunks, concepts, mentions, shared concepts and the search indexes' state."""
    meta = read_meta(store) or {}
    if not meta:  # never initialised: report an empty store instead of failing on missing tables
        return StoreStats(
            documents=0, chunks=0, searchable_chunks=0, concepts=0, mentions=0, shared_concepts=0,
            embedding_dimension=None, embedder=None, server_version=store.server_version, indexes={},
        )
    counts, *builds = store.query("stats")
    states = store.index_states()
    return StoreStats(
        **counts,
        embedding_dimension=meta.get("dimension"),
        embedder=meta.get("embedder"),
        server_version=store.server_version,
        indexes={key: _index(states[key].model_dump(), build) for key, build in zip(("chunk", "concept", "text"), builds)},
    )


def _index(state: dict[str, Any], info: dict | None) -> dict[str, Any]:
    """The recorded state (live name, rows built, updates pending) and the engine's build status."""
    return {**state, "status": ((info or {}).get("building") or {}).get("status")}
