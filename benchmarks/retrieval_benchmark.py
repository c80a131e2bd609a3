"""Retrieval quality and latency per mode on benchmark folders (corpus.jsonl + queries.jsonl).

    .venv/bin/python benchmarks/retrieval_benchmark.py ../shared/bench/hotpotqa ../shared/bench/musique \\
        --store-dir /tmp/kg-bench [--modes chunk,concept,hybrid,graph] [--limit 200]

Each folder is ingested into its own embedded store under --store-dir (re-runs skip unchanged
records), then every mode answers every query. Printed per mode: recall@2 / recall@5 (HippoRAG
definition), p50 / p95 database latency with the query embedding cached, and p50 / p95 including a
fresh query embedding (and, for hybrid and graph, the spaCy pass over the question). A last section
times reciprocal rank fusion of the hybrid channels in Python against SurrealDB's ``search::rrf``.
Nothing here depends on a dataset's name.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from surreal_kgrag import Ingestor, SurrealStore
from surreal_kgrag.evaluate import evaluate_retriever, load_queries
from surreal_kgrag.retrieval import HybridRetriever, make_retriever
from surreal_kgrag.retrieval.plan import run


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path, help="folders holding corpus.jsonl and queries.jsonl")
    parser.add_argument("--store-dir", type=Path, default=Path("/tmp/surreal-kgrag-bench"))
    parser.add_argument("--modes", default="chunk,concept,hybrid,graph")
    parser.add_argument("--limit", type=int, default=None, help="first N queries only")
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
                retriever = make_retriever(mode, store, embedder=ingestor.embedder)
                t = time.perf_counter()
                modes[mode] = evaluate_retriever(retriever, queries).flat()
                print(f"  {mode}: {modes[mode]} ({time.perf_counter() - t:.0f}s)", file=sys.stderr)
            hybrid = make_retriever("hybrid", store, embedder=ingestor.embedder)
            fusion = fusion_timing(store, hybrid, [q.question for q in queries[:50]])  # type: ignore[arg-type]
        report[str(folder)] = {"queries": len(queries), "ingest_seconds": round(ingest_s, 1), "modes": modes, "fusion": fusion}
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
