"""Which concepts need an embedding: the database decides, the pipeline only avoids doing it twice.

Nothing here caches what the store holds: a concept can be deleted at any time (its last document
deleted, by this process or another). Each batch asks the store which of its concepts exist; the
write transaction checks again and fails if one has gone, and the writer then embeds it and retries
(``write_documents.surql``). What the pipeline does remember is the concepts it has embedded and not
yet written (``ConceptClaims``), so two batches in flight never embed the same name.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

import numpy as np

from ..embed import Embedder
from ..ids import concept_id
from ..models import ConceptMention
from ..store import SurrealStore

# Short names: a larger batch than for passages costs nothing in padding and saves per-batch overhead.
CONCEPT_BATCH = 256


class ConceptClaims:
    """Concept names embedded by this run and not yet written; thread-safe."""

    def __init__(self) -> None:
        self._names: set[str] = set()
        self._lock = threading.Lock()

    def claim(self, names: Iterable[str]) -> set[str]:
        """Claim the names nobody in this run has claimed; returns them."""
        with self._lock:
            fresh = set(names) - self._names
            self._names |= fresh
            return fresh

    def snapshot(self) -> frozenset[str]:
        with self._lock:
            return frozenset(self._names)

    def release(self, names: Iterable[str]) -> None:
        with self._lock:
            self._names.difference_update(names)


def missing_concepts(store: SurrealStore, names: Iterable[str]) -> set[str]:
    """The names among ``names`` that have no concept record in the store."""
    wanted = set(names)
    if not wanted:
        return set()
    stored = store.query("existing_concepts", {"ids": [concept_id(n) for n in wanted]})[-1]
    return wanted - {rid.id for rid in stored}


def concept_records(embedder: Embedder, mentions: dict[str, ConceptMention]) -> dict[str, dict[str, Any]]:
    """New concept records, each name embedded once (as first written, e.g. "Marie Curie")."""
    if not mentions:
        return {}
    names = list(mentions)
    vectors = embed_many(embedder, [mentions[n].display for n in names], CONCEPT_BATCH)
    return {
        name: {
            "id": concept_id(name),
            "name": name,
            "display": mentions[name].display,
            "kind": mentions[name].kind,
            "aliases": [mentions[name].display],
            "embedding": vector,
        }
        for name, vector in zip(names, vectors)
    }


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
