"""What a filter costs a search: wall-clock p50 of each mode without a filter, with a filter passing
one document, half of them (by source) and every document but one, on an existing store.

    .venv/bin/python benchmarks/filtered_latency.py surrealkv:///var/tmp/bench11/sec10q \\
        --queries ../shared/bench/sec10q/queries.jsonl [--questions 10] [--modes chunk,graph]

Each question's vector is computed once and given to every search, so the figures are the search
alone (database, ranking, hydration). The filters are on ``source`` (an equality, an ordering and
a negation), so their own cost is one comparison a row. Filtered HNSW search on SurrealDB 3.2 walks
far into the graph when few vectors pass (and can drop true neighbours, surrealdb#7423): a search
counts the documents inside its filter first and scans their chunks exactly when they are few
(``fragments/nearest_chunks.surql``). One retriever per mode serves every question.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from surreal_kgrag import SurrealStore, make_retriever
from surreal_kgrag.embed import resolve_embedder


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("db", help="database URL of an ingested store")
    parser.add_argument("--queries", required=True, help="queries.jsonl with a 'question' per line")
    parser.add_argument("--questions", type=int, default=10)
    parser.add_argument("--modes", default="chunk", help="comma-separated retrieval modes")
    args = parser.parse_args()

    lines = Path(args.queries).read_text(encoding="utf-8").splitlines()
    questions = [json.loads(line)["question"] for line in lines if line.strip()][: args.questions]
    embedder = resolve_embedder(None)
    vectors = [[float(x) for x in embedder.embed_query(q)] for q in questions]
    with SurrealStore(args.db) as store:
        sources = sorted(row["source"] for row in store.query("document_sources")[-1])
        first, middle = sources[0], sources[len(sources) // 2]
        filters = {
            "none": None,
            "one document": {"source": first},
            "half the documents": {"source": {"$lt": middle}},
            "all but one document": {"source": {"$ne": first}},
        }
        for mode in args.modes.split(","):
            retriever = make_retriever(mode, store, embedder=embedder)
            row = []
            for label, spec in filters.items():
                walls = []
                for question, vector in zip(questions, vectors, strict=True):
                    started = time.perf_counter()
                    retriever.search(question, k=5, filters=spec, embedding=vector)
                    walls.append((time.perf_counter() - started) * 1000)
                row.append(f"{label} {statistics.median(walls):.1f}")
            print(f"{mode}: wall p50 ms, question vector given: " + ", ".join(row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
