"""A document longer than one write group is written in bounded transactions (slices of its chunks,
then its row), readers never see a part of it, and a stop, a failure or a crash part-way leaves the
store as if the write had not begun. Generated chunks, vectors and mentions on the real engine: the
write path alone (MiniLM only where an Ingestor is built, to delete)."""

from __future__ import annotations

import datetime
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_ingest_safety import integrity

from surreal_kgrag.chunking import SentenceChunker
from surreal_kgrag.db.sdk import RecordID
from surreal_kgrag.errors import QueryExecutionError
from surreal_kgrag.extract import NOUN_PHRASE, TITLE_KIND
from surreal_kgrag.ingest import IngestConfig, Ingestor
from surreal_kgrag.ingest.delete import delete_records
from surreal_kgrag.ingest.records import DocumentWork, prepare
from surreal_kgrag.ingest.slices import claim, finish_pending_writes, slices
from surreal_kgrag.ingest.writer import Writer
from surreal_kgrag.models import ConceptMention, IngestSummary, SourceDocument, TextChunk
from surreal_kgrag.retrieval import Scope
from surreal_kgrag.schema import ensure_schema
from surreal_kgrag.store import SurrealStore
from surreal_kgrag.surql import NO_FILTER
from surreal_kgrag.tools import NotFoundError, ToolDispatcher

GROUP = 64  # chunks per write transaction in these tests (IngestConfig.group_chunks is 256)
WORDS = "revenue margin segment growth quarter operating income cash assets liabilities equity shares".split()


def document(key: str, chunks: int, seed: int, phrase: str = "") -> DocumentWork:
    """``chunks`` generated chunks; each mentions 6 of 150 shared concepts, so concepts recur across
    chunks, slices and documents. ``phrase`` ends every tenth chunk's text (a name to bridge to)."""
    rng = random.Random(seed)
    texts = [" ".join(rng.choice(WORDS) for _ in range(60)) + f" {seed}-{i}." + (f" {phrase}" if phrase and i % 10 == 0 else "")
             for i in range(chunks)]
    spans, position = [], 0
    for index, text in enumerate(texts):
        spans.append(TextChunk(index=index, content=text, start=position, end=position + len(text)))
        position += len(text) + 1
    work = DocumentWork(SourceDocument(key=key, text="\n".join(texts), title=key.title(), source=key), spans, exists=False)
    work.mentions = [
        [ConceptMention(name=f"k{n}", display=f"K{n}", kind=NOUN_PHRASE) for n in rng.sample(range(150), 6)] for _ in spans
    ]
    work.vectors = [np.asarray(np.random.default_rng(seed * 10_000 + i).random(8), dtype=np.float32) for i in range(chunks)]
    work.contexts = texts
    return work


class Recording:
    """The store, recording how many chunks each write transaction carried."""

    def __init__(self, store: SurrealStore) -> None:
        self.store = store
        self.chunks_per_write: list[int] = []

    def query(self, name: str, params: Any = None, **placeholders: Any) -> list[Any]:
        if name == "write_documents":
            self.chunks_per_write.append(len(params["chunks"]))
        return self.store.query(name, params, **placeholders)


class Generated:
    """The generated vectors' embedder (the tools embed a name they do not find, for suggestions)."""

    def embed_query(self, text: str) -> list[float]:
        return np.random.default_rng(len(text)).random(8).tolist()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self.embed_query(text) for text in texts]


def write(store: Any, *works: DocumentWork, group_chunks: int = GROUP, stop: Any = lambda: False) -> IngestSummary:
    summary = IngestSummary()
    writer = Writer(store, summary, group_size=16, group_chunks=group_chunks, vector_min_chunks=2)
    writer.write([prepare(work, []) for work in works], stop)
    return summary


def snapshot(store: SurrealStore) -> dict[str, Any]:
    """Every row that counts chunks, as the tests compare two stores by it."""
    rows = {
        "documents": "SELECT id, chunk_count, content_hash FROM document ORDER BY id",
        "chunks": "SELECT VALUE id FROM chunk ORDER BY id",
        "concepts": "SELECT id, df, titled FROM concept ORDER BY id",
        "counts": "SELECT id, n, array::sort(chunks ?? []) AS chunks FROM concept_chunks ORDER BY id",
        "terms": "SELECT id, df FROM term ORDER BY id",
        "edges": "SELECT VALUE [in, out] FROM MENTIONS_CONCEPT ORDER BY in, out",
    }
    return {name: store.query_text("test: snapshot", sql)[-1] for name, sql in rows.items()}


def chunks_shown(store: SurrealStore, key: str) -> list[int]:
    """The chunk indexes a reader is shown for a document (get_document.surql)."""
    rows = store.query("get_document", {"ids": [RecordID("document", key)]})[-1]
    return [chunk["index"] for chunk in rows[0]["chunks"]] if rows else []


def hydrated(store: SurrealStore, work: DocumentWork) -> int:
    """How many of the document's chunks the retrievers' hydration would return."""
    prepared = prepare(work, [])
    params = {"documents": [prepared.record["id"]], "chunks": [c["id"] for c in prepared.chunks]}
    return len(store.query("hydrate_results", params, filter=NO_FILTER)[-1]["chunks"])


def nearest_shown(store: SurrealStore, key: str) -> list[int]:
    """The chunk indexes of a document a chunk-mode search shows (search_chunks.surql), from a KNN
    pool larger than the store."""
    params = {
        "embedding": [1.0] * 8, "threshold": -1.0, "limit": 100, "filtered": False,
        "keep": 1000, "exact": False, "count_inside": False, "post": False,
    }
    out = store.query("search_chunks", params, candidates=1000, ef=1000, filter=NO_FILTER, document_filter=NO_FILTER)[-1]
    return sorted(chunk["index"] for doc in out["documents"] if doc["id"].id == key for chunk in doc["chunks"])


@pytest.fixture
def store(tmp_path: Path):
    with SurrealStore(f"surrealkv://{tmp_path / 'kg'}") as s:
        ensure_schema(s, dimension=8, embedder="generated")
        yield s


@pytest.fixture
def reference(tmp_path: Path):
    """A second store, written in one transaction per document, to compare against."""
    with SurrealStore(f"surrealkv://{tmp_path / 'ref'}") as s:
        ensure_schema(s, dimension=8, embedder="generated")
        yield s


def test_a_long_document_is_written_in_bounded_transactions_and_ends_as_one_transaction_would(store, reference):
    short, long = document("short.txt", 20, seed=1), document("long.txt", 300, seed=2)
    recording = Recording(store)
    summary = write(recording, short, long)
    assert summary.failures == [] and (summary.added, summary.chunks) == (2, 320)
    assert max(recording.chunks_per_write) <= GROUP and len(recording.chunks_per_write) >= 300 // GROUP + 1
    write(reference, document("short.txt", 20, seed=1), document("long.txt", 300, seed=2), group_chunks=1_000)
    assert snapshot(store) == snapshot(reference)
    assert integrity(store) == {}
    assert chunks_shown(store, "long.txt") == list(range(300))


def test_a_long_document_replaced_by_a_new_version_keeps_no_old_chunk(store, reference):
    write(store, document("long.txt", 300, seed=2), document("other.txt", 90, seed=3))
    summary = write(store, document("long.txt", 200, seed=4))  # new text: new content hash, new chunk ids
    assert summary.failures == [] and summary.chunks == 200
    write(reference, document("other.txt", 90, seed=3), document("long.txt", 200, seed=4), group_chunks=1_000)
    assert snapshot(store) == snapshot(reference)
    assert integrity(store) == {}


def test_a_short_version_of_a_long_document_replaces_it_in_bounded_transactions(minilm, spacy_extractor):
    """Its write removes the stored version's chunks: the ingest counts them in its size, so it goes
    in slices (the old chunks removed in bounded steps), not in one transaction that grows with them."""
    config = IngestConfig(group_chunks=8, chunker=SentenceChunker(max_tokens=16, overlap_tokens=0))
    store, reference = SurrealStore("mem://"), SurrealStore("mem://")
    ingestor = Ingestor(store, embedder=minilm, extractor=spacy_extractor, config=config)
    sentences = [f"Ledger entry {i} records a payment to the Lisbon office in {1900 + i}." for i in range(40)]
    assert ingestor.ingest_texts([" ".join(sentences)], ids=["ledger"]).chunks > 3 * 8
    names: list[str] = []
    query = SurrealStore.query

    def recorded(self: SurrealStore, name: str, params: Any = None, **placeholders: Any) -> list[Any]:
        names.append(name)
        return query(self, name, params, **placeholders)

    SurrealStore.query = recorded  # type: ignore[method-assign]
    try:
        summary = ingestor.ingest_texts([" ".join(sentences[:2])], ids=["ledger"])
    finally:
        SurrealStore.query = query  # type: ignore[method-assign]
    assert (summary.updated, summary.failures) == (1, []) and summary.chunks <= 8
    assert "commit_document" in names and "remove_stale_chunks" in names  # the slice path
    Ingestor(reference, embedder=minilm, extractor=spacy_extractor, config=config).ingest_texts([" ".join(sentences[:2])], ids=["ledger"])
    assert snapshot(store) == snapshot(reference) and integrity(store) == {}
    store.close()
    reference.close()


def test_readers_see_the_old_version_while_the_new_one_is_written_and_a_stop_rolls_it_back(store):
    old, new = document("long.txt", 130, seed=2), document("long.txt", 200, seed=5)
    write(store, old)
    before = snapshot(store)
    seen: list[tuple[list[int], int, int]] = []

    def stop_after_two_slices() -> bool:
        stored = store.query_text("test: chunks", "RETURN count(SELECT id FROM chunk);")[-1]
        if stored >= 130 + 2 * GROUP:  # two slices of the new version are stored beside the old one
            seen.append((chunks_shown(store, "long.txt"), nearest_shown(store, "long.txt"), hydrated(store, new), hydrated(store, old)))
            return True
        return False

    summary = write(store, new, stop=stop_after_two_slices)
    assert seen == [(list(range(130)), list(range(130)), 0, 130)]  # old version whole, nothing of the new one
    assert summary.added == summary.updated == 0 and summary.chunks == 0
    assert snapshot(store) == before and integrity(store) == {}


def test_a_crash_part_way_leaves_chunks_no_reader_sees_and_the_next_run_removes_them(store, reference):
    write(store, document("other.txt", 40, seed=3))
    write(reference, document("other.txt", 40, seed=3))
    work = document("long.txt", 200, seed=2)
    writer = Writer(store, IngestSummary(), group_size=16, group_chunks=GROUP, vector_min_chunks=2)
    claim(store, RecordID("document", "long.txt"))
    counted: set[RecordID] = set()
    for part in list(slices(prepare(work, []), GROUP))[:2]:  # what a process killed after two slices leaves
        writer._write([part], counted)
    assert store.query_text("test: chunks", "RETURN count(SELECT id FROM chunk);")[-1] == 40 + 2 * GROUP
    assert chunks_shown(store, "long.txt") == [] and hydrated(store, work) == 0

    assert finish_pending_writes(store, GROUP) == 0  # a write renewed just now may be another process's, running
    assert integrity(store) == {"chunks_without_document": 2 * GROUP, "chunks_not_of_stored_version": 2 * GROUP, "pending_writes": 1}
    assert finish_pending_writes(store, GROUP, abandoned_after=datetime.timedelta(0)) == 1
    assert snapshot(store) == snapshot(reference) and integrity(store) == {}


def test_a_failed_clean_up_after_a_committed_long_write_is_left_to_the_next_run(store, reference, monkeypatch, caplog):
    """The old chunks of a replaced long document go after its new version is committed; when that
    removal fails, the write still counts, the run goes on, readers see the new version, and the
    next run's finish_pending_writes removes the rest."""
    write(store, document("long.txt", 130, seed=2))
    original = store.query
    committed: list[str] = []

    def refused(name: str, params: Any = None, **placeholders: Any) -> list[Any]:
        if name == "remove_stale_chunks" and committed and params["doc"].id == "long.txt":
            raise QueryExecutionError("SurrealDB rejected remove_stale_chunks.surql: the disk is full")
        committed.extend([name] if name == "commit_document" else [])
        return original(name, params, **placeholders)

    monkeypatch.setattr(store, "query", refused)
    summary = write(store, document("long.txt", 100, seed=5), document("other.txt", 90, seed=3))
    monkeypatch.undo()
    assert summary.failures == [] and summary.chunks == 190 and "the next ingest removes them" in caplog.text
    assert chunks_shown(store, "long.txt") == list(range(100)) and chunks_shown(store, "other.txt") == list(range(90))
    assert integrity(store)["chunks_not_of_stored_version"] == 130
    assert finish_pending_writes(store, GROUP, abandoned_after=datetime.timedelta(0)) == 1
    write(reference, document("long.txt", 100, seed=5), document("other.txt", 90, seed=3), group_chunks=1_000)
    assert snapshot(store) == snapshot(reference) and integrity(store) == {}


def test_a_long_document_is_deleted_in_bounded_transactions(store, reference, monkeypatch):
    write(store, document("long.txt", 300, seed=2), document("other.txt", 90, seed=3))
    write(reference, document("other.txt", 90, seed=3))
    removed: list[int] = []
    original = store.query

    def spy(name: str, params: Any = None, **placeholders: Any) -> list[Any]:
        result = original(name, params, **placeholders)
        if name == "remove_stale_chunks":
            removed.append(result[-1])
        return result

    monkeypatch.setattr(store, "query", spy)
    assert delete_records(store, [RecordID("document", "long.txt"), RecordID("document", "nope")], slice_chunks=GROUP) == 1
    assert removed and max(removed) <= GROUP and sum(removed) == 300
    assert snapshot(store) == snapshot(reference) and integrity(store) == {}


def test_a_key_that_holds_or_ends_in_colons_is_written_in_slices_and_replaced_whole(store, reference):
    """Chunk ids are '<key>::<hash>::<index>'; a key like 'ledger::2024:' must not confuse which version a chunk is of."""
    key = "ledger::2024:"
    write(store, document(key, 150, seed=2))
    assert chunks_shown(store, key) == list(range(150))
    summary = write(store, document(key, 100, seed=6))
    assert summary.failures == [] and summary.chunks == 100
    assert chunks_shown(store, key) == list(range(100))
    write(reference, document(key, 100, seed=6), group_chunks=1_000)
    assert snapshot(store) == snapshot(reference) and integrity(store) == {}


def test_short_documents_are_deleted_in_transactions_of_the_configured_size(store, reference, minilm, monkeypatch):
    write(store, *(document(f"short-{i}.txt", 5, seed=10 + i) for i in range(12)))
    sizes: list[int] = []
    original = store.query

    def spy(name: str, params: Any = None, **placeholders: Any) -> list[Any]:
        if name == "delete_documents":
            sizes.append(len(params["doc_ids"]))
        return original(name, params, **placeholders)

    monkeypatch.setattr(store, "query", spy)
    ingestor = Ingestor(store, embedder=minilm, config=IngestConfig(group_chunks=16))  # 3 documents of 5 chunks a group
    assert ingestor.delete([f"short-{i}.txt" for i in range(12)]) == 12
    assert sizes == [3, 3, 3, 3]
    assert snapshot(store) == snapshot(reference) and integrity(store) == {}


def test_a_value_the_sdk_cannot_encode_fails_its_document_and_the_others_are_written(store, reference):
    """The SDK raises TypeError for a complex number. The loaders refuse one before any model work;
    the records are built here to reach the writer with it (short, and written in slices)."""
    works = [document("good.txt", 10, seed=1), document("bad.txt", 10, seed=2), document("bad-long.txt", 150, seed=3),
             document("after.txt", 10, seed=4)]
    prepared = [prepare(work, []) for work in works]
    for item in prepared[1:3]:
        item.record["metadata"] = {"phase": complex(1, 2)}
    summary = IngestSummary()
    Writer(store, summary, group_size=16, group_chunks=GROUP, vector_min_chunks=2).write(prepared, lambda: False)
    assert summary.added == 2 and [f.source for f in summary.failures] == ["bad.txt", "bad-long.txt"]
    assert all("cannot encode complex" in f.reason for f in summary.failures)
    write(reference, document("good.txt", 10, seed=1), document("after.txt", 10, seed=4))
    assert snapshot(store) == snapshot(reference) and integrity(store) == {}


class Checking:
    """The store, checking after each transaction that changes edges that every concept's `df` is
    the number of documents its edges come from and `titled` whether one of them is `own`."""

    WRITES = ("write_documents", "remove_stale_chunks", "retire_document", "delete_documents", "commit_document")

    def __init__(self, store: SurrealStore) -> None:
        self.store = store
        self.wrong: list[Any] = []
        self.writes: dict[str, int] = {}

    def query(self, name: str, params: Any = None, **placeholders: Any) -> list[Any]:
        result = self.store.query(name, params, **placeholders)
        if name in self.WRITES:
            self.writes[name] = self.writes.get(name, 0) + 1
            self.wrong += self.store.query_text("test: df", (
                "SELECT VALUE [record::id(id), df, titled] FROM concept"
                " WHERE df != count(array::distinct(<-MENTIONS_CONCEPT.doc)) OR titled != array::any(<-MENTIONS_CONCEPT.own);"
            ))[-1]
        return result


def test_frequencies_and_titles_of_a_concept_shared_by_long_documents_follow_slices_updates_and_deletes(store):
    """df and `titled` change by deltas (fragments/document_frequencies.surql), also where a document
    keeps other chunks: a stored document's slice, a bridged chunk, a stale chunk removed. `ledger` is
    the title of A and D (own edges from all their chunks) and mentioned by B and C; `harbour office`
    is E's title, named in B's chunks (reverse bridges into a long stored document). Every
    transaction must leave each concept's df and titled equal to a count from its edges."""
    ledger, title = ConceptMention(name="ledger", display="Ledger", kind=NOUN_PHRASE), ConceptMention(name="ledger", display="Ledger", kind=TITLE_KIND)
    harbour = ConceptMention(name="harbour office", display="Harbour Office", kind=TITLE_KIND)
    checking = Checking(store)

    def work(key: str, chunks: int, seed: int, every: int = 0, phrase: str = "") -> DocumentWork:
        made = document(key, chunks, seed, phrase)
        made.mentions = [[*m, ledger] if every and i % every == 0 else m for i, m in enumerate(made.mentions)]
        return made

    def write_all(*items: tuple[DocumentWork, list[ConceptMention]]) -> None:
        summary = IngestSummary()
        Writer(checking, summary, group_size=16, group_chunks=GROUP, vector_min_chunks=2).write(
            [prepare(made, titles) for made, titles in items], lambda: False
        )
        assert summary.failures == []

    def concept(name: str) -> dict[str, Any] | None:
        rows = store.query_text("test: concept", "SELECT df, titled FROM type::record('concept', $n);", {"n": name})[-1]
        return rows[0] if rows else None

    write_all((work("a", 150, 1), [title]), (work("b", 130, 2, every=3, phrase="Harbour Office"), []), (work("c", 20, 3, every=5), []),
              (work("d", 100, 4), [title]))
    assert concept("ledger") == {"df": 4, "titled": True}
    write_all((work("e", 70, 5), [harbour]))  # bridged from B's stored chunks
    assert concept("harbour office") == {"df": 2, "titled": True}
    write_all((work("a", 70, 6, every=4), []))  # a shorter version of A, no longer titled: D still is
    assert concept("ledger") == {"df": 4, "titled": True}
    write_all((work("b", 80, 7), []))  # a shorter version of B that mentions neither
    assert concept("ledger") == {"df": 3, "titled": True} and concept("harbour office") == {"df": 1, "titled": True}
    assert delete_records(checking, [RecordID("document", "d")], slice_chunks=GROUP) == 1  # in steps
    assert concept("ledger") == {"df": 2, "titled": False}
    write_all((work("a", 90, 8, every=2), [title]), (work("b", 75, 9, every=3, phrase="Harbour Office"), []))  # titled again; bridged again
    assert concept("ledger") == {"df": 3, "titled": True} and concept("harbour office") == {"df": 2, "titled": True}
    assert delete_records(checking, [RecordID("document", k) for k in ("a", "e", "c")], slice_chunks=GROUP) == 3
    assert concept("ledger") == {"df": 1, "titled": False} and concept("harbour office") == {"df": 1, "titled": False}
    assert checking.wrong == []
    assert checking.writes["remove_stale_chunks"] > 4 and checking.writes["commit_document"] >= 6  # the slice path throughout
    assert integrity(store) == {}


def test_the_concept_tools_show_no_chunk_of_an_older_version_left_by_a_stop_after_the_commit(store, monkeypatch):
    """A long document replaced by a public version: its row is switched to the new version first and
    its old chunks removed after. A stop in between leaves the old, secret chunks; no concept tool
    shows them, or the concepts only they mention, to a caller who may read the new version."""
    old, new = document("long.txt", 130, seed=2), document("long.txt", 100, seed=5)
    old.doc = old.doc.model_copy(update={"access": ["secret"]})
    new.doc, new.exists = new.doc.model_copy(update={"access": ["public"]}), True
    osprey = ConceptMention(name="osprey unit", display="Osprey Unit", kind=NOUN_PHRASE)  # in both versions' first chunk
    old.mentions[0] = [*old.mentions[0], osprey, ConceptMention(name="falcon plan", display="Falcon Plan", kind=NOUN_PHRASE)]
    new.mentions[0] = [*new.mentions[0], osprey]
    write(store, old)
    original = store.query
    committed: list[str] = []

    def stopped(name: str, params: Any = None, **placeholders: Any) -> list[Any]:
        if name == "remove_stale_chunks" and committed:
            raise KeyboardInterrupt  # the process stops once the new version is committed
        committed.extend([name] if name == "commit_document" else [])
        return original(name, params, **placeholders)

    monkeypatch.setattr(store, "query", stopped)
    with pytest.raises(KeyboardInterrupt):
        write(store, new)
    monkeypatch.undo()
    assert store.query_text("test: old chunks", "RETURN count(SELECT id FROM chunk WHERE doc = document:⟨long.txt⟩);")[-1] > 100
    public = ToolDispatcher(store, embedder=Generated(), scope=Scope(access=["public"]))
    with pytest.raises(NotFoundError):
        public.invoke("documents_for_concept", {"concept": "Falcon Plan"})
    related = public.invoke("related_concepts", {"concept": "Osprey Unit", "limit": 50})
    assert {r.id for r in related.related} == {m.name for m in new.mentions[0]} - {"osprey unit"}
    documents = public.invoke("documents_for_concept", {"concept": "Osprey Unit"}).documents
    assert [(d.id, d.chunks) for d in documents] == [("long.txt", 1)]
