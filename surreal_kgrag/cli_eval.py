"""``surreal-kgrag eval``: recall of each mode on a benchmark, beside the baselines."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .cli_support import EXIT_OK, EXIT_PARTIAL, MODES, emit, open_store, progress
from .errors import KGRagError
from .retrieval.config import DEFAULT_MODE

EVAL_HELP = """Ingest a benchmark (unchanged documents are skipped) and print recall@k over distinct documents
(per question, the fraction of its gold documents among the first k distinct documents retrieved,
averaged, in percent) with p50/p95 latency per mode, overall and per question type, beside exact
cosine (numpy) and BM25 over the same chunks, and how many gold documents the store does not hold.
Latency is the wall-clock time of each whole search, the question's embedding included (each question
asked as a new one), for the modes and the baselines alike, with the median of each part beside it
(embed, analyze, database, rank, hydrate, rerank, other).

Two formats, detected from the folder's queries.jsonl:
  files    queries.jsonl lines {"id", "question", "gold_files": [file names], "type"?} and the files
           in docs/ (or beside queries.jsonl); a document matches by the file name of its source
  records  queries.jsonl lines {"id", "question", "gold_ids": [corpus ids]} and corpus.jsonl
           lines {"id", "title", "text"}; a document matches by its id

  surreal-kgrag eval bench/sec10q --mode chunk --mode graph
  surreal-kgrag eval --docs filings/ --queries questions.jsonl
  surreal-kgrag eval --corpus corpus.jsonl --queries queries.jsonl --json
"""

def cmd_eval(args: argparse.Namespace) -> int:
    from .eval_baselines import run_baselines
    from .evaluate import EvalReport, evaluate_retriever, find_eval_set, gold_coverage, plot_report
    from .ingest import Ingestor
    from .retrieval import make_retriever

    ks = _cutoffs(args.k)
    bench = find_eval_set(args.folder, docs=args.docs, corpus=args.corpus, queries=args.queries)
    modes = args.mode or list(dict.fromkeys(["chunk", DEFAULT_MODE]))  # plain vectors beside the default
    with open_store(args) as store:
        ingestor = Ingestor(store, embedder=args.embedder)
        summary = ingestor.ingest(bench.inputs)
        for failure in summary.failures:
            print(f"skipped {failure}", file=sys.stderr)
        if summary.failed and bench.format == "records":
            raise KGRagError(f"{summary.failed} records of {bench.described_inputs} could not be ingested: {summary.failures[0]}")
        coverage = gold_coverage(store, bench.queries, summary.failures)
        reports = {}
        for mode in modes:
            retriever = make_retriever(mode, store, embedder=ingestor.embedder)
            reports[mode] = evaluate_retriever(retriever, bench.queries, ks, progress=progress(f"eval {mode}", args))
        baselines, notes = run_baselines(store, ingestor.embedder, bench.queries, ks, args.baselines)
    report = EvalReport(
        corpus=bench.described_inputs, queries_file=str(bench.queries_file), format=bench.format, modes=reports,
        baselines=baselines, baseline_notes=notes, coverage=coverage,
    )
    if args.chart:
        plot_report(report, args.chart)
    text = f"{len(bench.queries)} questions ({bench.format} format: {bench.described_inputs})\n" + report.table()
    if args.chart:
        text += f"\nchart written to {args.chart}"
    emit(args, report.as_json(), text)
    return EXIT_PARTIAL if summary.failed else EXIT_OK


def _cutoffs(text: str) -> list[int]:
    try:
        ks = sorted({int(k) for k in text.split(",") if k.strip()})
    except ValueError as exc:
        raise KGRagError(f"-k takes comma-separated positive integers, e.g. 1,2,5 (got {text!r})") from exc
    if not ks or ks[0] < 1:
        raise KGRagError(f"-k takes comma-separated positive integers, e.g. 1,2,5 (got {text!r})")
    return ks


def _baselines(text: str) -> list[str]:
    from .eval_baselines import BASELINES

    chosen = [] if text.strip() == "none" else [b.strip() for b in text.split(",") if b.strip()]
    unknown = [b for b in chosen if b not in BASELINES]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown baseline {', '.join(unknown)}: choose from {', '.join(BASELINES)}, or none")
    return chosen


def add_eval_command(commands: Any, common: argparse.ArgumentParser) -> None:
    evaluate = commands.add_parser(
        "eval", parents=[common], formatter_class=argparse.RawDescriptionHelpFormatter,
        help="recall@1/2/5 per mode and question type, beside numpy and BM25 baselines, on a benchmark",
        description=EVAL_HELP,
    )
    evaluate.add_argument("folder", nargs="?", help="benchmark folder: queries.jsonl plus docs/ (or files beside it) or corpus.jsonl")
    source = evaluate.add_mutually_exclusive_group()
    source.add_argument("--docs", help="folder (or file) of documents whose file names the queries' gold_files name")
    source.add_argument("--corpus", help="corpus.jsonl ({id, title, text} lines) whose ids the queries' gold_ids name")
    evaluate.add_argument("--queries", help="queries.jsonl ({id, question, gold_files or gold_ids, type?} lines)")
    evaluate.add_argument(
        "--mode", action="append", choices=MODES, help=f"mode to evaluate (repeatable; default: chunk and {DEFAULT_MODE})"
    )
    evaluate.add_argument("-k", default="1,2,5", help="comma-separated cut-offs (default: 1,2,5)")
    evaluate.add_argument(
        "--baselines", type=_baselines, default=["numpy", "bm25"],
        help="comma-separated baselines over the store's chunks: numpy (exact cosine), bm25; or none (default: numpy,bm25)",
    )
    evaluate.add_argument("--chart", help="write a PNG bar chart comparing the modes to this path")
    evaluate.set_defaults(func=cmd_eval)
