"""The ingestion pipeline on the real embedded SurrealDB with the real spaCy and MiniLM models."""

from __future__ import annotations

import _thread
import json
import shutil
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from surrealdb import RecordID

from surreal_kgrag import IngestConfig, Ingestor, SourceDocument, SurrealStore, get_stats
from surreal_kgrag.chunking import SentenceChunker
from surreal_kgrag.cli import main as cli_main
from surreal_kgrag.db import IndexSettings
from surreal_kgrag.errors import ConfigurationError
from surreal_kgrag.ingest import IngestInterrupted
from surreal_kgrag.llm import ReadonlyLimits, run_readonly_query
from surreal_kgrag.retrieval import make_retriever

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "data"


class CountingEmbedder:
    """The real MiniLM embedder, counting the texts it is asked to embed."""

    def __init__(self, inner):
        self.inner = inner
        self.texts: list[str] = []

    name = property(lambda self: self.inner.name)
    dimension = property(lambda self: self.inner.dimension)

    def embed_documents(self, texts):
        self.texts.extend(texts)
        return self.inner.embed_documents(texts)

    def embed_query(self, text):
        return self.inner.embed_query(text)

    async def aembed_documents(self, texts):
        return self.embed_documents(texts)

    async def aembed_query(self, text):
        return self.inner.embed_query(text)


@pytest.fixture
def store():
    with SurrealStore("mem://") as s:
        yield s


@pytest.fixture
def ingestor(store, minilm, spacy_extractor):
    return Ingestor(store, embedder=minilm, extractor=spacy_extractor)


def _document(store, key):
    rows = store.query("get_document", {"ids": [RecordID("document", key)]})[-1]
    return rows[0] if rows else None


def _concepts(store, *names):
    return {row["name"]: row for row in store.query("get_concepts", {"ids": [RecordID("concept", n) for n in names]})[-1]}


def _counts(store):
    stats = get_stats(store)
    assert stats.searchable_chunks == stats.chunks  # every chunk has its full-text row, and no row outlives its chunk
    return stats.documents, stats.chunks, stats.concepts, stats.mentions, stats.shared_concepts


def test_ingest_folder_then_reingest_skips_everything(ingestor, store):
    summary = ingestor.ingest([EXAMPLES])
    files = sorted(p for p in EXAMPLES.iterdir() if p.is_file())
    assert (summary.added, summary.updated, summary.failed) == (len(files), 0, 0)
    documents, chunks, concepts, mentions, shared = _counts(store)
    assert documents == len(files) and chunks >= documents and concepts > 0 and mentions > 0
    assert shared > 0  # e.g. "marie curie" and "poland" appear in several documents
    assert summary.chunks == chunks and summary.edges == mentions and summary.concepts == concepts

    again = ingestor.ingest([EXAMPLES])
    assert (again.added, again.updated, again.skipped) == (0, 0, len(files))
    assert _counts(store) == (documents, chunks, concepts, mentions, shared)

    curie = _concepts(store, "marie curie")["marie curie"]
    assert curie["df"] >= 2 and len(curie["documents"]) == curie["df"]


def test_update_replaces_chunks_and_removes_orphan_concepts(ingestor, store, tmp_path):
    folder = tmp_path / "docs"
    shutil.copytree(EXAMPLES, folder)
    note = folder / "note.txt"
    note.write_text("The Zanzibar Archive holds letters from Marie Curie. Poland is mentioned once.")
    ingestor.ingest([folder])
    key = str(note.resolve())
    assert "zanzibar archive" in _concepts(store, "zanzibar archive")
    poland_df = _concepts(store, "poland")["poland"]["df"]

    note.write_text("The Kilimanjaro Library keeps a copy of a famous physics thesis.")
    summary = ingestor.ingest([folder])
    assert (summary.updated, summary.added, summary.skipped) == (1, 0, len(list(EXAMPLES.iterdir())))
    doc = _document(store, key)
    assert doc["chunks"][0]["content"].startswith("The Kilimanjaro Library")
    assert len(doc["chunks"]) == doc["chunk_count"]
    concepts = _concepts(store, "zanzibar archive", "kilimanjaro library", "poland")
    assert "zanzibar archive" not in concepts  # orphaned by the update, removed
    assert "kilimanjaro library" in concepts
    assert concepts["poland"]["df"] == poland_df - 1


def test_delete_removes_document_chunks_edges_and_orphans(ingestor, store):
    ingestor.ingest([EXAMPLES])
    before = _counts(store)
    key = str((EXAMPLES / "polonium.txt").resolve())
    polonium_chunks = _document(store, key)["chunk_count"]
    shared_before = _concepts(store, "poland")["poland"]["df"]

    assert ingestor.delete([key, "no-such-document"]) == 1
    assert _document(store, key) is None
    documents, chunks, concepts, mentions, _ = _counts(store)
    assert documents == before[0] - 1 and chunks == before[1] - polonium_chunks
    assert mentions < before[3] and concepts < before[2]
    assert _concepts(store, "poland")["poland"]["df"] == shared_before - 1
    # No concept is left that nothing mentions.
    stats = store.query("stats")[0]
    assert stats["concepts"] == concepts
    assert ingestor.delete([key]) == 0


def test_hostile_strings_are_stored_verbatim(ingestor, store):
    hostile_title = "Robert'); REMOVE TABLE chunk; -- ⟨$x⟩ `y` \"z\""
    hostile_text = "SELECT * FROM document; DELETE chunk; $embedding <|1,1|> {{k}} — Ünïcode 🚀 says hello to Paris."
    metadata = {"author": "x'; REMOVE TABLE document; --", "editor": None, "nested": {"$where": "1=1", "list": ["a", None, 3]}}
    doc = SourceDocument(key="evil'; DELETE document; --", text=hostile_text, title=hostile_title, source="test",
                         metadata=metadata)
    summary = ingestor.ingest([doc])
    assert summary.added == 1, summary.failures
    stored = _document(store, doc.key)
    assert stored["title"] == hostile_title
    # the null is stored (as SurrealDB's NULL, not dropped as NONE would be) and reads back as None
    assert stored["metadata"] == metadata and "editor" in stored["metadata"]  # a NONE field would be gone
    assert stored["chunks"][0]["content"] == hostile_text
    assert _counts(store)[:2] == (1, 1)  # nothing was executed


def test_a_long_tag_list_is_stored_whole_and_gives_a_bounded_number_of_concepts(store, minilm, spacy_extractor):
    """Every metadata concept is linked to every chunk: 20,000 tags on a many-chunk document give the
    first max_metadata_concepts concepts, not 20,000 edges a chunk; the metadata is stored whole."""
    tags = [f"label {i}" for i in range(20_000)]
    text = " ".join(f"Station {i} recorded rain in the valley on day {i}." for i in range(60))
    config = IngestConfig(chunker=SentenceChunker(max_tokens=24, overlap_tokens=0), max_metadata_concepts=5)
    summary = Ingestor(store, embedder=minilm, extractor=spacy_extractor, config=config).ingest(
        [SourceDocument(key="weather", text=text, source="w", metadata={"tags": tags})]
    )
    assert summary.added == 1, summary.failures
    stored = _document(store, "weather")
    assert stored["metadata"]["tags"] == tags and stored["chunk_count"] > 10
    linked = _concepts(store, *tags[:10])
    assert sorted(linked) == tags[:5]  # no document title here: the first five tags
    assert all(row["df"] == 1 for row in linked.values())
    edges = store.query("mention_edges")[-1]
    assert sum(str(e["out"].id) in linked for e in edges) == 5 * stored["chunk_count"]


def test_bad_inputs_are_reported_and_the_batch_goes_on(ingestor, store, tmp_path):
    (tmp_path / "good.txt").write_text("Grace Hopper worked on the Harvard Mark I computer.")
    (tmp_path / "empty.txt").write_text("   \n")
    (tmp_path / "binary.txt").write_bytes(b"\x00\x01\x02binary")
    (tmp_path / "records.jsonl").write_text(
        json.dumps({"id": "r1", "title": "R1", "text": "Alan Turing studied at King's College, Cambridge."}) + "\n"
        + "{not json\n"
        + json.dumps({"id": "r2", "title": "R2"}) + "\n"
    )
    summary = ingestor.ingest([tmp_path, tmp_path / "missing.md"])
    assert summary.added == 2
    reasons = {str(f) for f in summary.failures}
    assert summary.failed == len(summary.failures) == 5
    assert any("empty.txt" in r for r in reasons) and any("binary.txt" in r for r in reasons)
    assert any("records.jsonl:2" in r for r in reasons) and any("records.jsonl:3" in r for r in reasons)
    assert any("missing.md" in r for r in reasons)
    assert _counts(store)[0] == 2


def test_crash_mid_ingest_leaves_no_half_written_document(store, minilm, spacy_extractor):
    class CrashingExtractor:
        def __init__(self):
            self.calls = 0

        def extract(self, texts):
            self.calls += 1
            if self.calls == 2:
                raise RuntimeError("simulated crash")
            return spacy_extractor.extract(texts)

    texts = [f"Document {i} is about the city of Lisbon and the river Tagus number {i}." for i in range(6)]
    config = IngestConfig(batch_size=3, group_size=2)
    ingestor = Ingestor(store, embedder=minilm, extractor=CrashingExtractor(), config=config)
    with pytest.raises(RuntimeError, match="simulated crash"):
        ingestor.ingest_texts(texts, ids=[f"d{i}" for i in range(6)])
    documents, chunks, *_ = _counts(store)
    assert documents == 3 and chunks == 3  # the first batch only, complete
    for i in range(3):
        doc = _document(store, f"d{i}")
        assert doc is not None and len(doc["chunks"]) == doc["chunk_count"] == 1
    # Resuming finishes the job and skips what is already there.
    summary = Ingestor(store, embedder=minilm, extractor=spacy_extractor, config=config).ingest_texts(
        texts, ids=[f"d{i}" for i in range(6)]
    )
    assert (summary.skipped, summary.added) == (3, 3)


def test_ingest_texts_refuses_arguments_that_do_not_line_up_before_writing(store, minilm, spacy_extractor):
    ingestor = Ingestor(store, embedder=minilm, extractor=spacy_extractor)
    before = _counts(store)
    texts = ["Porto lies on the Douro.", "Braga is older than Portugal.", "Faro is in the Algarve."]
    with pytest.raises(ConfigurationError, match="ids has 2 items for 3 texts"):
        ingestor.ingest_texts(texts, ids=["porto", "braga"])
    with pytest.raises(ConfigurationError, match="titles has 4 items for 3 texts"):
        ingestor.ingest_texts(texts, titles=["Porto", "Braga", "Faro", "Evora"])
    with pytest.raises(ConfigurationError, match="one string"):
        ingestor.ingest_texts("Porto lies on the Douro.")
    assert _counts(store) == before  # nothing was written


def _vectors(store) -> dict[str, list[float] | None]:
    """Concept name -> its vector, None when it has none."""
    return {row["name"]: row.get("embedding") for row in store.query("concept_vectors")[-1]}


def _queued(store) -> int:
    return store.query_text("test: queue length", "RETURN count(SELECT id FROM concept_vector_queue);")[-1]


def _assert_vectors_where_earned(store, min_chunks: int = 2) -> None:
    """Every concept that names a document or that ``min_chunks`` chunks mention has a vector; no other has."""
    counts = _chunk_counts(store)
    titled = {key for key, _ in store.query_text("test: titled", "SELECT VALUE [name, titled] FROM concept WHERE titled;")[-1]}
    vectors = _vectors(store)
    assert vectors and _queued(store) == 0
    for name, vector in vectors.items():
        assert (vector is not None) == (name in titled or counts[name] >= min_chunks), (name, counts[name])
    report = store.query("check_integrity", {"vector_min_chunks": min_chunks})[-1]
    assert report["concepts_missing_vector"] == report["concepts_with_empty_vector"] == 0


SHORT_CHUNKS = SentenceChunker(max_tokens=16, overlap_tokens=0)  # about a sentence per chunk
BABBAGE = [
    "Charles Babbage designed the Analytical Engine. Babbage lived in London for decades. "
    "The Royal Society admired the Analytical Engine. Babbage corresponded with Michael Faraday.",
    "Ada Lovelace wrote notes on the engine. She lived in London as well. Her notes were published in 1843.",
]


def _concept_names(texts: list[str]) -> list[str]:
    """What an embedder was asked to embed besides chunks (which are longer than any name here)."""
    return [t.lower() for t in texts if len(t) < 40 and "." not in t]


def test_a_concept_gets_one_vector_once_two_chunks_mention_it_or_it_names_a_document(store, minilm, spacy_extractor):
    counting = CountingEmbedder(minilm)
    config = IngestConfig(chunker=SHORT_CHUNKS)
    summary = Ingestor(store, embedder=counting, extractor=spacy_extractor, config=config).ingest(
        [SourceDocument(key=f"b{i}", source=f"b{i}.txt", text=text) for i, text in enumerate(BABBAGE)]
        + [SourceDocument(key="guild", source="guild.txt", title="Harbour Guild", text="Merchants met in winter.")]
    )
    assert summary.chunks >= 5  # several per document
    vectors = _vectors(store)
    assert vectors["london"] is not None and vectors["analytical engine"] is not None  # two chunks each
    assert vectors["harbour guild"] is not None  # one chunk, but it names a document
    assert vectors["ada lovelace"] is None  # one chunk
    _assert_vectors_where_earned(store)
    names = _concept_names(counting.texts)
    assert sorted(names) == sorted(n for n, v in vectors.items() if v is not None) and summary.concept_vectors == len(names)
    # The model's vector for the name as first written, stored as float32 values (read back bit for bit).
    london = vectors["london"]
    assert np.asarray(london, dtype=np.float32).tolist() == london
    assert np.allclose(london, minilm.embed_documents(["London"])[0], atol=1e-5)

    # A later document mentions Ada Lovelace again: her concept earns its vector now; London's is not computed again.
    counting.texts.clear()
    later = Ingestor(store, embedder=counting, extractor=spacy_extractor, config=config)  # a new process, same store
    later.ingest_texts(["Ada Lovelace is remembered in London."], ids=["c"])
    assert "ada lovelace" in _concept_names(counting.texts) and "london" not in _concept_names(counting.texts)
    assert _vectors(store)["ada lovelace"] is not None
    _assert_vectors_where_earned(store)


def test_min_chunks_of_one_embeds_every_concept(store, minilm, spacy_extractor):
    config = IngestConfig(chunker=SHORT_CHUNKS, concept_vector_min_chunks=1)
    summary = Ingestor(store, embedder=minilm, extractor=spacy_extractor, config=config).ingest_texts(BABBAGE, ids=["a", "b"])
    assert all(v is not None for v in _vectors(store).values()) and summary.concept_vectors == len(_vectors(store))
    _assert_vectors_where_earned(store, min_chunks=1)


def test_concept_vectors_cut_short_are_finished_by_the_next_run(store, minilm, spacy_extractor, ctrl_c_raises):
    class InterruptedVectors(CountingEmbedder):
        """MiniLM; Ctrl-C arrives (in the calling thread, as a real one does) while the run embeds its
        queued concepts (on their own thread); the slice being embedded is dropped, not written."""

        def embed_documents(self, texts):
            if threading.current_thread().name == "kgrag-vectors":
                _thread.interrupt_main()
                time.sleep(1.0)  # the run sees the Ctrl-C before this slice could be written
            return super().embed_documents(texts)

    config = IngestConfig(chunker=SHORT_CHUNKS)
    texts, ids = [*BABBAGE, "Ada Lovelace is remembered in London."], ["a", "b", "c"]
    with pytest.raises(IngestInterrupted) as interrupted:
        Ingestor(store, embedder=InterruptedVectors(minilm), extractor=spacy_extractor, config=config).ingest_texts(texts, ids=ids)
    assert interrupted.value.summary.added == 3  # every document was written completely
    # the run told the store what it wrote: optimize and the next run's rebuild rule count it
    assert store.index_states()["chunk"].pending == interrupted.value.summary.chunks > 0
    assert store.index_states()["text"].pending == 0  # new documents: nothing removed from the BM25 index
    queued = _queued(store)
    assert queued >= 3 and all(v is None for v in _vectors(store).values())
    report = store.query("check_integrity")[-1]
    assert report["concepts_missing_vector"] == 0  # each is waiting in the queue

    summary = Ingestor(store, embedder=minilm, extractor=spacy_extractor, config=config).ingest_texts(texts, ids=ids)
    assert summary.skipped == 3 and summary.concept_vectors == queued
    _assert_vectors_where_earned(store)


def test_chunker_settings_and_offsets_survive_the_store(store, minilm, spacy_extractor):
    text = " ".join(f"Sentence number {i} mentions Berlin and Vienna." for i in range(40))
    config = IngestConfig(chunker=SentenceChunker(max_tokens=40, overlap_tokens=8))
    Ingestor(store, embedder=minilm, extractor=spacy_extractor, config=config).ingest_texts([text], ids=["long"])
    doc = _document(store, "long")
    assert doc["chunk_count"] == len(doc["chunks"]) > 5
    assert [c["index"] for c in doc["chunks"]] == list(range(len(doc["chunks"])))
    for chunk in doc["chunks"]:
        assert text[chunk["char_start"] : chunk["char_end"]] == chunk["content"]


def test_framework_documents_are_ingested(ingestor, store):
    from langchain_core.documents import Document as LCDocument
    from llama_index.core import Document as LIDocument

    summary = ingestor.ingest([
        LCDocument(page_content="Niels Bohr worked in Copenhagen.", metadata={"title": "Bohr"}, id="lc-1"),
        LIDocument(text="Lise Meitner worked in Berlin.", metadata={"title": "Meitner"}, doc_id="li-1"),
    ])
    assert summary.added == 2, summary.failures
    assert _document(store, "lc-1")["title"] == "Bohr"
    assert _document(store, "li-1")["chunks"][0]["content"] == "Lise Meitner worked in Berlin."


async def test_async_ingest_and_delete(store, minilm, spacy_extractor):
    ingestor = Ingestor(store, embedder=minilm, extractor=spacy_extractor)
    summary = await ingestor.aingest_texts(["Enrico Fermi built a reactor in Chicago."], ids=["fermi"])
    assert summary.added == 1
    assert await ingestor.adelete(["fermi"]) == 1
    assert _counts(store)[:2] == (0, 0)


def test_vectors_are_normalised_and_searchable_right_after_ingest(ingestor, store, minilm):
    from surreal_kgrag import ChunkRetriever, ConceptRetriever

    ingestor.ingest([EXAMPLES])
    result = ChunkRetriever(store, embedder=minilm).search("Which element is named after Poland?", k=2)
    assert len(result.documents) == 2
    assert any("polonium" in d.source or "marie-curie" in d.source for d in result.documents)
    concept = ConceptRetriever(store, embedder=minilm).search("polonium", k=3)
    assert concept.documents and concept.documents[0].chunks[0].concepts
    vector = minilm.embed_query("x")
    assert np.isclose(np.linalg.norm(vector), 1.0, atol=1e-4)


def test_cli_ingest_stats_and_reingest(tmp_path, capsys):
    db = f"surrealkv://{tmp_path / 'kg'}"
    assert cli_main(["ingest", str(EXAMPLES), "--db", db, "--json", "--no-progress"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["added"] == len(list(EXAMPLES.iterdir())) and first["failed"] == 0
    assert cli_main(["stats", "--db", db, "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["documents"] == first["added"] and stats["concepts"] > 0 and stats["mentions"] > 0
    assert cli_main(["ingest", str(EXAMPLES), "--db", db, "--json", "--no-progress"]) == 0
    assert json.loads(capsys.readouterr().out)["skipped"] == first["added"]
    assert cli_main(["stats", "--db", db, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == stats
    assert cli_main(["query", "Where was Marie Curie born?", "--db", db, "-k", "2", "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert len(answer["documents"]) == 2


def test_document_frequencies_match_the_edges_after_grouped_writes_and_updates(store, minilm, spacy_extractor):
    # Small groups: concepts are created in one group and mentioned again from later ones.
    config = IngestConfig(batch_size=4, group_size=2)
    ingestor = Ingestor(store, embedder=minilm, extractor=spacy_extractor, config=config)
    texts = [f"Marie Curie visited Paris in {1890 + i}. Lisbon and Paris were on route {i}." for i in range(7)]
    ingestor.ingest_texts(texts, ids=[f"t{i}" for i in range(7)])
    ingestor.ingest_texts(["Lisbon only, this time."], ids=["t3"])  # an update drops mentions of paris
    names = [row["name"] for row in store.query("concept_vectors")[-1]]
    concepts = _concepts(store, *names)
    assert concepts["paris"]["df"] == 6 and concepts["lisbon"]["df"] == 7
    for row in concepts.values():
        assert row["df"] == len(row["documents"]) > 0, row


def test_a_key_met_again_in_a_later_batch_of_one_run(store, minilm, spacy_extractor):
    """The same document twice in one run, a batch apart (a folder and a file in it, repeated ids):
    the copy is skipped; a key whose text changed between its copies ends with the later text."""
    config = IngestConfig(batch_size=1, chunker=SHORT_CHUNKS)
    ingestor = Ingestor(store, embedder=minilm, extractor=spacy_extractor, config=config)

    def doc(key: str, text: str) -> SourceDocument:
        return SourceDocument(key=key, source=f"notes/{key}.txt", text=text)

    summary = ingestor.ingest([doc("a", BABBAGE[0]), doc("b", BABBAGE[1]), doc("a", BABBAGE[0])])
    assert (summary.added, summary.updated, summary.skipped, summary.failures) == (2, 0, 1, [])
    summary = ingestor.ingest([doc("a", BABBAGE[1]), doc("c", BABBAGE[0]), doc("a", BABBAGE[0])])
    assert (summary.added, summary.updated, summary.skipped, summary.failures) == (1, 2, 0, [])
    stored = {row["id"].id: row for row in store.query_text("test: docs", "SELECT id, chunk_count FROM document;")[-1]}
    chunks = store.query_text("test: chunks", "SELECT VALUE content FROM chunk WHERE doc = document:a ORDER BY index;")[-1]
    assert set(stored) == {"a", "b", "c"} and " ".join(chunks) == BABBAGE[0] and len(chunks) == stored["a"]["chunk_count"]
    with SurrealStore("mem://") as reference:  # the final documents, each ingested once
        Ingestor(reference, embedder=minilm, extractor=spacy_extractor, config=config).ingest(
            [doc("a", BABBAGE[0]), doc("b", BABBAGE[1]), doc("c", BABBAGE[0])]
        )
        assert store.query("check_integrity")[-1] == reference.query("check_integrity")[-1]


def test_a_copy_of_a_document_whose_write_failed_fails_with_it(store, minilm, spacy_extractor, monkeypatch):
    """The same document twice in one run, and its first write refused: the copy was counted as
    unchanged, though nothing of it was stored. It is reported with the first copy's reason, and
    the next run writes it."""
    from surreal_kgrag.errors import QueryExecutionError

    config = IngestConfig(batch_size=1, chunker=SHORT_CHUNKS)
    ingestor = Ingestor(store, embedder=minilm, extractor=spacy_extractor, config=config)
    query = SurrealStore.query
    refused: list[str] = []

    def first_write_of_a_refused(self, name, params=None, **placeholders):
        if name == "write_documents" and not refused and [d.id for d in params["doc_ids"]] == ["a"]:
            refused.append("a")
            raise QueryExecutionError("SurrealDB rejected write_documents.surql: the disk is full")
        return query(self, name, params, **placeholders)

    monkeypatch.setattr(SurrealStore, "query", first_write_of_a_refused)
    docs = [SourceDocument(key=key, source=f"notes/{key}.txt", text=BABBAGE[i]) for key, i in (("a", 0), ("b", 1), ("a", 0))]
    summary = ingestor.ingest(docs)
    monkeypatch.undo()
    assert refused == ["a"] and (summary.added, summary.skipped, summary.failed) == (1, 0, 2), summary
    first, echo = summary.failures
    assert first.source == echo.source == "notes/a.txt" and first.reason.startswith("write failed: ")
    assert echo.reason.startswith("not written: its text was given earlier in this ingest and that write failed: ")
    assert "the disk is full" in echo.reason
    assert store.query_text("test: a", "SELECT VALUE id.id() FROM document ORDER BY id;")[-1] == ["b"]
    again = ingestor.ingest(docs)
    assert (again.added, again.skipped, again.failed) == (1, 2, 0), again


def test_an_id_two_files_give_is_written_once_and_the_second_reported(store, minilm, spacy_extractor, tmp_path):
    """Records of two JSON Lines files and a JSON file sharing ids: the later ones replaced the
    earlier ones in the same run without a word. The first file read keeps the id; the rest are
    failures naming both places; the same folder given twice is the same documents again."""
    lines = {
        "a.jsonl": [("r1", BABBAGE[0]), ("r2", BABBAGE[1]), ("r3", "Ada Lovelace wrote the first program.")],
        "b.jsonl": [("r2", "Charles Darwin sailed on the Beagle."), ("r4", "Alan Turing broke the Enigma cipher.")],
    }
    for name, records in lines.items():
        (tmp_path / name).write_text("".join(json.dumps({"id": k, "text": t}) + "\n" for k, t in records), encoding="utf-8")
    (tmp_path / "c.json").write_text(json.dumps([{"id": "r3", "text": "Grace Hopper built a compiler."}]), encoding="utf-8")
    config = IngestConfig(batch_size=2, chunker=SHORT_CHUNKS)
    summary = Ingestor(store, embedder=minilm, extractor=spacy_extractor, config=config).ingest([tmp_path, tmp_path])
    assert (summary.added, summary.skipped) == (4, 4) and summary.failed == 4, summary.failures
    folder = tmp_path.resolve().as_posix()
    reasons = {f.source: f.reason for f in summary.failures}
    assert set(reasons) == {f"{folder}/b.jsonl:1", f"{folder}/c.json#0"}
    assert f"duplicate id 'r2': {folder}/a.jsonl:2 gave a document with another text" in reasons[f"{folder}/b.jsonl:1"]
    assert f"duplicate id 'r3': {folder}/a.jsonl:3 gave" in reasons[f"{folder}/c.json#0"]
    texts = store.query_text("test: texts", "SELECT VALUE [doc.id(), content] FROM chunk WHERE index = 0;")[-1]
    assert dict(texts)["r2"].startswith(BABBAGE[1][:40]) and dict(texts)["r3"].startswith("Ada Lovelace")
    assert set(dict(texts)) == {"r1", "r2", "r3", "r4"}


def test_the_same_text_from_two_sources_without_ids_is_one_document(store, minilm, spacy_extractor):
    """Without an id a document's key comes from its text: the same boilerplate in two files (a
    LangChain splitter's chunks of two PDFs) is the same key, and no failure."""
    from langchain_core.documents import Document

    docs = [
        Document(page_content="All rights reserved by the Babbage estate.", metadata={"source": "a.pdf"}),
        Document(page_content=BABBAGE[0], metadata={"source": "a.pdf"}),
        Document(page_content="All rights reserved by the Babbage estate.", metadata={"source": "b.pdf"}),
    ]
    summary = Ingestor(store, embedder=minilm, extractor=spacy_extractor, config=IngestConfig(chunker=SHORT_CHUNKS)).ingest(docs)
    assert summary.failures == [] and summary.added == 2


def test_frequencies_and_titles_follow_renames_moves_and_deletes_from_several_writers(store, minilm, spacy_extractor):
    """df and `titled` change by deltas (fragments/document_frequencies.surql): each step must leave
    them equal to a count from the edges, with writers on several threads sharing concepts."""
    config = IngestConfig(batch_size=4, group_size=2)
    places = ["Paris", "Lisbon", "Vienna", "Warsaw"]
    texts = {
        f"p{i}": f"Marie Curie wrote to Pierre Curie from {places[i % 4]} in {1890 + i}. {places[(i + 1) % 4]} replied."
        for i in range(12)
    }

    def ingest(keys):
        Ingestor(store, embedder=minilm, extractor=spacy_extractor, config=config).ingest(
            [SourceDocument(key=k, source=f"letters/{k}", text=texts[k], title=f"Letter {k}" if k != "p0" else "Marie Curie") for k in keys]
        )

    writers = [threading.Thread(target=ingest, args=(list(texts)[i::3],)) for i in range(3)]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join()

    def exact(expected_documents: int) -> dict:
        report = store.query("check_integrity")[-1]
        assert report["concepts_with_wrong_df"] == report["concepts_with_wrong_titled"] == 0, report
        assert report["concepts_unmentioned"] == report["name_counts_out_of_step"] == 0, report
        assert get_stats(store).documents == expected_documents
        return _concepts(store, "marie curie", "paris", "lisbon", "vienna", "warsaw")

    def titled(name: str) -> bool:
        return store.query_text("test: titled", "SELECT VALUE titled FROM ONLY $id;", {"id": RecordID("concept", name)})[-1]

    concepts = exact(12)
    assert concepts["marie curie"]["df"] == 12 and titled("marie curie")
    assert concepts["paris"]["df"] == 6  # p0, p4, p8 from Paris; p3, p7, p11 answered from it

    # p0 renamed: "marie curie" names no document any more, though every letter still mentions it.
    texts["p0"] = "Pierre Curie wrote from Vienna in 1890."
    Ingestor(store, embedder=minilm, extractor=spacy_extractor, config=config).ingest(
        [SourceDocument(key="p0", source="letters/p0", text=texts["p0"], title="Pierre Curie")]
    )
    concepts = exact(12)
    assert concepts["marie curie"]["df"] == 11 and not titled("marie curie")
    assert concepts["paris"]["df"] == 5
    assert titled("pierre curie")

    # Every document from Paris or answered from it goes: the concept goes with its last mention.
    assert Ingestor(store, embedder=minilm, extractor=spacy_extractor).delete(["p3", "p4", "p7", "p8", "p11"]) == 5
    concepts = exact(7)
    assert "paris" not in concepts and concepts["marie curie"]["df"] == 6


def _term_frequencies(store):
    return dict(store.query("term_frequencies")[-1])


def test_term_frequencies_follow_writes_updates_and_deletes(store, minilm, spacy_extractor):
    config = IngestConfig(batch_size=3, group_size=2)
    ingestor = Ingestor(store, embedder=minilm, extractor=spacy_extractor, config=config)
    texts = [f"Zanzibar traders sailed to Lisbon in {1890 + i}. Lisbon harbour {'was busy' if i % 2 else 'froze'}." for i in range(6)]
    ingestor.ingest_texts(texts, ids=[f"t{i}" for i in range(6)])
    terms = _term_frequencies(store)
    assert terms["lisbon"] == 6 and terms["zanzibar"] == 6  # once per chunk, however often a chunk repeats it
    assert terms["froze"] == 3 and terms["busi"] == 3  # analysed terms: kg_english stems "busy"

    ingestor.ingest_texts(["Only Lisbon, this time."], ids=["t0"])  # an update
    ingestor.delete(["t1"])
    terms = _term_frequencies(store)
    assert terms["lisbon"] == 5 and terms["zanzibar"] == 4 and terms["froze"] == 2 and terms["busi"] == 2
    assert all(df > 0 for df in terms.values())  # a term no chunk holds any more is gone

    # Counting from scratch (the schema 2 -> 3 migration) agrees with the running counts.
    store.query("migrate_v2_terms")
    assert _term_frequencies(store) == terms


def _chunk_counts(store):
    return dict(store.query("concept_chunk_counts")[-1])


def _edge_counts(store):
    """Chunks per concept counted from the edges themselves."""
    rows = run_readonly_query(
        store, "SELECT record::id(out) AS c, count() AS n FROM MENTIONS_CONCEPT GROUP BY c", limits=ReadonlyLimits(rows=10_000)
    ).rows
    return {row["c"]: row["n"] for row in rows}


def test_concept_chunk_counts_follow_writes_bridges_updates_and_deletes(store, minilm, spacy_extractor):
    config = IngestConfig(chunker=SentenceChunker(max_tokens=16, overlap_tokens=0), batch_size=3, group_size=2)
    ingestor = Ingestor(store, embedder=minilm, extractor=spacy_extractor, config=config)
    sentences = ["Zanzibar traders sailed to Lisbon.", "The Quiet Harbour Guild met in winter.", "Traders met in Zanzibar again."]
    ingestor.ingest_texts([" ".join(sentences * (i + 1)) for i in range(5)], ids=[f"t{i}" for i in range(5)])
    before = _chunk_counts(store).get("harbour guild", 0)  # spaCy finds it in some chunks, not all
    # A document titled "Harbour Guild" written later: the stored chunks that name it gain bridge edges.
    ingestor.ingest([SourceDocument(key="guild", source="guild.txt", title="Harbour Guild", text="Merchants of Portugal.")])
    counts = _chunk_counts(store)
    assert counts == _edge_counts(store)
    assert counts["harbour guild"] > before + 1  # its own chunk and bridges from the other chunks naming it
    assert counts["zanzibar"] >= 10  # several chunks per document

    ingestor.ingest_texts(["Only Lisbon, this time."], ids=["t0"])  # an update
    ingestor.delete(["t1", "guild"])
    after = _chunk_counts(store)
    assert after == _edge_counts(store)
    assert after["zanzibar"] < counts["zanzibar"] and all(n > 0 for n in after.values())
    assert set(after) == {key for key, _ in store.query("concept_frequencies")[-1]}  # one count per concept
    report = store.query("check_integrity")[-1]
    assert report["concepts_with_wrong_chunk_count"] == report["chunk_counts_without_concept"] == 0

    # Counting from scratch (the schema 4 -> 5 migration) agrees with the running counts.
    store.query("migrate_v4_concept_chunks")
    assert _chunk_counts(store) == after


def test_a_search_of_a_store_nothing_was_ingested_into_finds_nothing(store, minilm, spacy_extractor):
    """Every mode answers no documents (it raised "the table 'chunk' does not exist"); the same
    retrievers find the documents once they are ingested."""
    from surreal_kgrag import make_retriever

    retrievers = {mode: make_retriever(mode, store, embedder=minilm) for mode in ("chunk", "concept", "hybrid", "graph")}
    for mode, retriever in retrievers.items():
        result = retriever.search("Who named polonium?", k=3)
        assert result.documents == [] and result.mode == mode
    with pytest.raises(ConfigurationError, match="k"):
        retrievers["chunk"].search("Who named polonium?", k=10**9)  # bad input is still an error
    Ingestor(store, embedder=minilm, extractor=spacy_extractor).ingest(EXAMPLES)
    for mode, retriever in retrievers.items():
        assert "polonium" in retriever.search("Who named polonium?", k=3).documents[0].id, mode


def test_an_update_counts_the_chunks_it_removed_for_the_bm25_index_and_new_documents_do_not(store, minilm, spacy_extractor):
    """The BM25 index has no queue: only removed rows leave keys a new generation clears
    (benchmarks/fulltext_scorer.py), so an ingest counts the replaced chunks there and every
    written vector in the HNSW index."""
    config = IngestConfig(chunker=SHORT_CHUNKS, index=IndexSettings(auto_rebuild=False))
    ingestor = Ingestor(store, embedder=minilm, extractor=spacy_extractor, config=config)
    first = ingestor.ingest_texts(BABBAGE, ids=["babbage", "lovelace"])
    states = store.index_states()
    assert states["chunk"].pending == first.chunks >= 4 and states["text"].pending == 0 and first.replaced_chunks == 0
    old = {key: _document(store, key)["chunk_count"] for key in ("babbage", "lovelace")}

    update = ingestor.ingest_texts([BABBAGE[0] + " He died in 1871.", "Ada Lovelace lived in London."], ids=["babbage", "lovelace"])
    assert update.updated == 2 and update.replaced_chunks == old["babbage"] + old["lovelace"]
    states = store.index_states()
    assert states["text"].pending == update.replaced_chunks
    assert states["chunk"].pending == first.chunks + update.chunks
    report = store.optimize()
    assert sorted(report.rebuilt) == sorted(key for key, state in states.items() if state.pending > 0)
    assert "text" in report.rebuilt and report.indexes["text"].generation == 1 and report.indexes["text"].pending == 0
    hits = make_retriever("hybrid", store, embedder=minilm).search("When did Babbage die in 1871?", k=2).documents
    assert hits and hits[0].id == "babbage"
