"""Kill an ingest part-way (SIGKILL at several points, and Ctrl-C), reopen the surrealkv:// store:
every document is whole or absent (with its relations, when an LLM extractor reads them), every
count agrees with a recount, and running the ingest again ends with exactly what a clean run stores."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_ingest_safety import PEOPLE, PLACES, TOPICS, integrity, prose

from surreal_kgrag import IngestConfig, Ingestor, SurrealStore
from surreal_kgrag.db.sdk import RecordID
from surreal_kgrag.llm import LLMExtractor, LLMSettings, ReadonlyLimits, run_readonly_query
from surreal_kgrag.llm.scripted import ScriptedChatServer, first_user_message

HELPER = Path(__file__).with_name("ingest_subprocess.py")
DOCUMENTS = 16


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """Documents of 2-4 chunks whose people and places recur across documents."""
    path = tmp_path_factory.mktemp("corpus") / "corpus.jsonl"
    lines = [json.dumps({"id": f"doc{i:02d}", "title": f"Letters {i}", "text": prose(12 + i % 3 * 6, seed=i * 7)}) for i in range(DOCUMENTS)]
    path.write_text("\n".join(lines) + "\n")
    return path


def snapshot(store: SurrealStore) -> dict:
    relations = run_readonly_query(
        store, "SELECT id, type, in, out, chunk, doc FROM RELATES_TO ORDER BY id", limits=ReadonlyLimits(rows=10_000)
    )
    return {
        "stats": store.query("stats")[0],
        "documents": {row["key"]: row for row in store.query("document_record_counts")[-1]},
        "concepts": dict(store.query("concept_frequencies")[-1]),
        "terms": dict(store.query("term_frequencies")[-1]),
        "relations": relations.rows,
    }


@pytest.fixture(scope="module")
def clean(corpus, minilm, spacy_extractor) -> dict:
    with SurrealStore("mem://") as store:
        summary = Ingestor(store, embedder=minilm, extractor=spacy_extractor).ingest([corpus])
        assert (summary.added, summary.failed) == (DOCUMENTS, 0)
        return snapshot(store)


def run_until(
    corpus: Path, url: str, marker: str, sig: int, delay: float = 0.0, llm_url: str | None = None
) -> tuple[int, list[str], str]:
    """Start the ingest subprocess, send ``sig`` once it prints ``marker`` (after ``delay``);
    returns its exit code, the lines it printed and its stderr."""
    process = subprocess.Popen(
        [sys.executable, str(HELPER), str(corpus), url, *([llm_url] if llm_url else [])],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parent)},
    )
    assert process.stdout is not None
    lines = []
    for line in process.stdout:
        lines.append(line.strip())
        if line.split()[:2] == marker.split():
            time.sleep(delay)
            process.send_signal(sig)
            break
    else:
        process.wait()
        pytest.fail(f"the ingest ended (exit {process.returncode}) before {marker!r}: {process.stderr.read()[-2000:]}")
    stdout, stderr = process.communicate(timeout=600)
    return process.returncode, lines + stdout.splitlines(), stderr


def check_whole_or_absent(store: SurrealStore, clean: dict) -> int:
    assert integrity(store) == {}
    documents = snapshot(store)["documents"]
    for key, row in documents.items():
        assert row == clean["documents"][key], f"{key} is half-written"
    return len(documents)


@pytest.mark.parametrize(
    ("marker", "delay"),
    [("write-start 1", 0.0), ("write-done 1", 0.0), ("write-start 4", 0.05), ("write-done 6", 0.0)],
    ids=["in-first-write", "after-first-write", "in-fourth-write", "after-sixth-write"],
)
def test_sigkill_leaves_whole_documents_and_a_rerun_matches_a_clean_run(
    corpus, clean, minilm, spacy_extractor, tmp_path, marker, delay
):
    url = f"surrealkv://{tmp_path / 'kg'}"
    code, _, _ = run_until(corpus, url, marker, signal.SIGKILL, delay)
    assert code == -signal.SIGKILL
    with SurrealStore(url) as store:
        written = check_whole_or_absent(store, clean)
        assert written < DOCUMENTS
        summary = Ingestor(store, embedder=minilm, extractor=spacy_extractor, config=IngestConfig()).ingest([corpus])
        assert (summary.skipped, summary.added, summary.failed) == (written, DOCUMENTS - written, 0)
        assert integrity(store) == {}
        assert snapshot(store) == clean


def test_ctrl_c_stops_after_the_transaction_in_progress_and_says_how_far_it_got(
    corpus, clean, minilm, spacy_extractor, tmp_path
):
    url = f"surrealkv://{tmp_path / 'kg'}"
    code, lines, stderr = run_until(corpus, url, "write-start 3", signal.SIGINT)
    assert code == 130, stderr[-2000:]
    assert "ingest interrupted" in stderr and "run it again to continue" in stderr
    with SurrealStore(url) as store:
        written = check_whole_or_absent(store, clean)
        done = [line.split() for line in lines if line.startswith("write-done")]
        assert [int(n) for _, n, _ in done][:3] == [1, 2, 3], (lines, stderr[-3000:])  # the one in progress finished
        assert written == sum(int(docs) for _, _, docs in done)
        assert f"{written} added" in stderr
        Ingestor(store, embedder=minilm, extractor=spacy_extractor).ingest([corpus])
        assert snapshot(store) == clean


# -- with an LLM extractor: relations are written with their documents, or not at all ---------------

_SENTENCE = re.compile(rf"({'|'.join(PEOPLE)}) travelled to ({'|'.join(PLACES)}) to study the ({'|'.join(TOPICS)})")


def scripted_model(request: dict) -> str:
    """A rule-based stand-in for a model (not one): who travelled where, to study what."""
    concepts: dict[str, str] = {}
    relations = []
    for person, place, topic in _SENTENCE.findall(first_user_message(request)):
        concepts.update({person: "person", place: "city", topic: "topic"})
        relations += [{"subject": person, "relation": "visited", "object": place}, {"subject": person, "relation": "studied", "object": topic}]
    return json.dumps({"concepts": [{"name": n, "kind": k} for n, k in concepts.items()], "relations": relations})


@pytest.fixture(scope="module")
def model():
    with ScriptedChatServer(scripted_model) as server:
        yield server


@pytest.fixture(scope="module")
def clean_llm(corpus, minilm, model) -> dict:
    extractor = LLMExtractor(LLMSettings(model="scripted", base_url=model.base_url, api_key="local"), cache=None, fallback=None)
    with SurrealStore("mem://") as store:
        summary = Ingestor(store, embedder=minilm, extractor=extractor).ingest([corpus])
        assert (summary.added, summary.failed) == (DOCUMENTS, 0)
        assert summary.llm is not None and summary.llm.relations > DOCUMENTS
        found = snapshot(store)
        assert all(row["relations"] > 0 for row in found["documents"].values())
        return found


@pytest.mark.parametrize(("marker", "delay"), [("write-start 2", 0.0), ("write-start 5", 0.05)], ids=["in-second-write", "in-fifth-write"])
def test_sigkill_with_an_llm_extractor_leaves_documents_whole_with_their_relations(
    corpus, clean_llm, minilm, model, tmp_path, marker, delay
):
    url = f"surrealkv://{tmp_path / 'kg'}"
    code, _, stderr = run_until(corpus, url, marker, signal.SIGKILL, delay, llm_url=model.base_url)
    assert code == -signal.SIGKILL, stderr[-2000:]
    with SurrealStore(url) as store:
        written = check_whole_or_absent(store, clean_llm)  # relation counts per document included
        assert 0 < written < DOCUMENTS
        kept = {row["doc"].removeprefix("document:") for row in snapshot(store)["relations"]}
        assert kept == set(snapshot(store)["documents"])  # no relation without its document, nor the reverse
        extractor = LLMExtractor(LLMSettings(model="scripted", base_url=model.base_url, api_key="local"), cache=None, fallback=None)
        summary = Ingestor(store, embedder=minilm, extractor=extractor).ingest([corpus])
        assert (summary.skipped, summary.added, summary.failed) == (written, DOCUMENTS - written, 0)
        assert integrity(store) == {}
        assert snapshot(store) == clean_llm


# -- a document longer than a write group: written in slices, shown only once committed ------------


@pytest.fixture(scope="module")
def long_corpus(tmp_path_factory) -> Path:
    """Two short documents around one of about 20 chunks: the subprocess writes groups of at most 6
    chunks, so the long one is written in slices between them."""
    docs = [("a-short", prose(12, seed=1)), ("b-long", prose(120, seed=2)), ("c-short", prose(18, seed=3))]
    path = tmp_path_factory.mktemp("long") / "corpus.jsonl"
    path.write_text("\n".join(json.dumps({"id": key, "title": f"Ledger {key}", "text": text}) for key, text in docs) + "\n")
    return path


def test_sigkill_while_a_long_document_is_written_in_slices_shows_none_of_it_and_a_rerun_matches_a_clean_run(
    long_corpus, minilm, spacy_extractor, tmp_path
):
    with SurrealStore("mem://") as store:
        Ingestor(store, embedder=minilm, extractor=spacy_extractor).ingest([long_corpus])
        clean = snapshot(store)
    assert clean["documents"]["b-long"]["chunks"] > 3 * 6  # several slices of the subprocess's 6-chunk groups
    url = f"surrealkv://{tmp_path / 'kg'}"
    code, lines, _ = run_until(long_corpus, url, "write-done 3", signal.SIGKILL)
    assert code == -signal.SIGKILL
    with SurrealStore(url) as store:
        documents = snapshot(store)["documents"]
        assert "b-long" not in documents, lines  # two slices stored, never committed
        assert all(row == clean["documents"][key] for key, row in documents.items())
        left = integrity(store)  # the slices: chunks no document row names, waiting for the next run
        assert left["chunks_without_document"] == left["chunks_not_of_stored_version"] >= 2 * 6 and left["pending_writes"] == 1
        assert set(left) == {"chunks_without_document", "chunks_not_of_stored_version", "pending_writes"}
        assert store.query("get_document", {"ids": [RecordID("document", "b-long")]})[-1] == []
        summary = Ingestor(store, embedder=minilm, extractor=spacy_extractor).ingest([long_corpus])
        assert summary.failed == 0 and summary.added == 3 - len(documents)
        assert integrity(store) == {}
        assert snapshot(store) == clean
