"""Concept records and their vectors.

A write creates the records of the concepts it meets, without vectors: no retrieval mode reads a
concept's vector (questions reach concepts by name), only the agent tools' concept search does, and
most concepts are noun phrases one chunk mentions (85% of the HotpotQA corpus's 23,468), not worth
searching by meaning. A concept is queued for a vector once ``vector_min_chunks`` chunks mention it
or it names a document (``write_documents.surql``); :func:`embed_queued_concepts` embeds the queue
after the writes, so a vector is computed once per concept and store, in batches of similar names.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..db import SurrealStore
from ..embed import Embedder
from ..ids import concept_id
from ..models import ConceptMention

# Short names: a larger batch than for passages costs nothing in padding and saves per-batch overhead.
CONCEPT_BATCH = 256
# Queued concepts read, embedded and written per transaction.
QUEUE_SLICE = 2048


def concept_record(mention: ConceptMention) -> dict[str, Any]:
    """A new concept's record (its name as first written, e.g. "Marie Curie", is its display name)."""
    return {
        "id": concept_id(mention.name),
        "name": mention.name,
        "display": mention.display,
        "kind": mention.kind,
        "aliases": [mention.display],
    }


def embed_queued_concepts(store: SurrealStore, embedder: Embedder, stop: Callable[[], bool] = lambda: False) -> int:
    """Give every queued concept its vector, a slice at a time (each slice all or nothing); returns
    how many were embedded. ``stop`` ends it between slices: the rest stays queued for the next run."""
    embedded = 0
    while not stop():
        rows = store.query("concept_vectors_pending", {"limit": QUEUE_SLICE})[-1]
        if not rows:
            break
        wanted = [row for row in rows if row.get("display") is not None]
        vectors = embed_many(embedder, [row["display"] for row in wanted], CONCEPT_BATCH)
        store.query(
            "concept_vectors_write",
            {
                "vectors": [
                    {"concept": concept_id(str(row["id"].id)), "embedding": vector} for row, vector in zip(wanted, vectors)
                ],
                "queued": [row["id"] for row in rows],
            },
        )
        embedded += len(wanted)
    return embedded


def embed_many(embedder: Embedder, texts: list[str], batch: int) -> list[np.ndarray]:
    """One float32 vector per text. Texts go in length order, ``batch`` at a time (similar lengths
    pad less) and the results come back in input order. The store packs float32 arrays in bulk."""
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    vectors: list[np.ndarray] = [np.empty(0, dtype=np.float32)] * len(texts)
    for start in range(0, len(order), batch):
        picked = order[start : start + batch]
        rows = np.asarray(embedder.embed_documents([texts[i] for i in picked]), dtype=np.float32)
        for i, row in zip(picked, rows):
            vectors[i] = row
    return vectors
