"""Retrieval quality and latency per mode on benchmark folders, beside exact-cosine and BM25 baselines.

    .venv/bin/python benchmarks/retrieval_benchmark.py ../shared/bench/hotpotqa ../shared/bench/sec10q \\
        [--docs DIR --queries FILE] [--store-dir /tmp/kg-bench] [--modes chunk,concept,hybrid,graph] [--limit 200] \\
        [--embedding-process] [--lowercase] [--json]

A folder is either format of ``surreal_kgrag.evaluate``: ``corpus.jsonl`` with queries naming
``gold_ids``, or files (``docs/``, or beside ``queries.jsonl``) with queries naming ``gold_files``;
``--docs``/``--queries`` name one more set explicitly. Each set is ingested into its own embedded store under --store-dir
(re-runs skip unchanged records), then every mode answers every query once, as a new question
(``surreal_kgrag.evaluate.evaluate_retriever``). Printed per mode: recall@1/2/5 over distinct
documents, overall and per question type when the queries have one; the baselines (numpy exact
cosine and BM25 over the same stored chunks) in the same table; how many gold documents the store
does not hold; latency p50 / p95: the wall-clock time of each whole call, the question's embedding
included, for the modes and the baselines alike, and the p50 of each part (embed, analyze, database:
the SurrealDB round trips, answers decoded; rank: reading the channels, PPR, fusion; hydrate;
rerank; other), beside the p50 of embedding each question alone (the floor a vector store pays) and
how far each mode's p50 lies above it. ``graph-edges`` is the graph mode reading its subgraph from
the edges, as for a record user, instead of the adjacency lists (the same ranking, its own time). A last line times
reciprocal rank fusion of the hybrid channels in Python against SurrealDB's ``search::rrf``.
With ``--embedding-process`` the modes that run queries beside the question's embedding (concept,
hybrid, graph) answer every query again with the model in a child process
(``surreal_kgrag.embed.in_own_process``), as rows ``<mode>+child``; the floor stays the embedding
in this process. ``--lowercase`` asks every question written all in lower case: a question without
a capital carries no case, so the modes cannot tell its names from its common words.
Nothing here depends on a dataset's name.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from surreal_kgrag import Ingestor, SurrealStore
from surreal_kgrag.embed import in_own_process
from surreal_kgrag.eval_baselines import run_baselines
from surreal_kgrag.evaluate import DEFAULT_KS, EvalQuery, EvalSet, evaluate_retriever, find_eval_set, gold_coverage
from surreal_kgrag.latency import LATENCY_NOTE
from surreal_kgrag.retrieval import BaseRetriever, HybridRetriever, make_retriever
from surreal_kgrag.retrieval.graph import GraphRetriever
from surreal_kgrag.retrieval.plan import Plan, run
from surreal_kgrag.retrieval.results import Timings
from surreal_kgrag.schema import ADJACENCY_LISTS_SINCE


class EdgeWalkingGraphRetriever(GraphRetriever):
    """The graph mode reading its subgraph from the edges (``graph_subgraph_scoped.surql``), as it
    does for a record user or a store without the adjacency lists: the lists' saving, measured."""

    def _schema_since(self, version: int) -> Plan[bool]:
        if version == ADJACENCY_LISTS_SINCE:
            return False  # as a store written before the lists
        return (yield from super()._schema_since(version))


def fusion_timing(store: SurrealStore, retriever: HybridRetriever, questions: list[str]) -> dict[str, float]:
    """Median time to fuse the hybrid channels: client-side RRF vs ``search::rrf`` in the database."""
    client, server = [], []
    for question in questions:
        channels = run(store, retriever.channels_for(question, k=10))
        t = time.perf_counter()
        retriever.fuse(channels)
        client.append((time.perf_counter() - t) * 1000)
        lists = [[{"id": hit.doc} for hit in hits] for hits in channels.values()]
        t = time.perf_counter()
        store.query("fuse_rrf", {"lists": lists, "limit": 10, "rank_constant": retriever.config.rrf_k})
        server.append((time.perf_counter() - t) * 1000)
    return {"client_rrf_p50_ms": round(statistics.median(client), 3), "search_rrf_p50_ms": round(statistics.median(server), 3)}


def measure(retriever: BaseRetriever, queries: list[EvalQuery]) -> dict[str, Any]:
    """Recall@1/2/5 (overall and per type) and wall-clock latency with its parts, of one mode."""
    return evaluate_retriever(retriever, queries, DEFAULT_KS).flat()


def build(mode: str, store: SurrealStore, embedder: Any) -> BaseRetriever:
    if mode == "graph-edges":
        return EdgeWalkingGraphRetriever(store, embedder=embedder)
    return make_retriever(mode, store, embedder=embedder)


def with_a_child(store: SurrealStore, embedder: Any, modes: list[str], queries: list[EvalQuery]) -> dict[str, Any]:
    """The modes that embed beside their queries, measured again with the questions embedded by a child process."""
    rows = {}
    with in_own_process(embedder) as child:
        if not child.wait_until_ready(120):
            print("  the embedding child did not start: no +child rows", file=sys.stderr)
            return {}
        for mode in modes:
            retriever = build(mode, store, child)
            if retriever.embeds_beside:
                t = time.perf_counter()
                rows[f"{mode}+child"] = measure(retriever, queries)
                print(f"  {mode}+child: {rows[f'{mode}+child']} ({time.perf_counter() - t:.0f}s)", file=sys.stderr)
    return rows


def embedding_alone(embedder: Any, queries: list[EvalQuery]) -> float:
    """Median milliseconds to embed one question, nothing else (after one untimed call)."""
    embedder.embed_query("load the model first")
    times = []
    for query in queries:
        t = time.perf_counter()
        embedder.embed_query(query.question)
        times.append((time.perf_counter() - t) * 1000)
    return round(statistics.median(times), 2)


def benchmark_sets(args: argparse.Namespace) -> list[tuple[str, EvalSet]]:
    sets = [(str(folder), find_eval_set(folder)) for folder in args.folders]
    if args.queries:
        sets.append((str(args.queries), find_eval_set(docs=args.docs, queries=args.queries)))
    if not sets:
        raise SystemExit("give benchmark folders, or --docs DIR --queries FILE")
    return sets


def print_tables(report: dict[str, Any]) -> None:
    for name, entry in report.items():
        print(f"\n{name} ({entry['queries']} queries, {entry['format']})")
        ks = [f"recall@{k}" for k in DEFAULT_KS]
        systems = {**entry["modes"], **entry["baselines"]}
        parts = [p for p in Timings.PARTS if any(row.get("parts_p50_ms", {}).get(p) for row in systems.values())]
        print("| system | " + " | ".join(ks) + " | wall p50 / p95 ms | " + " | ".join(f"{p} p50" for p in parts) + " |")
        print("|---|" + "---|" * (len(ks) + 1 + len(parts)))
        for system, row in systems.items():
            if "note" in row:
                print(f"| {system} | could not run: {row['note']} |")
                continue
            print(f"| {system} | " + " | ".join(str(row[k]) for k in ks) + f" | {row['p50_ms']:.1f} / {row['p95_ms']:.1f} | "
                  + " | ".join(f"{row['parts_p50_ms'].get(p, 0.0):.1f}" for p in parts) + " |")
        for kind in sorted({t for row in systems.values() for t in row.get("by_type", {})}):
            count = next(row["by_type"][kind]["queries"] for row in systems.values() if kind in row.get("by_type", {}))
            print(f"\ntype {kind} ({count} questions)\n| system | " + " | ".join(ks) + " |\n|---|" + "---|" * len(ks))
            for system, row in systems.items():
                if kind in row.get("by_type", {}):
                    print(f"| {system} | " + " | ".join(str(row["by_type"][kind][k]) for k in ks) + " |")
        print(entry["coverage_text"])
        floor = entry["embed_alone_p50_ms"]
        above = ", ".join(f"{mode} +{row['p50_ms'] - floor:.1f}" for mode, row in entry["modes"].items())
        print(f"embedding a question alone: p50 {floor:.1f} ms; each mode's wall p50 above it: {above}")
        print(LATENCY_NOTE)
        print(f"fusion: {entry['fusion']}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="*", type=Path, help="benchmark folders (either format)")
    parser.add_argument("--docs", type=Path, help="with --queries: a folder of files (or a corpus.jsonl) to ingest")
    parser.add_argument("--queries", type=Path, help="with --docs: queries.jsonl naming gold_files (or gold_ids)")
    parser.add_argument("--store-dir", type=Path, default=Path("/tmp/surreal-kgrag-bench"))
    parser.add_argument(
        "--modes", default="chunk,concept,hybrid,graph,graph-edges",
        help="graph-edges: the graph mode reading its subgraph from the edges instead of the adjacency lists",
    )
    parser.add_argument("--baselines", default="numpy,bm25", help="comma-separated: numpy, bm25 (empty: none)")
    parser.add_argument("--limit", type=int, default=None, help="first N queries only")
    parser.add_argument(
        "--embedding-process", action="store_true",
        help="also run concept, hybrid and graph with the questions embedded by a child process (rows <mode>+child)",
    )
    parser.add_argument(
        "--lowercase", action="store_true",
        help="every question written all in lower case, as typed into a chat box (the same gold documents)",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON instead of tables")
    args = parser.parse_args()

    report: dict[str, Any] = {}
    for name, bench in benchmark_sets(args):
        queries = bench.queries[: args.limit]
        if args.lowercase:
            queries = [query.model_copy(update={"question": query.question.lower()}) for query in queries]
        store_path = args.store_dir / Path(name).resolve().name
        with SurrealStore(f"surrealkv://{store_path}") as store:
            ingestor = Ingestor(store)
            t = time.perf_counter()
            summary = ingestor.ingest(bench.inputs)
            ingest_s = time.perf_counter() - t
            done = f"{summary.added} added, {summary.updated} updated, {summary.skipped} unchanged, {summary.failed} failed"
            print(f"{name}: {done} in {ingest_s:.0f}s", file=sys.stderr)
            for failure in summary.failures:
                print(f"  skipped {failure}", file=sys.stderr)
            coverage = gold_coverage(store, queries, summary.failures)
            floor = embedding_alone(ingestor.embedder, queries)
            modes = {}
            for mode in args.modes.split(","):
                t = time.perf_counter()
                modes[mode] = measure(build(mode, store, ingestor.embedder), queries)
                print(f"  {mode}: {modes[mode]} ({time.perf_counter() - t:.0f}s)", file=sys.stderr)
            if args.embedding_process:
                modes |= with_a_child(store, ingestor.embedder, args.modes.split(","), queries)
            chosen = [b for b in args.baselines.split(",") if b]
            baselines, notes = run_baselines(store, ingestor.embedder, queries, DEFAULT_KS, chosen)
            hybrid = make_retriever("hybrid", store, embedder=ingestor.embedder)
            fusion = fusion_timing(store, hybrid, [q.question for q in queries[:50]])  # type: ignore[arg-type]
        report[name] = {
            "latency": LATENCY_NOTE, "queries": len(queries), "format": bench.format, "ingest_seconds": round(ingest_s, 1),
            "embed_alone_p50_ms": floor, "modes": modes,
            "baselines": {**{b: r.flat() for b, r in baselines.items()}, **{b: {"note": n} for b, n in notes.items()}},
            "gold_not_found": len(coverage.not_found), "coverage": coverage.model_dump(), "coverage_text": coverage.describe(),
            "fusion": fusion,
        }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_tables(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
