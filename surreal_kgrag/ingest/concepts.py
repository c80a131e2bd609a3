"""Concept records and their vectors.

A write creates the records of the concepts it meets, without vectors: no retrieval mode reads a
concept's vector (questions reach concepts by name), only the agent tools' concept search does, and
most concepts are noun phrases one chunk mentions (85% of the HotpotQA corpus's 23,468), not worth
searching by meaning. A concept is queued for a vector once ``vector_min_chunks`` chunks mention it
or it names a document (``write_documents.surql``). While a run writes, :class:`VectorWorker` drains
the queue on its own thread as write groups commit (the names are embedded while the next batches go
through the other stages); :func:`embed_queued_concepts` then takes what the last writes queued. A
vector is computed once per concept and store, in batches of similar names.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ..db import SurrealStore
from ..embed import Embedder
from ..ids import concept_id
from ..models import ConceptMention

# Names per embedder call (sorted by length, so padding is small either way). 64 against 256 on 3,000
# sec10q concept names (benchmarks/ingest_benchmark.py, a busy machine, 64 always timed first): 4.9/4.2,
# 64.7/75.2, 53.2/54.1, 51.8/54.3, 30.4/38.2 s; 64 also hands the model lock back to the chunk embedding
# stage more often while the vector worker runs.
CONCEPT_BATCH = 64
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


def embed_queued_concepts(
    store: SurrealStore,
    embedder: Embedder,
    stop: Callable[[], bool] = lambda: False,
    write_lock: contextlib.AbstractContextManager[Any] | None = None,
    timed: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext,
) -> int:
    """Give every queued concept its vector, a slice at a time (each slice all or nothing); returns
    how many were embedded. ``stop`` ends it between slices, and drops a slice embedded when it
    comes: the rest stays queued for the next run. ``write_lock`` is held while a slice is written
    (a run's writes and these never run at once, so neither loses a conflict to the other); ``timed``
    wraps the work, not the waits for that lock."""
    embedded = 0
    while not stop():
        with timed():
            rows = store.query("concept_vectors_pending", {"limit": QUEUE_SLICE})[-1]
            wanted = [row for row in rows if row.get("display") is not None]
            vectors = embed_many(embedder, [row["display"] for row in wanted], CONCEPT_BATCH) if rows else []
        if not rows or stop():
            break
        with write_lock or contextlib.nullcontext(), timed():
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


class VectorWorker:
    """Drains the concept vector queue on its own thread while a run writes.

    The writing thread holds ``write_lock`` while it writes and calls :meth:`poke` after each batch;
    the worker then embeds what the queue holds and writes the vectors between the run's writes.
    :meth:`finish` drains what is left and returns how many concepts the worker embedded; leaving
    the ``running()`` block any other way stops the worker at its next slice (the slice it is
    writing is written) and waits for it. ``stop`` (the run's abort) stops it the same way.
    """

    _POLL = 0.1  # seconds between checks for a stop while the worker waits for work

    def __init__(
        self,
        store: SurrealStore,
        embedder: Embedder,
        stop: Callable[[], bool],
        timed: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.write_lock = threading.Lock()
        self.embedded = 0
        self._stop = stop
        self._timed = timed
        self._work = threading.Event()
        self._ending = threading.Event()  # finish(): drain, then end
        self._halt = threading.Event()  # leave at the next slice
        self._done = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="kgrag-vectors", daemon=True)

    @contextlib.contextmanager
    def running(self) -> Iterator[VectorWorker]:
        self._thread.start()
        try:
            yield self
        finally:
            self._halt.set()
            self._wait()

    def poke(self) -> None:
        """Writes have committed: the queue may hold new concepts."""
        self._work.set()

    def finish(self) -> int:
        """Drain the queue, end the worker, raise its error if it had one; how many it embedded."""
        self._ending.set()
        self._work.set()
        self._wait()
        if self._error is not None:
            raise self._error
        return self.embedded

    def _wait(self) -> None:
        # On events, not Thread.join (stages.py says why): Ctrl-C stays deliverable meanwhile.
        while self._thread.ident is not None and not self._done.wait(self._POLL):
            pass

    def _stopped(self) -> bool:
        return self._halt.is_set() or self._stop()

    def _run(self) -> None:
        try:
            while not self._stopped():
                if not self._work.wait(self._POLL):
                    continue
                self._work.clear()
                ending = self._ending.is_set()
                self.embedded += embed_queued_concepts(self.store, self.embedder, self._stopped, self.write_lock, self._timed)
                if ending:
                    return
        except BaseException as error:  # raised again by finish() in the run's thread
            self._error = error
        finally:
            self._done.set()


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
