"""Applies the schema in ``surql/schema.surql`` and guards the settings a store was built with."""

from __future__ import annotations

import warnings
from typing import Any

from .db import SurrealStore, checked_int
from .db.catalog import SEARCH_INDEXES, IndexSettings, IndexState
from .errors import SchemaMismatchError
from .surql import CONSTANTS, Identifier

__all__ = [
    "ADJACENCY_LISTS_SINCE",
    "CHUNK_LIST_MAX",
    "MIGRATIONS",
    "NAME_COUNTS_SINCE",
    "SCHEMA_VERSION",
    "IndexSettings",
    "aensure_schema",
    "ensure_schema",
    "read_meta",
]

# 2: full-text search moved from `chunk.search_text` to the `chunk_text` table.
# 3: the `term` table counts the chunks each analysed term occurs in (migrated from 2 on open).
# 4: title and alias concepts with `own` edges, bridge edges (chunk -> another document's title).
#    Derived from every document's text and title, so an older store is ingested again instead.
# 5: the `concept_chunks` table counts the chunks that mention each concept (migrated from 4 on open).
# 6: a concept's vector is optional; `concept_vector_queue` lists the concepts waiting for one.
# 7: adjacency lists for the graph walk: `chunk_concepts`, `concept_chunks.chunks` (migrated from 6 on open).
# 8: `concept_title` rows for the concepts that name a document (migrated from 7 on open).
# 9: a concept's vector in a `concept_vector` row of its own, with the HNSW index (migrated from 8 on open).
# 10: each chunk's `single` list of the concepts no other chunk mentions (migrated from 9 on open).
# 11: the `document_name_count` view counts the documents that carry each name (migrated from 10 on open).
# 12: no UNIQUE index on `concept.name`, which is the concept's id (removed from 11 on open).
SCHEMA_VERSION = 12
# Older schema versions this one can bring up to date in place: version -> the SurrealQL file that
# takes a store from that version to the next one (applied in turn).
MIGRATIONS: dict[int, str] = {
    4: "migrate_v4_concept_chunks",
    5: "migrate_v5_concept_vectors",
    6: "migrate_v6_adjacency",
    7: "migrate_v7_titles",
    8: "migrate_v8_concept_vector_rows",
    9: "migrate_v9_single_concepts",
    10: "migrate_v10_name_counts",
    11: "migrate_v11_concept_name_index",
}
#: A concept's chunks are listed in `concept_chunks` while at most this many chunks mention it (the
#: SurrealQL that keeps the lists reads it as ``{{chunk_list_max}}``); the graph modes walk no concept in more.
CHUNK_LIST_MAX = CONSTANTS["chunk_list_max"]
#: The first schema with the adjacency lists; the graph modes read an older store from its edges.
ADJACENCY_LISTS_SINCE = 7
#: The first schema with the `document_name_count` view; the document channel counts an older store's
#: name rows instead.
NAME_COUNTS_SINCE = 11


def _index_steps(states: dict[str, IndexState], dimension: int, settings: IndexSettings) -> list[tuple[str, None, dict[str, Any]]]:
    """The search indexes under their live names (index_vector / index_fulltext.surql)."""
    dimension = checked_int("dimension", dimension, maximum=65_536)
    steps: list[tuple[str, None, dict[str, Any]]] = []
    for key, index in SEARCH_INDEXES.items():
        placeholders: dict[str, Any] = {"index": Identifier(states[key].name), "table": Identifier(index.table)}
        if index.ddl == "index_vector":
            placeholders.update(dimension=dimension, hnsw_efc=settings.hnsw_efc, hnsw_m=settings.hnsw_m)
        steps.append((index.ddl, None, placeholders))
    return steps


def _index_record(dimension: int, settings: IndexSettings) -> dict[str, Any]:
    """The index state a new store starts with: generation 0, nothing indexed or pending."""
    record: dict[str, Any] = {key: {"generation": 0, "indexed": 0, "pending": 0} for key in SEARCH_INDEXES}
    record["hnsw"] = {"efc": settings.hnsw_efc, "m": settings.hnsw_m}
    return record


def _check_meta(store: SurrealStore, meta: dict[str, Any] | None, dimension: int, embedder: str) -> bool:
    """True when the store already records its settings; raises when they contradict ours."""
    if not meta:
        return False
    version = meta.get("schema_version")
    if version != SCHEMA_VERSION and version not in MIGRATIONS:
        raise SchemaMismatchError(
            f"{store.config.url} (namespace {store.config.namespace!r}, database {store.config.database!r}) "
            f"was written by another version of surreal-kgrag (store schema {version}, this version reads "
            f"schema {SCHEMA_VERSION}). Ingest your documents again into a new store or database."
        )
    stored = meta.get("dimension")
    if stored != dimension:
        raise SchemaMismatchError(
            f"{store.config.url} (namespace {store.config.namespace!r}, database {store.config.database!r}) "
            f"holds {stored}-dimensional embeddings from {meta.get('embedder')!r}, but the embedder "
            f"{embedder!r} gives {dimension} dimensions. Use the embedder the store was built with, or "
            "another database/namespace for this one."
        )
    if meta.get("embedder") != embedder:
        warnings.warn(
            f"{store.config.url} was built with embedder {meta.get('embedder')!r}; querying it with "
            f"{embedder!r} (same dimension) compares vectors from different models",
            stacklevel=3,
        )
    return True


def _meta_record(dimension: int, embedder: str) -> dict[str, Any]:
    return {"dimension": dimension, "embedder": embedder, "schema_version": SCHEMA_VERSION}


def ensure_schema(store: SurrealStore, *, dimension: int, embedder: str, settings: IndexSettings | None = None) -> None:
    """Create the tables and indexes if missing (idempotent), bring an older store up to date and
    check the store's embedding dimension. Writers that open a new store at the same moment conflict
    on its definitions: each step is idempotent (its file says so), so the store runs the loser's
    step again."""
    settings = settings or IndexSettings()
    meta = store.query("store_meta")[-1]
    known = _check_meta(store, meta, dimension, embedder)
    store.query("schema")
    if not known:
        store.query("index_state_write", {"state": _index_record(dimension, settings)})
    for name, params, placeholders in _index_steps(store.index_states(), dimension, settings):
        store.query(name, params, **placeholders)
    if not known:
        store.query("store_meta_write", {"meta": _meta_record(dimension, embedder)})
    else:
        for step in _migrations(meta["schema_version"]):
            store.query(step)


async def aensure_schema(
    store: SurrealStore, *, dimension: int, embedder: str, settings: IndexSettings | None = None
) -> None:
    settings = settings or IndexSettings()
    meta = (await store.aquery("store_meta"))[-1]
    known = _check_meta(store, meta, dimension, embedder)
    await store.aquery("schema")
    if not known:
        await store.aquery("index_state_write", {"state": _index_record(dimension, settings)})
    for name, params, placeholders in _index_steps(await store.aindex_states(), dimension, settings):
        await store.aquery(name, params, **placeholders)
    if not known:
        await store.aquery("store_meta_write", {"meta": _meta_record(dimension, embedder)})
    else:
        for step in _migrations(meta["schema_version"]):
            await store.aquery(step)


def _migrations(version: int) -> list[str]:
    """The migration files that take a store from schema ``version`` to the current one, in order."""
    return [MIGRATIONS[v] for v in range(version, SCHEMA_VERSION)]


def read_meta(store: SurrealStore) -> dict[str, Any] | None:
    """The settings recorded in the store, or None for a store that was never initialised."""
    return store.query("store_meta")[-1] or None
