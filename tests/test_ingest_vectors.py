"""Concept vectors are embedded while a run writes (ingest/concepts.py VectorWorker), and a run ends
with the same store as when they were embedded after the writes: every concept that earned a vector
has one, the queue is empty, no name is embedded twice; also when a document fails to write or the
run is cancelled mid-way (then the rest waits in the queue and the next run finishes it).

Real embedded SurrealDB, real MiniLM and spaCy."""

from __future__ import annotations

import _thread
import collections
import threading

import pytest
from test_ingest import CountingEmbedder

from surreal_kgrag import IngestConfig, Ingestor, SourceDocument, SurrealStore
from surreal_kgrag.chunking import SentenceChunker
from surreal_kgrag.errors import QueryExecutionError
from surreal_kgrag.ingest import IngestInterrupted

SHORT_CHUNKS = SentenceChunker(max_tokens=16, overlap_tokens=0)  # about a sentence per chunk
# Small batches and groups: many writes, so the worker has work while the other stages still run.
CONFIG = IngestConfig(chunker=SHORT_CHUNKS, batch_size=2, group_size=1, queue_batches=1)
PLACES = ["Lisbon", "Porto", "Madrid", "Seville", "Vienna", "Prague", "Krakow", "Dresden", "Bruges", "Ghent", "Turin", "Genoa"]


def _documents() -> list[SourceDocument]:
    """Titled documents (a title earns its concept a vector at once) sharing people and places."""
    return [
        SourceDocument(
            key=f"d{i}",
            source=f"d{i}.txt",
            title=f"The Guild of {place}",
            text=(
                f"The Guild of {place} met in {place} every winter. Marie Curie wrote to the guild from Paris. "
                f"The harbour of {place} traded with {PLACES[(i + 1) % len(PLACES)]}. "
                f"Charles Babbage visited {place} in {1820 + i}."
            ),
        )
        for i, place in enumerate(PLACES)
    ]


class RecordingEmbedder(CountingEmbedder):
    """The real MiniLM embedder, recording which thread embedded which texts, in call order."""

    def __init__(self, inner, on_embed=None):
        super().__init__(inner)
        self.calls: list[tuple[str, list[str]]] = []
        self.on_embed = on_embed

    def embed_documents(self, texts):
        thread = threading.current_thread().name
        self.calls.append((thread, list(texts)))
        if self.on_embed is not None:
            self.on_embed(thread)
        return super().embed_documents(texts)

    def names(self) -> list[str]:
        """Every concept name embedded (the vectors thread embeds names only), repeats kept."""
        return [t for thread, texts in self.calls if thread == "kgrag-vectors" for t in texts]


@pytest.fixture
def store():
    with SurrealStore("mem://") as s:
        yield s


def _with_vectors(store) -> dict[str, str]:
    return {
        row["name"]: row["display"] for row in store.query("concept_vectors")[-1] if row.get("embedding") is not None
    }


def _queued(store) -> int:
    return store.query_text("test: queue length", "RETURN count(SELECT id FROM concept_vector_queue);")[-1]


def _assert_complete(store) -> None:
    """Every concept that names a document or that two chunks mention has a vector, no other has one,
    the queue is empty."""
    report = store.query("check_integrity", {"vector_min_chunks": 2})[-1]
    assert report["concepts_missing_vector"] == report["concepts_with_empty_vector"] == 0
    assert _queued(store) == 0
    earned = store.query_text(
        "test: earned",
        "SELECT VALUE name FROM concept WHERE titled OR (type::record('concept_chunks', record::id(id)).n ?? 0) >= 2;",
    )[-1]
    assert sorted(earned) == sorted(_with_vectors(store))


def _assert_once(names: list[str], store) -> None:
    """Each concept with a vector had its name embedded once, and no other name was embedded."""
    repeated = [name for name, n in collections.Counter(names).items() if n > 1]
    assert not repeated
    assert sorted(names) == sorted(_with_vectors(store).values())


def test_vectors_are_embedded_while_the_run_writes_and_end_complete(store, minilm, spacy_extractor):
    embedder = RecordingEmbedder(minilm)
    summary = Ingestor(store, embedder=embedder, extractor=spacy_extractor, config=CONFIG).ingest(_documents())
    assert summary.added == len(PLACES) and summary.failed == 0
    _assert_complete(store)
    _assert_once(embedder.names(), store)
    assert summary.concept_vectors == len(_with_vectors(store)) >= len(PLACES)
    # Names were embedded before the chunks of the last batches: during the run, not after it.
    threads = [thread for thread, _ in embedder.calls]
    assert "kgrag-vectors" in threads and "MainThread" not in threads
    assert "kgrag-embed" in threads[threads.index("kgrag-vectors") :]
    assert summary.timings["vectors"] > 0


def test_a_document_that_fails_to_write_leaves_the_others_complete(store, minilm, spacy_extractor, monkeypatch):
    query = store.query

    def refusing(name, params=None, **placeholders):
        if name == "write_documents" and any(i.id in ("d3", "d7") for i in params["doc_ids"]):
            raise QueryExecutionError("write_documents: simulated refusal of d3 and d7")
        return query(name, params, **placeholders)

    monkeypatch.setattr(store, "query", refusing)
    embedder = RecordingEmbedder(minilm)
    summary = Ingestor(store, embedder=embedder, extractor=spacy_extractor, config=CONFIG).ingest(_documents())
    assert (summary.added, summary.failed) == (len(PLACES) - 2, 2)
    assert all("simulated refusal" in f.reason for f in summary.failures)
    _assert_complete(store)
    _assert_once(embedder.names(), store)
    assert "guild of porto" in _with_vectors(store) and "guild of seville" not in _with_vectors(store)  # d1 in, d3 out


# Extract's 5th batch: with one batch between stages, the write stage holds the first batch by then.
@pytest.mark.parametrize(("where", "call"), [("kgrag-extract", 5), ("kgrag-vectors", 2)])
def test_ctrl_c_mid_run_leaves_the_rest_queued_and_the_next_run_finishes(store, minilm, spacy_extractor, where, call, ctrl_c_raises):
    """Ctrl-C while the stages run (extract) or while the worker embeds names (vectors): what was
    written is complete, each concept that earned a vector has it or waits in the queue, and the
    next run embeds exactly the names still waiting."""
    seen = collections.Counter()

    def ctrl_c(thread):
        seen[thread] += 1
        if thread == where and seen[thread] == call:
            _thread.interrupt_main()  # a real Ctrl-C arrives in the calling thread

    class Extractor:
        def extract(self, texts):
            ctrl_c(threading.current_thread().name)
            return spacy_extractor.extract(texts)

    first = RecordingEmbedder(minilm, on_embed=ctrl_c)
    with pytest.raises(IngestInterrupted) as interrupted:
        Ingestor(store, embedder=first, extractor=Extractor(), config=CONFIG).ingest(_documents())
    summary = interrupted.value.summary
    assert 0 < summary.added < len(PLACES)
    report = store.query("check_integrity", {"vector_min_chunks": 2})[-1]
    assert report["concepts_missing_vector"] == report["concepts_with_empty_vector"] == 0
    assert _queued(store) > 0
    done = _with_vectors(store)
    assert summary.concept_vectors == len(done)
    assert sorted(set(first.names()) & set(done.values())) == sorted(done.values())  # none written unembedded

    second = RecordingEmbedder(minilm)
    again = Ingestor(store, embedder=second, extractor=spacy_extractor, config=CONFIG).ingest(_documents())
    assert again.skipped == summary.added and again.added == len(PLACES) - summary.added
    _assert_complete(store)
    assert not set(second.names()) & set(done.values())  # nothing embedded again
    assert again.concept_vectors == len(_with_vectors(store)) - len(done)
