"""benchmarks/scale_benchmark.py at a tiny size: the real models run once over a few real passages
(cached), a store of ~200 chunks is built through the product's write path and appended to, and
every figure it reports is sane. The generated chunks' concepts must follow the real per-concept
chunk-frequency distribution: a generator that drew concepts uniformly fails the same check."""

from __future__ import annotations

import random
import sys
from collections import Counter
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
BENCH = Path(__file__).resolve().parents[2] / "shared" / "bench"
CORPORA = [BENCH / "hotpotqa", BENCH / "musique"]

pytestmark = pytest.mark.skipif(
    not all((c / "corpus.jsonl").is_file() for c in CORPORA), reason=f"the benchmark corpora are not in {BENCH}"
)


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(BENCHMARKS))
    sys.modules.pop("scale_benchmark", None)
    try:
        import scale_benchmark
    finally:
        sys.path.remove(str(BENCHMARKS))
    return scale_benchmark


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="module")
def real(bench, cache):
    """40 records of each corpus and 5 questions through the real spaCy and MiniLM, once."""
    import torch

    torch.set_num_threads(1)  # a shared machine
    return bench.load_real(CORPORA, cache, max_docs=40, questions=5, log=lambda _: None)


def total_variation(a: dict[str, float], b: dict[str, float]) -> float:
    buckets = ("1", "2", "3-5", "6-20", ">20")
    return 0.5 * sum(abs(a[k] - b[k]) for k in buckets)


def block_counts(gen, start: int, stop: int) -> Counter[str]:
    counts: Counter[str] = Counter()
    for work in gen.works(start, stop):
        for chunk in work.mentions:
            counts.update(m.name for m in chunk)
    return counts


def test_generated_concepts_follow_the_real_frequency_distribution(bench, real):
    gen = bench.Generator(real)
    real_counts = Counter(m.name for chunk in real.mentions for m in chunk)
    real_shares = bench.frequency_shares(list(real_counts.values()))
    assert 0 < gen.d < 1 and gen.theta > -gen.d
    n = len(gen.order)
    for replica in (1, 4):  # a block of generated documents as large as the real corpus, early and later
        counts = block_counts(gen, replica * n, (replica + 1) * n)
        shares = bench.frequency_shares(list(counts.values()))
        assert total_variation(shares, real_shares) < 0.06, (replica, shares, real_shares)
        assert abs(shares["top1%_mentions"] - real_shares["top1%_mentions"]) < 0.05
        assert sum(counts.values()) == pytest.approx(sum(real_counts.values()), rel=0.05)  # mentions per chunk kept
    later = block_counts(gen, 4 * n, 5 * n)
    assert any(name not in real_counts for name in later) and any(name in real_counts for name in later)
    # The measure can fail: concepts drawn uniformly from the real ones give a different distribution.
    names = sorted(real_counts)
    rng = random.Random(0)
    uniform = Counter(rng.choice(names) for _ in range(sum(real_counts.values())))
    assert total_variation(bench.frequency_shares(list(uniform.values())), real_shares) > 0.2


def test_generated_vectors_sit_as_far_from_their_donor_as_real_neighbours(bench, real):
    gen = bench.Generator(real)
    work = next(gen.works(len(gen.order), len(gen.order) + 1))
    donor = real.first[gen.slot(len(gen.order)).real]
    cos = float(work.vectors[0] @ real.vectors[donor])
    expected = 1 / (1 + real.dimension * gen.noise**2) ** 0.5
    assert abs(cos - expected) < 0.15 and cos < 0.999
    assert abs(float(work.vectors[0] @ work.vectors[0]) - 1) < 1e-4


def test_a_tiny_store_is_built_appended_to_and_measured(bench, real, cache, tmp_path, capsys):
    first = bench.run_sizes(real, [200], tmp_path / "store", modes=bench.MODES, log=print)
    reader_args = ["--cache", str(cache), "--max-docs", "40", "--questions", "5"]
    for corpus in CORPORA:
        reader_args += ["--corpus", str(corpus)]
    (figures,) = bench.run_sizes(real, [260], tmp_path / "store", modes=bench.MODES, reader_args=reader_args, log=print)
    printed = capsys.readouterr().out
    assert "rows per chunk" in printed and "wall p50" in printed and "in a new process that only reads it" in printed
    assert not first[0].reader  # not asked for
    assert 180 <= first[0].chunks <= 200 and 240 <= figures.chunks <= 260
    assert figures.written_chunks == figures.chunks - first[0].chunks  # appended, not rebuilt
    assert figures.documents > len(real.docs)  # generated documents after the real ones
    rows = figures.rows_per_chunk
    assert rows["chunk"] == 1 and rows["chunk_text"] == 1 and rows["chunk_concepts"] == 1
    assert rows["MENTIONS_CONCEPT"] > 1 and rows["concept"] > 0 and rows["term"] > 0 and rows["document_name"] > 0
    assert figures.written_edges > figures.written_chunks and figures.written_rows > figures.written_edges
    assert figures.write_chunks_per_s > 0 and figures.write_rows_per_s > figures.write_chunks_per_s
    assert figures.disk_bytes_per_chunk > 1000 and figures.disk_bytes_per_text_byte > 1
    assert figures.open_s > 0 and figures.optimize_s > 0 and figures.peak_rss_mb > 50
    assert set(figures.latency) == set(bench.MODES)
    assert set(figures.reader["latency"]) == set(bench.MODES) and figures.reader["open_s"] > 0
    assert figures.reader["peak_rss_mb"] > 50
    for mode in bench.MODES:
        for v in (figures.latency[mode], figures.reader["latency"][mode]):
            assert 0 < v["wall_p50_ms"] <= v["wall_p95_ms"], mode
            assert 0 < v["db_p50_ms"] <= v["wall_p50_ms"] + 1, mode
    chart = bench.chart([*first, figures], tmp_path / "scale.png", log=print)
    assert chart.is_file() and chart.stat().st_size > 0

    # the two runs' reports printed and charted together, smallest size first
    reports = [tmp_path / "second.json", tmp_path / "first.json"]
    bench.write_report(reports[0], real, [figures], {})
    bench.write_report(reports[1], real, first, {})
    import scale_report

    assert scale_report.main([str(r) for r in reports] + ["--chart", str(tmp_path / "both.png")]) == 0
    printed = capsys.readouterr().out
    assert printed.index(f"== {first[0].chunks:,} chunks") < printed.index(f"== {figures.chunks:,} chunks")
    assert printed.count("in a new process that only reads it") == 1 and (tmp_path / "both.png").stat().st_size > 0


def test_the_write_floor_writes_the_design_rows_alone(bench, real, tmp_path):
    """write_profile.py --floor: the groups the ingest would write, as write_floor.surql, hold
    every document, chunk, full-text row and edge, and nothing derived (no counts, terms or lists);
    the copy without search indexes has no HNSW or BM25 index on the chunks."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import write_profile
    finally:
        sys.path.remove(str(BENCHMARKS))
    from surreal_kgrag.db import SurrealStore
    from surreal_kgrag.ingest.config import IngestConfig
    from surreal_kgrag.ingest.records import prepare
    from surreal_kgrag.schema import ensure_schema

    gen = bench.Generator(real)
    prepared = [prepare(work, gen.metadata.extract_document(work.doc)) for work in gen.works(0, 60)]
    config = IngestConfig()
    with SurrealStore(f"surrealkv://{tmp_path / 'floor'}") as store:
        ensure_schema(store, dimension=real.dimension, embedder=real.embedder_name, settings=config.index)
        chunks, edges = write_profile.write_floor(store, prepared, config)
        counts = store.query("table_counts")[-1]
        assert chunks == sum(len(p.chunks) for p in prepared) and edges == sum(len(p.edges) for p in prepared)
        assert counts["document"] == 60 and counts["chunk"] == counts["chunk_text"] == chunks
        assert counts["MENTIONS_CONCEPT"] == edges
        assert counts["concept"] == len({name for p in prepared for name in p.concepts})
        assert counts["term"] == 0 and counts["concept_df"] == 0
        before = [set(info["indexes"]) for info in store.query("index_list")]
        for key in ("chunk", "text"):
            write_profile.remove_search_index(store, key)
        after = [set(info["indexes"]) for info in store.query("index_list")]
    assert any(n.startswith("chunk_embedding") for n in before[0]) and any(n.startswith("chunk_text_search") for n in before[2])
    assert not any(n.startswith("chunk_embedding") for n in after[0])
    assert not any(n.startswith("chunk_text_search") for n in after[2])
    assert after[1] == before[1]  # the concept vectors' index stays
