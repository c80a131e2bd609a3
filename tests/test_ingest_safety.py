"""Ingest on the real engine and models when things go wrong: concepts deleted under a writer, large
documents, records the database cannot hold, cancelled runs, stale parts of long files."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from surrealdb import RecordID
from test_ingest import CountingEmbedder

from surreal_kgrag import IngestConfig, Ingestor, SurrealStore, delete_documents, ensure_schema
from surreal_kgrag.chunking import SentenceChunker
from surreal_kgrag.cli import main as cli_main
from surreal_kgrag.errors import QueryExecutionError
from surreal_kgrag.extract import CallableConceptExtractor
from surreal_kgrag.models import SourceDocument

PLACES = ["Lisbon", "Warsaw", "Nairobi", "Quito", "Hanoi", "Oslo", "Perth", "Tunis", "Lima", "Riga"]
PEOPLE = ["Ada Lovelace", "Alan Turing", "Grace Hopper", "Marie Curie", "Niels Bohr", "Lise Meitner"]
TOPICS = ["river trade", "printing press", "steam engine", "radio telescope", "glass furnace", "salt marsh"]


def prose(sentences: int, seed: int = 0) -> str:
    """Varied English prose: people, places and topics recur across sentences and documents."""
    out = []
    for i in range(seed, seed + sentences):
        person, place, topic = PEOPLE[i % len(PEOPLE)], PLACES[(i * 7) % len(PLACES)], TOPICS[(i * 5) % len(TOPICS)]
        out.append(
            f"In {1800 + i % 200}, {person} travelled to {place} to study the {topic} of district {i}, "
            f"met {surname(i)}, {surname(i * 31 + 7)}, {surname(i * 57 + 3)} and {surname(i * 89 + 11)}, and wrote {i % 9 + 2} letters about workshop "
            f"{i * 13 % 997} to colleagues."
        )
        if i % 6 == 5:
            out.append("\n\n")
    return " ".join(out)


def surname(n: int) -> str:
    """A made-up surname, different for each n below 15,625: prose with a real vocabulary's spread."""
    syllables = ["ka", "lo", "mi", "ren", "tas", "vol", "dre", "sun", "bi", "gor", "pel", "ush", "fa", "zin", "ot",
                 "qua", "ne", "har", "lie", "mor", "ste", "vi", "ya", "cor", "pu"]
    return "".join(syllables[(n // 25**k) % 25] for k in range(3)).capitalize()


class DeletesBeforeFirstWrite:
    """The real store; right before the first write transaction another client deletes documents,
    as a second ingestor or process sharing the store would."""

    def __init__(self, store: SurrealStore, keys: list[str]) -> None:
        self.store = store
        self.keys = keys

    def __getattr__(self, name):
        return getattr(self.store, name)

    def query(self, name, params=None, **placeholders):
        if name == "write_documents" and self.keys:
            assert delete_documents(self.store, self.keys) == len(self.keys)
            self.keys = []
        return self.store.query(name, params, **placeholders)


@pytest.fixture
def store():
    with SurrealStore("mem://") as s:
        yield s


def integrity(store) -> dict[str, int]:
    report = store.query("check_integrity")[-1]
    assert report, "check_integrity returned nothing"
    return {name: count for name, count in report.items() if count}


def concept(store, name):
    rows = store.query("get_concepts", {"ids": [RecordID("concept", name)]})[-1]
    return rows[0] if rows else None


def test_delete_then_reingest_recreates_the_orphaned_concept(store, minilm, spacy_extractor):
    ingestor = Ingestor(store, embedder=minilm, extractor=spacy_extractor)
    ingestor.ingest_texts(["The Zanzibar Archive holds letters from Marie Curie."], ids=["a"])
    assert concept(store, "zanzibar archive")["df"] == 1
    assert ingestor.delete(["a"]) == 1
    assert concept(store, "zanzibar archive") is None  # orphaned, removed

    summary = ingestor.ingest_texts(["Scholars still visit the Zanzibar Archive every summer."], ids=["b"])
    assert (summary.added, summary.failed) == (1, 0)
    assert concept(store, "zanzibar archive")["documents"] == [RecordID("document", "b")]
    assert integrity(store) == {}


def test_two_ingestors_on_one_store_never_leave_an_edge_to_a_missing_concept(store, minilm, spacy_extractor):
    first = Ingestor(store, embedder=minilm, extractor=spacy_extractor)
    second = Ingestor(store, embedder=minilm, extractor=spacy_extractor)
    first.ingest_texts(["The Kilimanjaro Library keeps a copy of a physics thesis."], ids=["a"])
    second.delete(["a"])
    first.ingest_texts(["A reader at the Kilimanjaro Library found the thesis."], ids=["b"])
    assert concept(store, "kilimanjaro library")["df"] == 1
    assert integrity(store) == {}


def test_a_concept_deleted_just_before_the_write_is_created_again_by_it(store, minilm, spacy_extractor):
    Ingestor(store, embedder=minilm, extractor=spacy_extractor).ingest_texts(
        ["The Zanzibar Archive holds letters from Marie Curie."], ids=["a"]
    )
    racing = Ingestor(DeletesBeforeFirstWrite(store, ["a"]), embedder=minilm, extractor=spacy_extractor)
    summary = racing.ingest_texts(["Scholars still visit the Zanzibar Archive every summer."], ids=["b"])
    assert (summary.added, summary.failed) == (1, 0), summary.failures
    # The delete removed the orphaned concept; the group's write created it again, counted from its own edges.
    assert summary.concepts >= 1
    assert concept(store, "zanzibar archive")["documents"] == [RecordID("document", "b")]
    assert integrity(store) == {}


def test_a_document_of_400_kilobytes_is_written(tmp_path, minilm):
    # On a file store: the in-memory engine's transactions grow quadratically with their write set
    # (4,000 term rows in one transaction: 7 s and 1.3 GB on mem://, 0.3 s and 90 MB on surrealkv://),
    # and this document writes ~9,000.
    with SurrealStore(f"surrealkv://{tmp_path / 'kg'}") as store:
        _write_400_kilobytes(store, minilm)


def _write_400_kilobytes(store, minilm):
    text = prose(2200)
    assert len(text) > 400_000
    # Large chunks keep the model work small; the write is what this tests: one group whose chunk
    # texts hold ~25k distinct terms per chunk summed, past the 1 MiB that array::concat() allows
    # (the old statement failed there, after all the model work).
    config = IngestConfig(chunker=SentenceChunker(max_tokens=1000, overlap_tokens=0))
    extractor = CallableConceptExtractor(lambda chunk: [p for p in PEOPLE + PLACES if p in chunk])
    summary = Ingestor(store, embedder=minilm, extractor=extractor, config=config).ingest_texts([text], ids=["big"])
    assert (summary.added, summary.failed) == (1, 0), summary.failures
    assert summary.chunks > 50
    assert concept(store, "marie curie")["df"] == 1
    assert integrity(store) == {}


def test_a_document_over_the_size_cap_fails_before_any_model_work(store, minilm, spacy_extractor):
    counting = CountingEmbedder(minilm)
    config = IngestConfig(max_document_chars=5_000)
    ingestor = Ingestor(store, embedder=counting, extractor=spacy_extractor, config=config)
    summary = ingestor.ingest_texts([prose(60), "Niels Bohr worked in Copenhagen."], ids=["long", "short"])
    assert (summary.added, summary.failed) == (1, 1)
    assert "max_document_chars=5,000" in summary.failures[0].reason and summary.failures[0].source == "text[0]"
    assert not any("district" in t for t in counting.texts)  # the long one never reached the models


def test_a_huge_word_a_run_of_spaces_and_a_long_title_are_cut_or_refused_and_the_rest_written(store, minilm, spacy_extractor):
    """spaCy refuses a text of over a million characters, and a chunk was a whole word or a whole
    sentence whatever its length: one such document stopped the run. A title of thousands of
    characters became a concept (a record id) and a full-text search of all its words."""
    docs = [
        SourceDocument(key="word", source="word.txt", title="Curie and Bohr", text=f"Marie Curie lived in Paris. {'x' * 1_100_000} Niels Bohr worked in Copenhagen."),
        SourceDocument(key="spaces", source="spaces.txt", title="Two cities", text=f"Lisbon lies on the Tagus.{' ' * 1_100_000}Quito sits high in the Andes."),
        SourceDocument(key="title", source="title.txt", title="A long title " * 200, text="Warsaw is on the Vistula."),
        SourceDocument(key="named", source="named.txt", title="Word " * 100, text="Hanoi has many lakes."),
    ]
    summary = Ingestor(store, embedder=minilm, extractor=spacy_extractor).ingest(docs)
    assert (summary.added, summary.failed) == (3, 1), summary.failures
    assert summary.failures[0].source == "title.txt" and "title has 2,600 characters, more than 1,000" in summary.failures[0].reason
    rows = store.query_text("test: chunks", "SELECT doc, content, index FROM chunk ORDER BY doc, index;")[-1]
    longest = SentenceChunker().max_chars
    assert all(len(row["content"]) <= longest for row in rows)
    spaces = [row["content"] for row in rows if row["doc"].id == "spaces"]
    assert spaces == ["Lisbon lies on the Tagus.", "Quito sits high in the Andes."]
    word = [row["content"] for row in rows if row["doc"].id == "word"]
    assert len(word) == 1 + 1_100_000 // longest + 1 and word[0] == "Marie Curie lived in Paris." and "Copenhagen" in word[-1]
    assert concept(store, "niels bohr")["df"] == concept(store, "quito")["df"] == 1
    names = store.query_text("test: names", "SELECT VALUE name FROM concept;")[-1]
    assert "hanoi" in names and max(len(name) for name in names) <= 300
    assert integrity(store) == {}


def test_records_the_database_cannot_hold_are_reported_with_their_line_and_the_rest_written(
    store, minilm, spacy_extractor, tmp_path
):
    lines = [
        json.dumps({"id": "ok1", "title": "Lisbon", "text": "Lisbon lies on the river Tagus."}),
        json.dumps({"id": "big", "text": "Warsaw is on the Vistula.", "population": 2**64}),
        '{"id": "lone", "text": "Nairobi has a national park \\udc80 inside the city."}',
        json.dumps({"id": "ok2", "text": "Quito sits high in the Andes.", "score": float("nan"), "rank": -(2**63)}),
        '{"id": "key", "text": "Hanoi has many lakes.", "meta": {"\\ud800x": 1}}',
    ]
    (tmp_path / "records.jsonl").write_text("\n".join(lines) + "\n")
    summary = Ingestor(store, embedder=minilm, extractor=spacy_extractor).ingest([tmp_path / "records.jsonl"])
    assert (summary.added, summary.failed) == (2, 3), summary.failures
    failures = {f.line: f.reason for f in summary.failures}
    assert set(failures) == {2, 3, 5}
    assert "18446744073709551616" in failures[2] and "population" in failures[2]
    assert "surrogate" in failures[3] and "text" in failures[3]
    assert "surrogate" in failures[5] and "key" in failures[5]
    assert all(str(f).startswith(str((tmp_path / "records.jsonl").resolve())) for f in summary.failures)
    stored = store.query("get_document", {"ids": [RecordID("document", "ok2")]})[-1][0]
    assert stored["metadata"]["rank"] == -(2**63)
    assert integrity(store) == {}


def test_cli_ingest_exits_with_the_partial_failure_code_when_a_record_fails(tmp_path, capsys):
    corpus = tmp_path / "records.jsonl"
    corpus.write_text(
        json.dumps({"id": "ok", "text": "Oslo is the capital of Norway."}) + "\n"
        + json.dumps({"id": "bad", "text": "Perth is in Australia.", "n": 2**70}) + "\n"
    )
    db = f"surrealkv://{tmp_path / 'kg'}"
    assert cli_main(["ingest", str(corpus), "--db", db, "--json"]) == 3
    captured = capsys.readouterr()
    assert json.loads(captured.out)["added"] == 1
    assert f"{corpus.resolve()}:2" in captured.err
    assert cli_main(["ingest", str(corpus), "--db", db, "--json"]) == 3  # still failing, the rest skipped
    assert json.loads(capsys.readouterr().out)["skipped"] == 1


def test_cli_delete_resolves_a_relative_path_like_ingest(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("notes.txt").write_text("Tunis is a port on the Mediterranean.")
    db = f"surrealkv://{tmp_path / 'kg'}"
    assert cli_main(["ingest", "notes.txt", "--db", db, "--json"]) == 0
    capsys.readouterr()
    Path("notes.txt").unlink()  # deleting from the store needs no file
    assert cli_main(["delete", "notes.txt", "--db", db, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"deleted": 1}
    assert cli_main(["stats", "--db", db, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["documents"] == 0


def test_a_long_text_file_is_stored_in_parts_and_its_stale_parts_go(store, minilm, spacy_extractor, tmp_path):
    path = tmp_path / "long.md"
    path.write_text("# The long book\n\n" + prose(90))
    config = IngestConfig(max_document_chars=2_000)
    ingestor = Ingestor(store, embedder=minilm, extractor=spacy_extractor, config=config)
    first = ingestor.ingest([path])
    assert first.failed == 0 and first.added >= 5
    key = str(path.resolve())
    rows = store.query("document_parts", {"sources": [key]})[-1]
    assert sorted(r["id"].id for r in rows) == [f"{key}#part-{i:05d}" for i in range(1, first.added + 1)]
    part = store.query("get_document", {"ids": [rows[0]["id"]]})[-1][0]
    assert part["title"] == "The long book" and part["metadata"]["file_name"] == "long.md" and part["metadata"]["part"] == 1
    assert set(part["metadata"]) == {"file_name", "part", "modified"}  # as a file read whole has them

    path.write_text("# The long book\n\n" + prose(90) + "\n\n" + prose(40, seed=90))  # grown: parts added at its end
    grown = ingestor.ingest([path])
    # the parts before the old last one read the same: skipped, not embedded again
    assert grown.failed == 0 and grown.skipped == first.added - 1 and grown.added >= 2 and grown.updated == 1
    assert len(store.query("document_parts", {"sources": [key]})[-1]) == first.added - 1 + grown.added + grown.updated

    path.write_text("# The long book\n\n" + prose(30))  # shorter: fewer parts
    second = ingestor.ingest([path])
    assert second.failed == 0
    remaining = store.query("document_parts", {"sources": [key]})[-1]
    assert len(remaining) < first.added and all(r["id"].id.startswith(f"{key}#part-") for r in remaining)

    path.write_text("Now a short note about Riga.")  # whole again: every part goes
    ingestor.ingest([path])
    assert [r["id"].id for r in store.query("document_parts", {"sources": [key]})[-1]] == [key]
    assert integrity(store) == {}
    assert delete_documents(store, [key]) == 1
    assert store.query("stats")[0]["documents"] == 0


def test_a_file_whose_new_parts_fail_to_write_keeps_its_old_version(store, minilm, spacy_extractor, tmp_path, monkeypatch):
    path = tmp_path / "grows.md"
    path.write_text("# Notes\n\nA short note about Riga.")
    config = IngestConfig(max_document_chars=2_000)
    ingestor = Ingestor(store, embedder=minilm, extractor=spacy_extractor, config=config)
    assert ingestor.ingest([path]).added == 1
    key = str(path.resolve())
    path.write_text("# Notes\n\n" + prose(90))  # now read in parts: the whole-file document is stale
    query = SurrealStore.query

    def refused(self, name, params=None, **placeholders):
        if name == "write_documents":
            raise QueryExecutionError("SurrealDB rejected write_documents.surql: the disk is full")
        return query(self, name, params, **placeholders)

    monkeypatch.setattr(SurrealStore, "query", refused)
    summary = ingestor.ingest([path])
    monkeypatch.undo()
    assert summary.failed > 0 and all("write failed" in f.reason for f in summary.failures)
    assert [r["id"].id for r in store.query("document_parts", {"sources": [key]})[-1]] == [key]  # the old version stays
    assert ingestor.ingest([path]).failed == 0  # once the writes go through, the parts replace it
    assert all(r["id"].id.startswith(f"{key}#part-") for r in store.query("document_parts", {"sources": [key]})[-1])
    assert integrity(store) == {}


def test_a_file_whose_later_part_fails_keeps_its_old_version(store, minilm, spacy_extractor, tmp_path, monkeypatch):
    """A file's new parts span several batches: its old version goes only once all of them are
    written, not after the first batch."""
    path = tmp_path / "later.md"
    path.write_text("# Notes\n\nA short note about Tallinn.")
    ingestor = Ingestor(store, embedder=minilm, extractor=spacy_extractor, config=IngestConfig(max_document_chars=2_000, batch_size=2))
    assert ingestor.ingest([path]).added == 1
    key = str(path.resolve())
    path.write_text("# Notes\n\n" + prose(90))  # now read in parts, two a batch
    query = SurrealStore.query

    def third_part_refused(self, name, params=None, **placeholders):
        if name == "write_documents" and any(str(rid.id).endswith("#part-00003") for rid in (params or {}).get("doc_ids", [])):
            raise QueryExecutionError("SurrealDB rejected write_documents.surql: the disk is full")
        return query(self, name, params, **placeholders)

    monkeypatch.setattr(SurrealStore, "query", third_part_refused)
    summary = ingestor.ingest([path])
    monkeypatch.undo()
    assert summary.failed >= 1 and summary.added >= 2, summary
    stored = {r["id"].id for r in store.query("document_parts", {"sources": [key]})[-1]}
    assert key in stored  # the old version stays beside the parts that were written
    assert f"{key}#part-00001" in stored and f"{key}#part-00003" not in stored
    rerun = ingestor.ingest([path])
    assert rerun.failed == 0 and rerun.skipped >= 2
    assert all(r["id"].id.startswith(f"{key}#part-") for r in store.query("document_parts", {"sources": [key]})[-1])
    assert integrity(store) == {}


async def test_cancelling_aingest_leaves_only_whole_documents_and_a_rerun_finishes(store, minilm, spacy_extractor):
    texts = [prose(12, seed=i * 12) for i in range(40)]
    ids = [f"d{i:02d}" for i in range(40)]
    config = IngestConfig(batch_size=4, group_size=2, group_chunks=4)
    ingestor = Ingestor(store, embedder=minilm, extractor=spacy_extractor, config=config)
    ensure_schema(store, dimension=minilm.dimension, embedder=minilm.name)  # so the progress can be polled
    task = asyncio.create_task(ingestor.aingest_texts(texts, ids=ids))
    while not (await store.aquery("stats"))[0]["documents"]:
        assert not task.done(), "the ingest finished before it could be cancelled"
        await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    written = (await store.aquery("stats"))[0]["documents"]
    assert 0 < written < 40
    assert integrity(store) == {}
    summary = await ingestor.aingest_texts(texts, ids=ids)
    assert (summary.skipped, summary.added, summary.failed) == (written, 40 - written, 0)
    assert integrity(store) == {}
