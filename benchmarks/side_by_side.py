"""Side by side: our retrieval modes against plain baselines, on the same data and the same embedder, in one run.

    .venv/bin/python benchmarks/side_by_side.py ../shared/bench/hotpotqa ../shared/bench/musique \\
        [--chart docs/side_by_side.png] [--limit N] [--corpus-limit N] [--store-dir DIR] [--json]

For each folder, in either format of ``surreal_kgrag.evaluate`` (``corpus.jsonl`` {id, title, text}
with ``queries.jsonl`` {id, question, gold_ids}; or files, in ``docs/`` or beside ``queries.jsonl``
{id, question, gold_files, type?}; ``--docs DIR --queries FILE`` name one more set explicitly):

- ``numpy exact cosine``: all-MiniLM-L6-v2 vectors of every passage (under its title), exact search;
  on files, the vectors of the chunks our store holds;
- ``BM25 (bm25s)``: English stopwords, default parameters; on files, over our stored chunk texts;
- ``langchain-surrealdb``: its vector store on its own embedded surrealkv store, in its own virtual
  environment under --store-dir (it pins surrealdb~=1.0.8), fed the same vectors as numpy; when it
  cannot run, its row says why;
- ``ours: <mode>`` for chunk, concept, hybrid and graph: a fresh surrealkv store, ingested with the
  default Ingestor, queried through ``make_retriever(mode)`` and ``surreal_kgrag.evaluate``.

Recall@1 / @2 / @5: per question, the fraction of its gold documents among the first k distinct
documents (HippoRAG's definition for passages; on files a document matches by its file name), overall
and per question type; on files, how many gold files our store does not hold.
``p50/p95 ms``: the wall-clock time per question, the question's embedding included, for every row:
ours, the whole ``search()`` call as ``evaluate_retriever`` times it (each question a new one); numpy
and langchain-surrealdb, their search with the question's vector given plus that question's
embedding, timed on its own with the same model; BM25, tokenising and scoring (it embeds nothing).
``p50 of parts``: the median of each part (embed, analyze, database, rank, hydrate, other; the
medians do not add up to the p50). ``ingest s``: ours end to
end (load, chunk, extract, embed, write, index); the baselines' indexing including embedding the
passages (measured once, then read from the cache under --store-dir). Models are loaded and warmed
before anything is timed. ``--corpus-limit N`` keeps every gold passage of the chosen queries plus
the first other passages up to N. The machine may be shared: compare rows of one run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from side_by_side_baselines import bm25, chunk_rows, chunk_units, langchain_surrealdb, numpy_cosine, passage_units
from side_by_side_data import KS, FileSet, Row, SharedVectors, embed_set, load_any

from surreal_kgrag import Ingestor, SurrealStore
from surreal_kgrag.eval_baselines import ChunkTable
from surreal_kgrag.evaluate import EvalQuery, GoldCoverage, evaluate_retriever, gold_coverage
from surreal_kgrag.latency import Latency
from surreal_kgrag.retrieval import RETRIEVERS, make_retriever

BASELINES = ("numpy", "bm25", "langchain-surrealdb")
COLUMNS = ("system", *(f"recall@{k}" for k in KS), "p50_ms", "p95_ms", "parts_p50_ms", "ingest_s", "note")
HEADERS = ("system", *(f"R@{k}" for k in KS), "p50 ms", "p95 ms", "p50 of parts, ms", "ingest s", "note")
LATENCY = (
    "p50/p95 ms: wall-clock per question, question embedding included (ours: the whole search() call; "
    "numpy and langchain-surrealdb: the search with the vector given plus that question's embedding; BM25: tokenising and scoring)"
)


@dataclass
class Ours:
    rows: list[Row]
    chunks: ChunkTable | None = None  # the store's chunks, for the baselines on a set of files
    coverage: GoldCoverage | None = None


def ours(inputs: list[Path], queries: list[EvalQuery], ingestor: Ingestor, work: Path, modes: Sequence[str], *, files: bool) -> Ours:
    """A fresh store, the timed ingest, then every mode through the public evaluation."""
    path = work / "kgrag.surrealkv"
    shutil.rmtree(path, ignore_errors=True)
    out = Ours([])
    with SurrealStore(f"surrealkv://{path}") as store:
        run = Ingestor(store, embedder=ingestor.embedder, extractor=ingestor.extractor, config=ingestor.config)
        t = time.perf_counter()
        summary = run.ingest(inputs)
        ingest_s = time.perf_counter() - t
        if summary.failed and not files:
            raise SystemExit(f"{work.name}: {summary.failed} passages failed to ingest: {summary}")
        for failure in summary.failures:
            _log(f"  skipped {failure}")
        _log(f"  ours: ingested {summary.added} documents in {ingest_s:.1f}s")
        for mode in modes:
            t = time.perf_counter()
            report = evaluate_retriever(make_retriever(mode, store, embedder=run.embedder), queries, KS)
            row = Row(f"ours: {mode}", recall=dict(report.recall), ingest_s=ingest_s, note="surrealkv, default settings")
            row.by_type = {name: t.flat() for name, t in report.by_type.items()}
            row.latency = Latency(p50_ms=report.p50_ms, p95_ms=report.p95_ms, parts_p50_ms=report.parts_p50_ms)
            out.rows.append(row)
            _log(f"  ours: {mode} in {time.perf_counter() - t:.0f}s")
        if files:
            out.chunks, out.coverage = ChunkTable.read(store), gold_coverage(store, queries, summary.failures)
    return out


def run_set(
    folder: Path, args: argparse.Namespace, ingestor: Ingestor, docs: Path | None = None, queries: Path | None = None
) -> dict[str, Any]:
    bench = load_any(folder, limit=args.limit, corpus_limit=args.corpus_limit, docs=docs, queries=queries)
    if isinstance(bench, FileSet):
        return run_file_set(bench, args, ingestor)
    work = args.store_dir / bench.work_name
    _log(f"{folder}: {len(bench.passages)} passages, {len(bench.queries)} queries (work dir {work})")
    vectors = embed_set(bench, ingestor.embedder, work / "passage_vectors.npz")
    _log(f"  passage vectors: {vectors.passage_seconds:.1f}s{' (cached)' if vectors.cached else ''}")
    rows: list[Row] = []
    if "numpy" in args.baselines:
        rows.append(numpy_cosine(bench, vectors))
    if "bm25" in args.baselines:
        rows.append(bm25(bench))
    if "langchain-surrealdb" in args.baselines:
        rows.append(langchain_surrealdb(passage_units(bench), bench.queries, vectors, work, _venv(args)))
        _log(f"  langchain-surrealdb: {rows[-1].note}")
    corpus = bench.write_corpus(work / "corpus.jsonl")
    rows.extend(ours([corpus], bench.queries, ingestor, work, args.modes, files=False).rows)
    return {"folder": str(folder), "format": "records", "passages": len(bench.passages), "queries": len(bench.queries),
            "rows": [row.figures() for row in rows]}


def run_file_set(bench: FileSet, args: argparse.Namespace, ingestor: Ingestor) -> dict[str, Any]:
    """Ours first (the ingest makes the chunks), then the baselines over the chunks our store holds."""
    work = args.store_dir / bench.work_name
    _log(f"{bench.folder}: files {', '.join(map(str, bench.inputs))}, {len(bench.queries)} queries (work dir {work})")
    result = ours(bench.inputs, bench.queries, ingestor, work, args.modes, files=True)
    assert result.chunks is not None and result.coverage is not None
    _log(f"  {result.coverage.describe()}")
    rows = chunk_rows(result.chunks, ingestor.embedder, bench.queries, args.baselines)
    if "langchain-surrealdb" in args.baselines:
        questions, question_ms = [], []
        for query in bench.queries:
            t = time.perf_counter()
            questions.append(ingestor.embedder.embed_query(query.question))
            question_ms.append((time.perf_counter() - t) * 1000)
        vectors = SharedVectors(result.chunks.vectors, 0.0, False, np.stack(questions), question_ms)
        rows.append(langchain_surrealdb(chunk_units(result.chunks), bench.queries, vectors, work, _venv(args)))
        rows[-1].note += "; our stored chunks and vectors"
        _log(f"  langchain-surrealdb: {rows[-1].note}")
    rows.extend(result.rows)
    return {"folder": str(bench.folder), "format": "files", "passages": len(result.chunks.chunks), "queries": len(bench.queries),
            "gold_not_found": result.coverage.not_found, "coverage": result.coverage.describe(),
            "rows": [row.figures() for row in rows]}


def _venv(args: argparse.Namespace) -> Path:
    return Path(args.langchain_venv or args.store_dir / "langchain-surrealdb-venv")


def table(report: dict[str, Any]) -> str:
    units = "chunks of files" if report["format"] == "files" else "passages"
    lines = [f"### {report['name']}: {report['passages']} {units}, {report['queries']} queries", "",
             "| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    for row in report["rows"]:
        cells = [_cell(row[c]) for c in COLUMNS]
        lines.append("| " + " | ".join(cells) + " |")
    recall = [f"recall@{k}" for k in KS]
    for kind in sorted({t for row in report["rows"] for t in row.get("by_type", {})}):
        count = next(row["by_type"][kind]["queries"] for row in report["rows"] if kind in row.get("by_type", {}))
        lines += ["", f"type {kind} ({count} questions)", "", "| system | " + " | ".join(f"R@{k}" for k in KS) + " |",
                  "|" + "---|" * (len(KS) + 1)]
        lines += ["| " + " | ".join([row["system"], *(_cell(row["by_type"][kind][r]) for r in recall)]) + " |"
                  for row in report["rows"] if kind in row.get("by_type", {})]
    if "coverage" in report:
        lines += ["", report["coverage"]]
    lines += ["", LATENCY]
    return "\n".join(lines)


def chart(reports: Sequence[dict[str, Any]], path: Path) -> Path:
    """Recall@k bars per system (top) and p50 latency / ingest seconds on a log scale (bottom), one column per corpus."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    systems = max((r["rows"] for r in reports), key=len)
    fig, axes = plt.subplots(2, len(reports), figsize=(1.2 + 0.9 * len(systems) * len(reports), 7.5), squeeze=False)
    for column, report in enumerate(reports):
        rows = [row for row in report["rows"] if row["recall@5"] is not None]
        names = [row["system"].replace("ours: ", "ours\n") for row in rows]
        xs = range(len(rows))
        top, bottom = axes[0][column], axes[1][column]
        width = 0.8 / len(KS)
        for i, k in enumerate(KS):
            offsets = [x + (i - (len(KS) - 1) / 2) * width for x in xs]
            bars = top.bar(offsets, [row[f"recall@{k}"] for row in rows], width, label=f"recall@{k}")
            top.bar_label(bars, fmt="%.1f", fontsize=7)
        top.set_ylim(0, 100)
        top.set_ylabel("recall (%)")
        top.set_title(f"{report['name']} ({report['queries']} queries, {report['passages']} passages)")
        top.set_xticks(list(xs), names, fontsize=7, rotation=30, ha="right")
        top.legend(loc="lower right", fontsize=8)
        highest = 1e-3
        for i, (key, label) in enumerate((("p50_ms", "p50 ms, wall-clock, question embedding included"), ("ingest_s", "ingest / index s"))):
            values = [max(row[key] or 0.0, 1e-3) for row in rows]
            highest = max(highest, *values)
            bars = bottom.bar([x + (i - 0.5) * 0.4 for x in xs], values, 0.4, label=label)
            bottom.bar_label(bars, fmt="%.4g", fontsize=7)
        bottom.set_yscale("log")
        bottom.set_ylim(top=highest * 50)  # room for the legend above the bars
        bottom.set_xticks(list(xs), names, fontsize=7, rotation=30, ha="right")
        bottom.legend(loc="upper left", fontsize=8)
    failed = [f"{row['system']}: {row['note']}" for r in reports for row in r["rows"] if row["recall@5"] is None]
    if failed:
        fig.text(0.01, 0.005, "\n".join(sorted(set(failed)))[:400], fontsize=7)
    fig.tight_layout(rect=(0, 0.04 if failed else 0, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def warmed_ingestor() -> Ingestor:
    """The default models, loaded before anything is timed (one tiny ingest into a throwaway store)."""
    with SurrealStore("mem://") as scratch:
        ingestor = Ingestor(scratch)
        ingestor.ingest_texts(["Ada Lovelace wrote the first program for Charles Babbage's Analytical Engine."])
    return ingestor


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("folders", nargs="*", type=Path, help="benchmark folders: queries.jsonl with corpus.jsonl, or with files")
    parser.add_argument("--docs", type=Path, help="with --queries: a folder of files to ingest")
    parser.add_argument("--queries", type=Path, help="with --docs: queries.jsonl naming gold_files")
    parser.add_argument("--limit", type=_positive, help="first N queries only")
    parser.add_argument("--corpus-limit", type=_positive, help="the gold passages of the chosen queries plus others up to N")
    parser.add_argument("--store-dir", type=Path, default=Path("/tmp/surreal-kgrag-side-by-side"),
                        help="stores, the vector cache and the langchain-surrealdb venv go here")
    parser.add_argument("--chart", type=Path, help="write a PNG chart here")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON (the tables go to stderr)")
    parser.add_argument("--modes", type=_choices(tuple(RETRIEVERS)), default=list(RETRIEVERS), help="our modes, comma-separated")
    parser.add_argument("--baselines", type=_choices(BASELINES), default=list(BASELINES), help="baselines, comma-separated")
    parser.add_argument("--langchain-venv", type=Path, help="virtual environment for langchain-surrealdb (default: under --store-dir)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    load_before = os.getloadavg()[0]
    ingestor = warmed_ingestor()
    sets: list[tuple[Path, Path | None, Path | None]] = [(folder, None, None) for folder in args.folders]
    if args.queries:
        sets.append((args.queries.parent, args.docs, args.queries))
    if not sets:
        raise SystemExit("give benchmark folders, or --docs DIR --queries FILE")
    reports = []
    for folder, docs, queries in sets:
        report = run_set(folder, args, ingestor, docs, queries)
        report["name"] = folder.resolve().name
        reports.append(report)
        print(table(report) + "\n", file=sys.stderr if args.json else sys.stdout, flush=True)
        if args.chart:  # after each corpus, so a run stopped part way leaves the corpora it finished
            _log(f"chart written to {chart(reports, args.chart)}")
    load_after = os.getloadavg()[0]
    machine = {"cpus": os.cpu_count(), "load_average_at_start": round(load_before, 2), "load_average_at_end": round(load_after, 2)}
    footer = f"machine: {machine['cpus']} cores, 1-minute load average {load_before:.1f} at start, {load_after:.1f} at end"
    print(footer, file=sys.stderr if args.json else sys.stdout)
    if args.json:
        print(json.dumps({"machine": machine, "latency": LATENCY, "corpora": reports}, indent=2))
    return 0


def _cell(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, dict):  # the parts' p50
        return ", ".join(f"{part} {_cell(ms)}" for part, ms in value.items())
    if isinstance(value, float):
        return f"{value:.1f}" if value >= 1 or value == 0 else f"{value:.2g}"
    return str(value)


def _positive(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return number


def _choices(allowed: tuple[str, ...]) -> Any:
    def parse(value: str) -> list[str]:
        chosen = [v.strip() for v in value.split(",") if v.strip()]
        unknown = [v for v in chosen if v not in allowed]
        if unknown:
            raise argparse.ArgumentTypeError(f"unknown {', '.join(unknown)}: choose from {', '.join(allowed)}")
        return chosen

    return parse


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
