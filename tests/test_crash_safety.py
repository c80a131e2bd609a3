"""Kill an ingest part-way (SIGKILL at several points, and Ctrl-C), reopen the surrealkv:// store:
every document is whole or absent, every count agrees with a recount, and running the ingest again
ends with exactly what a clean run stores."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_ingest_safety import integrity, prose

from surreal_kgrag import IngestConfig, Ingestor, SurrealStore

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
    return {
        "stats": store.query("stats")[0],
        "documents": {row["key"]: row for row in store.query("document_record_counts")[-1]},
        "concepts": dict(store.query("concept_frequencies")[-1]),
        "terms": dict(store.query("term_frequencies")[-1]),
    }


@pytest.fixture(scope="module")
def clean(corpus, minilm, spacy_extractor) -> dict:
    with SurrealStore("mem://") as store:
        summary = Ingestor(store, embedder=minilm, extractor=spacy_extractor).ingest([corpus])
        assert (summary.added, summary.failed) == (DOCUMENTS, 0)
        return snapshot(store)


def run_until(corpus: Path, url: str, marker: str, sig: int, delay: float = 0.0) -> tuple[int, list[str], str]:
    """Start the ingest subprocess, send ``sig`` once it prints ``marker`` (after ``delay``);
    returns its exit code, the lines it printed and its stderr."""
    process = subprocess.Popen(
        [sys.executable, str(HELPER), str(corpus), url],
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
        assert [int(n) for _, n, _ in done][:3] == [1, 2, 3]  # the transaction in progress finished
        assert written == sum(int(docs) for _, _, docs in done)
        assert f"{written} added" in stderr
        Ingestor(store, embedder=minilm, extractor=spacy_extractor).ingest([corpus])
        assert snapshot(store) == clean
