"""Counts and index state of a store."""

from __future__ import annotations

from .models import StoreStats
from .schema import read_meta
from .store import SurrealStore


def get_stats(store: SurrealStore) -> StoreStats:
    """Documents, chunks, concepts, mentions, shared concepts and the vector indexes' state."""
    meta = read_meta(store) or {}
    if not meta:  # never initialised: report an empty store instead of failing on missing tables
        return StoreStats(
            documents=0, chunks=0, searchable_chunks=0, concepts=0, mentions=0, shared_concepts=0,
            embedding_dimension=None, embedder=None, server_version=store.server_version, indexes={},
        )
    counts, chunk_index, concept_index = store.query("stats")
    return StoreStats(
        **counts,
        embedding_dimension=meta.get("dimension"),
        embedder=meta.get("embedder"),
        server_version=store.server_version,
        indexes={"chunk_embedding": _index_state(chunk_index), "concept_embedding": _index_state(concept_index)},
    )


def _index_state(info: dict | None) -> dict:
    return dict((info or {}).get("building") or {})
