"""Retrieval quality and latency per mode on benchmark folders (corpus.jsonl + queries.jsonl).

    .venv/bin/python benchmarks/retrieval_benchmark.py ../shared/bench/hotpotqa ../shared/bench/musique \\
        [--store-dir /tmp/kg-bench] [--modes chunk,concept,hybrid,graph] [--limit 200] [--json]

Each folder is ingested into its own embedded store under --store-dir (re-runs skip unchanged
records), then every mode answers every query twice: once with a fresh query embedding, once with
it cached. Printed per mode: recall@2 / recall@5 (HippoRAG definition, from the second run);
database time p50 / p95 (the time spent in SurrealDB queries, answers decoded); total latency
p50 / p95 without the embedding (database + client work: phrase lookup, PPR, fusion); and total
p50 including a fresh query embedding. ``graph-edges`` is the graph mode reading its subgraph from
the edges, as for a scoped caller, instead of the adjacency lists (the same ranking, its own time). A last line times
reciprocal rank fusion of the hybrid channels in Python against SurrealDB's ``search::rrf``.
Nothing here depends on a dataset's name.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from surreal_kgrag import Ingestor, SurrealStore
from surreal_kgrag.evaluate import EvalQuery, load_queries, recall_at
from surreal_kgrag.retrieval import BaseRetriever, HybridRetriever, make_retriever
from surreal_kgrag.retrieval.graph import GraphRetriever
from surreal_kgrag.retrieval.plan import Plan, run


class EdgeWalkingGraphRetriever(GraphRetriever):
    """The graph mode reading its subgraph from the edges (``graph_subgraph_scoped.surql``), as it
    does for a scoped caller or a store without the adjacency lists: the lists' saving, measured."""

    def _adjacency_lists(self) -> Plan[bool]:
        return False
        yield  # pragma: no cover - makes this a generator


def fusion_timing(store: SurrealStore, retriever: HybridRetriever, questions: list[str]) -> dict[str, float]:
    """Median time to fuse the three hybrid channels: client-side RRF vs ``search::rrf`` in the database."""
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


def measure(retriever: BaseRetriever, queries: list[EvalQuery]) -> dict[str, float]:
    """Recall@2/5 and latency percentiles of one mode."""
    r2, r5, db, total, fresh = [], [], [], [], []
    for query in queries:
        t = time.perf_counter()
        first = retriever.search(query.question, k=5)
        fresh.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        result = retriever.search(query.question, k=5)
        total.append((time.perf_counter() - t) * 1000)
        db.append(result.search_ms)
        ids = [doc.id for doc in result.documents]
        r2.append(recall_at(ids, query.gold_ids, 2))
        r5.append(recall_at(ids, query.gold_ids, 5))
        del first

    def pct(values: list[float], q: int) -> float:
        return round(float(np.percentile(values, q)), 1)

    return {
        "recall@2": round(100 * float(np.mean(r2)), 1),
        "recall@5": round(100 * float(np.mean(r5)), 1),
        "db_p50_ms": pct(db, 50),
        "db_p95_ms": pct(db, 95),
        "total_p50_ms": pct(total, 50),
        "total_p95_ms": pct(total, 95),
        "with_embedding_p50_ms": pct(fresh, 50),
        "queries": len(queries),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path, help="folders holding corpus.jsonl and queries.jsonl")
    parser.add_argument("--store-dir", type=Path, default=Path("/tmp/surreal-kgrag-bench"))
    parser.add_argument(
        "--modes", default="chunk,concept,hybrid,graph,graph-edges",
        help="graph-edges: the graph mode reading its subgraph from the edges instead of the adjacency lists",
    )
    parser.add_argument("--limit", type=int, default=None, help="first N queries only")
    parser.add_argument("--json", action="store_true", help="print the report as JSON instead of tables")
    args = parser.parse_args()

    report: dict[str, object] = {}
    for folder in args.folders:
        corpus, queries_file = folder / "corpus.jsonl", folder / "queries.jsonl"
        queries = load_queries(queries_file)[: args.limit]
        store_path = args.store_dir / folder.resolve().name
        with SurrealStore(f"surrealkv://{store_path}") as store:
            ingestor = Ingestor(store)
            t = time.perf_counter()
            summary = ingestor.ingest([corpus])
            ingest_s = time.perf_counter() - t
            print(f"{folder}: {summary.added} added, {summary.skipped} unchanged in {ingest_s:.0f}s", file=sys.stderr)
            modes = {}
            for mode in args.modes.split(","):
                if mode == "graph-edges":
                    retriever = EdgeWalkingGraphRetriever(store, embedder=ingestor.embedder)
                else:
                    retriever = make_retriever(mode, store, embedder=ingestor.embedder)
                retriever.search("warm up", k=5)  # loads spaCy for hybrid
                t = time.perf_counter()
                modes[mode] = measure(retriever, queries)
                print(f"  {mode}: {modes[mode]} ({time.perf_counter() - t:.0f}s)", file=sys.stderr)
            hybrid = make_retriever("hybrid", store, embedder=ingestor.embedder)
            fusion = fusion_timing(store, hybrid, [q.question for q in queries[:50]])  # type: ignore[arg-type]
        report[str(folder)] = {"queries": len(queries), "ingest_seconds": round(ingest_s, 1), "modes": modes, "fusion": fusion}
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    for folder, entry in report.items():
        assert isinstance(entry, dict)
        print(f"\n{folder} ({entry['queries']} queries)")
        print("| mode | recall@2 | recall@5 | db p50 / p95 ms | total p50 / p95 ms | with embedding p50 ms |")
        print("|---|---|---|---|---|---|")
        for mode, row in entry["modes"].items():
            print(
                f"| {mode} | {row['recall@2']} | {row['recall@5']} | {row['db_p50_ms']} / {row['db_p95_ms']} "
                f"| {row['total_p50_ms']} / {row['total_p95_ms']} | {row['with_embedding_p50_ms']} |"
            )
        print(f"fusion: {entry['fusion']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
