"""benchmarks/side_by_side.py end to end on a small two-hop corpus: our four modes, numpy and BM25.

The langchain-surrealdb baseline needs its own virtual environment from PyPI (minutes to build), so
it runs in the benchmark only; here the harness's own parts run for real, the models included.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"

CITIES = [  # name, country, river, founded, trade
    ("Arlenport", "Veskaria", "Oller", 1402, "shipbuilding"),
    ("Dunmarrow", "Veskaria", "Tace", 1188, "wool weaving"),
    ("Kestrel Hollow", "Ondra", "Plimm", 1530, "glass blowing"),
    ("Saltreach", "Ondra", "Varrow", 1297, "salt mining"),
    ("Tirnavel", "Brisca", "Elde", 1611, "clockmaking"),
    ("Quillon", "Brisca", "Sarne", 1355, "printing"),
    ("Harrowgate Mills", "Lunmark", "Kell", 1720, "paper milling"),
    ("Ostvale", "Lunmark", "Dree", 1466, "copper smelting"),
    ("Pellmoor", "Caradine", "Auver", 1249, "cheese making"),
    ("Vintry Cross", "Caradine", "Lisk", 1583, "wine trading"),
    ("Gorse Bay", "Tamsul", "Orrin", 1374, "fishing"),
    ("Emberlee", "Tamsul", "Frayne", 1692, "brick making"),
]
COUNTRIES = {  # country: (capital, currency)
    "Veskaria": ("Dunmarrow", "the veskar"),
    "Ondra": ("Saltreach", "the ondrin mark"),
    "Brisca": ("Quillon", "the brisc"),
    "Lunmark": ("Ostvale", "the lunmark crown"),
    "Caradine": ("Pellmoor", "the caradine florin"),
    "Tamsul": ("Gorse Bay", "the tamsul pearl"),
}
PEOPLE = [  # name, birthplace, occupation, work
    ("Mira Talvenko", "Arlenport", "composer", "The Glass Orchard"),
    ("Oskar Brenhold", "Dunmarrow", "painter", "Evening over the Tace"),
    ("Ilse Varga-Moor", "Kestrel Hollow", "novelist", "A Lantern for Winter"),
    ("Teodor Quaill", "Saltreach", "architect", "the Saltreach Exchange"),
    ("Annelie Fross", "Tirnavel", "astronomer", "the Fross catalogue of comets"),
    ("Benedek Haral", "Quillon", "poet", "Songs of the Sarne"),
    ("Corin Atwell", "Harrowgate Mills", "engineer", "the Kell viaduct"),
    ("Delphine Osk", "Ostvale", "chemist", "a process for refining copper"),
    ("Emeric Vaudry", "Pellmoor", "sculptor", "The Sleeping Shepherd"),
    ("Fenna Lisk", "Vintry Cross", "playwright", "The Merchant's Daughter"),
    ("Gideon Marr", "Gorse Bay", "explorer", "the first map of the Orrin delta"),
    ("Hester Quayle", "Emberlee", "mathematician", "the Quayle conjecture"),
]


def write_corpus(folder: Path) -> None:
    passages = []
    for i, (city, country, river, founded, trade) in enumerate(CITIES):
        text = f"{city} is a town in {country} on the river {river}. It was founded in {founded} and is known for {trade}."
        passages.append({"id": f"city-{i}", "title": city, "text": text})
    for i, (country, (capital, currency)) in enumerate(COUNTRIES.items()):
        text = f"{country} is a small republic whose capital is {capital}. Its currency is {currency}."
        passages.append({"id": f"country-{i}", "title": country, "text": text})
    for i, (name, city, job, work) in enumerate(PEOPLE):
        text = f"{name} was a {job} born in {city}. {name.split()[0]} is best remembered for {work}."
        passages.append({"id": f"person-{i}", "title": name, "text": text})
    queries = []
    for i, (_, city, job, work) in enumerate(PEOPLE):
        c = next(n for n, row in enumerate(CITIES) if row[0] == city)
        question = f"In which country was the {job} known for {work} born?"
        queries.append({"id": f"q{i}", "question": question, "gold_ids": [f"person-{i}", f"city-{c}"]})
    folder.mkdir(parents=True)
    (folder / "corpus.jsonl").write_text("".join(json.dumps(p) + "\n" for p in passages))
    (folder / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))


@pytest.fixture
def harness(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    for name in ("side_by_side", "side_by_side_data", "side_by_side_baselines"):
        sys.modules.pop(name, None)
    import side_by_side

    return side_by_side


def test_side_by_side_runs_our_modes_and_the_baselines(harness, tmp_path, capsys, minilm):
    folder = tmp_path / "towns"
    write_corpus(folder)
    chart = tmp_path / "chart.png"
    argv = [str(folder), "--store-dir", str(tmp_path / "stores"), "--baselines", "numpy,bm25", "--chart", str(chart), "--json"]
    assert harness.main(argv) == 0
    out = capsys.readouterr()
    report = json.loads(out.out)
    [corpus] = report["corpora"]
    assert (corpus["passages"], corpus["queries"]) == (len(CITIES) + len(COUNTRIES) + len(PEOPLE), len(PEOPLE))
    rows = {row["system"]: row for row in corpus["rows"]}
    assert list(rows) == ["numpy exact cosine", "BM25 (bm25s)", "ours: chunk", "ours: concept", "ours: hybrid", "ours: graph"]
    for row in rows.values():
        assert set(row) == set(harness.COLUMNS), row
        assert 0 <= row["recall@2"] <= row["recall@5"] <= 100, row
        assert 0 < row["p50_ms"] <= row["p95_ms"], row
        assert row["ingest_s"] >= (0 if row["system"].startswith("BM25") else 0.01), row  # BM25 indexes 30 passages in ms
    # Wall-clock, the question's embedding included: for ours and numpy alike, every median part
    # (the embedding among them) is at most the median of the whole.
    for name in ("numpy exact cosine", "ours: chunk", "ours: concept", "ours: hybrid", "ours: graph"):
        parts = rows[name]["parts_p50_ms"]
        assert parts["embed"] > 0 and all(ms <= rows[name]["p50_ms"] for ms in parts.values()), rows[name]
    assert rows["ours: graph"]["parts_p50_ms"]["database"] > 0 and "embed" not in rows["BM25 (bm25s)"]["parts_p50_ms"]
    assert "question embedding included" in report["latency"] and "question embedding included" in out.err
    # Every question names the person's work, so each retriever finds a gold passage for most of them.
    assert all(row["recall@5"] >= 40 for row in rows.values()), rows

    # numpy's recall, recomputed here from the same model and the formula written out.
    passages = [json.loads(line) for line in (folder / "corpus.jsonl").read_text().splitlines()]
    queries = [json.loads(line) for line in (folder / "queries.jsonl").read_text().splitlines()]
    matrix = minilm.embed_documents([f"{p['title']}\n{p['text']}" for p in passages])
    expected = {2: 0.0, 5: 0.0}
    for query in queries:
        order = np.argsort(-(matrix @ minilm.embed_query(query["question"])))
        for k in expected:
            top = {passages[i]["id"] for i in order[:k]}
            expected[k] += len(top & set(query["gold_ids"])) / len(query["gold_ids"]) / len(queries)
    assert rows["numpy exact cosine"]["recall@2"] == pytest.approx(100 * expected[2], abs=0.051)
    assert rows["numpy exact cosine"]["recall@5"] == pytest.approx(100 * expected[5], abs=0.051)

    # The tables went to stderr (JSON on stdout), one row per system, and the chart is a PNG.
    table_lines = [line for line in out.err.splitlines() if line.startswith("| ")]
    assert len(table_lines) == 1 + len(rows)
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and chart.stat().st_size > 10_000


def test_corpus_limit_keeps_the_gold_passages(harness, tmp_path):
    from side_by_side_data import load_set

    folder = tmp_path / "towns"
    write_corpus(folder)
    bench = load_set(folder, limit=3, corpus_limit=10)
    gold = {g for q in bench.queries for g in q.gold_ids}
    assert len(bench.queries) == 3 and len(gold) == 6
    assert len(bench.passages) == 10 and gold <= {p.id for p in bench.passages}
    # Fewer than the gold passages: all gold passages still, nothing else.
    assert {p.id for p in load_set(folder, limit=3, corpus_limit=2).passages} == gold
    # Another limit is other data: its work folder (stores, vector cache) differs.
    assert bench.work_name != load_set(folder, limit=3, corpus_limit=11).work_name


def test_bad_benchmark_folder_is_named(harness, tmp_path):
    from side_by_side_data import load_set

    folder = tmp_path / "towns"
    write_corpus(folder)
    lines = (folder / "queries.jsonl").read_text().splitlines()
    (folder / "queries.jsonl").write_text(lines[0].replace("person-0", "nowhere-1") + "\n")
    with pytest.raises(SystemExit, match="gold ids not in the corpus: nowhere-1"):
        load_set(folder, limit=None, corpus_limit=None)
    with pytest.raises(SystemExit, match="missing corpus.jsonl"):
        load_set(tmp_path, limit=None, corpus_limit=None)
