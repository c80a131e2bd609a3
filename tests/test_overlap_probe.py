"""benchmarks/overlap_probe.py's replay on the SDK's async embedded engine: it must send the first
round trip's queries exactly as the package does and get the blocking engine's answers back, or its
figures compare different work."""

from __future__ import annotations

import gc
import re
import sys
from pathlib import Path

import pytest
from test_side_by_side import write_corpus

from surreal_kgrag import Ingestor, SurrealStore

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture
def probe(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    for name in ("overlap_probe", "query_profile"):
        sys.modules.pop(name, None)
    import overlap_probe

    return overlap_probe


def test_the_first_round_replayed_on_the_async_engine_answers_as_the_store_does(tmp_path, minilm, spacy_extractor, probe):
    folder = tmp_path / "towns"
    write_corpus(folder)
    path = tmp_path / "stores" / "towns"
    with SurrealStore(f"surrealkv://{path}") as store:
        assert Ingestor(store, embedder=minilm, extractor=spacy_extractor).ingest([folder / "corpus.jsonl"]).failed == 0
        retriever = probe.make_retriever("graph", store, embedder=minilm)
        question = "Which river runs through the town where the painter of the harbour was born?"
        jobs = probe.recorded_first_round(store, retriever, question, minilm.dimension)
        expected = [answer["result"] for answer in probe.replayed(store, jobs)]
        names = (store.config.namespace, store.config.database)
    # the names, BM25 and document-name queries, each with its bound params (none pasted into the text)
    assert len(jobs) == 3 and all(params for _, params in jobs)
    assert all("harbour" not in text for text, _ in jobs) and any("harbour" in str(params) for _, params in jobs)

    gc.collect()  # the blocking engine lets go of the store's lock
    engine = probe.AsyncEngine(str(path), *names)
    try:
        for side_by_side in (False, True):
            answers = [answer["result"] for answer in engine.run(jobs, side_by_side)]
            assert [[s["result"] for s in a] for a in answers] == [[s["result"] for s in a] for a in expected]
    finally:
        engine.close()
    assert any(s["result"] for a in expected for s in a)  # the round found something to compare


def test_the_probe_prints_the_replay_beside_the_blocking_engine(tmp_path, minilm, spacy_extractor, probe, monkeypatch, capsys):
    folder = tmp_path / "towns"
    write_corpus(folder)
    with SurrealStore(f"surrealkv://{tmp_path / 'stores' / 'towns'}") as store:
        assert Ingestor(store, embedder=minilm, extractor=spacy_extractor).ingest([folder / "corpus.jsonl"]).failed == 0
    monkeypatch.setattr(sys, "argv", ["overlap_probe.py", str(folder), "--store-dir", str(tmp_path / "stores"), "--limit", "6"])
    assert probe.main() == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("4."))
    figures = [float(x) for x in re.findall(r"(\d+\.\d+)", line)]
    assert line.startswith("4. the first round trip (3 queries)") and len(figures) == 5 and all(f > 0 for f in figures)
