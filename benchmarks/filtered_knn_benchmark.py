"""How exact filtered vector search is: the engine's filtered HNSW KNN, and the chunk retriever with
its workarounds, against an exact (brute-force) filtered search, on an existing store.

    .venv/bin/python benchmarks/filtered_knn_benchmark.py surrealkv:///tmp/kg-bench/hotpotqa \\
        --queries ../shared/bench/hotpotqa/queries.jsonl [--questions 20] [--k 10]

Filters keep a random share of the documents (1%, 5%, 20%, 50%; by id, so any store works). Printed
per filter: mean and worst top-k overlap with the exact top-k, and median wall-clock latency of each
search, the question's vector given to all three (the retriever's: its whole ``search()`` call).
SurrealDB 3.2's filtered HNSW search can drop true neighbours (surrealdb#7423).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from surreal_kgrag import Scope, SurrealStore, make_retriever
from surreal_kgrag.embed import resolve_embedder


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("db", help="database URL of an ingested store")
    parser.add_argument("--queries", required=True, help="queries.jsonl with a 'question' per line")
    parser.add_argument("--questions", type=int, default=20)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()

    lines = Path(args.queries).read_text(encoding="utf-8").splitlines()
    questions = [json.loads(line)["question"] for line in lines if line.strip()][: args.questions]
    embedder = resolve_embedder(None)
    vectors = [np.asarray(embedder.embed_query(q), dtype=np.float32) for q in questions]
    rng = random.Random(args.seed)
    report = {}
    with SurrealStore(args.db) as store:
        keys = sorted(str(row["id"].id) for row in store.query("document_keys")[-1])
        for share in (0.01, 0.05, 0.2, 0.5):
            kept = rng.sample(keys, max(1, int(share * len(keys))))
            scope = Scope(filters={"id": {"$in": kept}})
            condition = scope.compile()
            retriever = make_retriever("chunk", store, embedder=embedder, scope=scope, group_by="chunk")
            engine, ours, t_engine, t_ours, t_exact = [], [], [], [], []
            for question, vector in zip(questions, vectors):
                params = {"embedding": vector, **condition.params}
                t = time.perf_counter()
                exact = [r["id"].id for r in store.query("exact_chunks", params, candidates=args.k, filter=condition)[-1]]
                t_exact.append(time.perf_counter() - t)
                # the engine's KNN alone, without the count that scans few chunks exactly
                knn_params = {**params, "threshold": -1.0, "limit": 10_000, "filtered": True, "exact": False, "count_inside": False}
                t = time.perf_counter()
                out = store.query(
                    "search_chunks", knn_params, candidates=args.k, ef=80, filter=condition, document_filter=condition.on_documents()
                )[-1]
                t_engine.append(time.perf_counter() - t)
                found = [c["id"].id for d in out["documents"] for c in d["chunks"]]
                result = retriever.search(question, k=args.k, embedding=vector.tolist())
                t_ours.append(result.timings.wall_ms / 1000)  # the whole search(), the vector given as to the other two
                mine = [d.chunks[0].id for d in result.documents]
                engine.append(len(set(found) & set(exact)) / max(1, len(exact)))
                ours.append(len(set(mine) & set(exact)) / max(1, len(exact)))
            row = {
                "documents_kept": len(kept),
                "engine_overlap_mean": round(statistics.mean(engine), 3),
                "engine_overlap_worst": round(min(engine), 3),
                "retriever_overlap_mean": round(statistics.mean(ours), 3),
                "retriever_overlap_worst": round(min(ours), 3),
                "engine_p50_ms": round(statistics.median(t_engine) * 1000, 1),
                "retriever_p50_ms": round(statistics.median(t_ours) * 1000, 1),
                "exact_p50_ms": round(statistics.median(t_exact) * 1000, 1),
            }
            report[f"{share:.0%} of documents"] = row
            print(f"{share:>4.0%} {json.dumps(row)}", file=sys.stderr)
    print(json.dumps({"db": args.db, "questions": len(questions), "k": args.k, "filters": report}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
