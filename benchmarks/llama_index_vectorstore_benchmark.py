"""The LlamaIndex vector store over a whole benchmark corpus: write time, recall and query latency
through ``VectorStoreIndex.from_vector_store(...)``, against the core's chunk retriever on the same store.

    .venv/bin/python benchmarks/llama_index_vectorstore_benchmark.py ../shared/bench/hotpotqa [--limit N] [--queries N]

Every passage of corpus.jsonl becomes one node (``SurrealKGVectorStore.add``, through the ingest
pipeline: chunks, concepts, edges). Then each question of queries.jsonl (the first --queries) is
answered by the index's retriever (``similarity_top_k=5``) and by the core ``ChunkRetriever`` on the
same store. Printed: nodes written per second, recall@2 / recall@5 (HippoRAG's definition: the
share of gold passages among the top k, averaged over questions) and p50 / p95 milliseconds per
query for both; the two should agree, since they read the same chunks. Figures from a shared
machine are for comparing the two within one run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from llama_index.core import VectorStoreIndex
from llama_index.core.schema import TextNode
from llama_index.vector_stores.surreal_kgrag import SurrealKGVectorStore

from surreal_kgrag import ChunkRetriever, SurrealStore


def recall(found: list[str], gold: list[str], k: int) -> float:
    return sum(g in found[:k] for g in gold) / len(gold)


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="a folder with corpus.jsonl and queries.jsonl")
    parser.add_argument("--limit", type=int, default=None, help="passages to write (default: all)")
    parser.add_argument("--queries", type=int, default=200, help="questions to answer (default: 200)")
    args = parser.parse_args()

    with open(args.folder / "corpus.jsonl", encoding="utf-8") as lines:
        passages = [json.loads(line) for line in lines][: args.limit]
    written = {p["id"] for p in passages}
    with open(args.folder / "queries.jsonl", encoding="utf-8") as lines:
        queries = [q for q in map(json.loads, lines) if set(q["gold_ids"]) <= written][: args.queries]

    with SurrealStore("mem://") as store:
        vector_store = SurrealKGVectorStore(store=store)
        nodes = [TextNode(id_=p["id"], text=p["text"], metadata={"title": p["title"]}) for p in passages]
        started = time.perf_counter()
        vector_store.add(nodes)
        seconds = time.perf_counter() - started
        print(f"wrote {len(nodes)} nodes in {seconds:.1f} s ({len(nodes) / seconds:.1f} nodes/s, chunks, concepts and edges included)")

        retriever = VectorStoreIndex.from_vector_store(vector_store, embed_model=vector_store.embed_model).as_retriever(similarity_top_k=5)
        core = ChunkRetriever(store, embedder=vector_store.texts.embedder, k=5)
        rows: dict[str, dict[str, list[float]]] = {name: {"r2": [], "r5": [], "ms": []} for name in ("llama_index", "core chunk")}
        for query in queries:
            question, gold = query["question"], query["gold_ids"]
            core.embedder.embed_query(question)  # both pay the same embedding: warm the model, not a cache
            t = time.perf_counter()
            found = [n.node.node_id for n in retriever.retrieve(question)]
            rows["llama_index"]["ms"].append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            core_found = [d.id for d in core.search(question).documents]
            rows["core chunk"]["ms"].append((time.perf_counter() - t) * 1000)
            for name, ids in (("llama_index", found), ("core chunk", core_found)):
                rows[name]["r2"].append(recall(ids, gold, 2))
                rows[name]["r5"].append(recall(ids, gold, 5))
        print(f"{len(queries)} questions")
        print(f"{'':14} {'recall@2':>9} {'recall@5':>9} {'p50 ms':>8} {'p95 ms':>8}")
        for name, row in rows.items():
            print(
                f"{name:14} {100 * statistics.mean(row['r2']):9.1f} {100 * statistics.mean(row['r5']):9.1f} "
                f"{percentile(row['ms'], 0.5):8.1f} {percentile(row['ms'], 0.95):8.1f}"
            )


if __name__ == "__main__":
    main()
