"""Search index maintenance, measured: vector queries right after a bulk load (the store's rule
rebuilds what the load left pending) against after rebuilding every index afresh, and what 100 more
documents cost written into the full store against into an empty one.

    .venv/bin/python benchmarks/index_benchmark.py --source surrealkv:///tmp/kg-bench/hotpotqa \\
        --queries ../shared/bench/hotpotqa/queries.jsonl

``--source`` is a store built by ``surreal-kgrag ingest`` (the benchmark only reads it). Its rows,
embeddings included, are written again through the ingest's own write transaction, so the figures
are the database's, without the models. Prints a JSON report.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from surreal_kgrag import make_retriever
from surreal_kgrag.db.sdk import RecordID
from surreal_kgrag.embed import resolve_embedder
from surreal_kgrag.indexes import IndexSettings
from surreal_kgrag.ingest import IngestConfig
from surreal_kgrag.schema import ensure_schema, read_meta
from surreal_kgrag.store import SurrealStore
from surreal_kgrag.surql import NO_FILTER

GROUP = 16  # documents per write transaction, as the ingest writes them
VECTOR_MIN_CHUNKS = IngestConfig().concept_vector_min_chunks


def export(url: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The source store's meta and, per document, everything written with it."""
    with SurrealStore(url, create=False) as store:
        meta = read_meta(store) or {}
        documents, chunks, texts, concepts, edges = store.query("export_rows")
    by_doc: dict[Any, dict[str, Any]] = {d["id"]: {"document": d, "chunks": [], "texts": [], "edges": []} for d in documents}
    for chunk in chunks:
        chunk["embedding"] = np.asarray(chunk["embedding"], dtype=np.float32)
        by_doc[chunk["doc"]]["chunks"].append(chunk)
    for text in texts:
        by_doc[text["doc"]]["texts"].append(text)
    for edge in edges:
        by_doc[edge["doc"]]["edges"].append(edge)
    concept_rows = {c["id"]: _with_vector(c) for c in concepts}
    rows = list(by_doc.values())
    for row in rows:
        row["concepts"] = {e["out"]: concept_rows[e["out"]] for e in row["edges"] if e["out"] in concept_rows}
    return meta, rows


def _with_vector(concept: dict[str, Any]) -> dict[str, Any]:
    """A concept row, its vector as float32 apart (written to concept_vector after the row); one
    without a vector (IngestConfig.concept_vector_min_chunks) has none."""
    vector = concept.pop("embedding", None)
    return concept if vector is None else {**concept, "vector": np.asarray(vector, dtype=np.float32)}


def load(store: SurrealStore, rows: list[dict[str, Any]], settings: IndexSettings) -> dict[str, float]:
    """Write the rows in groups as the ingest does; then the ingest's index step."""
    seen: set[Any] = set()
    vectors = {"chunks": 0, "concepts": 0}
    t = time.perf_counter()
    for start in range(0, len(rows), GROUP):
        group = rows[start : start + GROUP]
        mentions: dict[Any, int] = defaultdict(int)
        for row in group:
            for concept_id in row["concepts"]:
                mentions[concept_id] += 1
        # Every concept the group mentions (the write creates those the store lacks), df counted here.
        concepts = {c: {**row["concepts"][c], "df": n} for row in group for c, n in mentions.items() if c in row["concepts"]}
        store.query("write_documents", {
            "doc_ids": [row["document"]["id"] for row in group],
            "documents": [row["document"] for row in group],
            "concepts": [{k: v for k, v in c.items() if k != "vector"} for c in concepts.values()],
            "chunks": [c for row in group for c in row["chunks"]],
            "texts": [x for row in group for x in row["texts"]],
            "edges": [e for row in group for e in row["edges"]],
            "vector_min_chunks": VECTOR_MIN_CHUNKS,
        }, scope=NO_FILTER)
        vectors["chunks"] += sum(len(row["chunks"]) for row in group)
        fresh = [(c, row["vector"]) for c, row in concepts.items() if c not in seen and "vector" in row]
        store.query("concept_vectors_write", {
            "vectors": [{"concept": c, "embedding": vector} for c, vector in fresh],
            "queued": [RecordID("concept_vector_queue", c.id) for c, _ in fresh],
        })
        vectors["concepts"] += len(fresh)
        seen.update(concepts)
    write = time.perf_counter() - t
    t = time.perf_counter()
    report = store.after_bulk_write(chunks=vectors["chunks"], concepts=vectors["concepts"], settings=settings)
    return {"write_s": round(write, 2), "index_s": round(time.perf_counter() - t, 2), "rebuilt": report.rebuilt, **vectors}


def latency(store: SurrealStore, embedder: Any, questions: list[str], vectors: list[list[float]]) -> dict[str, float]:
    out = {}
    for mode in ("chunk", "concept", "hybrid"):
        retriever = make_retriever(mode, store, embedder=embedder)
        retriever.search(questions[0], embedding=vectors[0], k=5)
        times = []
        for question, vector in zip(questions, vectors):
            t = time.perf_counter()
            retriever.search(question, embedding=vector, k=5)
            times.append((time.perf_counter() - t) * 1000)
        out[f"{mode}_p50_ms"] = round(statistics.median(times), 1)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", required=True, help="URL of a store built by surreal-kgrag ingest")
    parser.add_argument("--queries", required=True, help="queries.jsonl of the same corpus")
    parser.add_argument("--questions", type=int, default=40)
    parser.add_argument("--increment", type=int, default=100, help="documents written into the full store at the end")
    args = parser.parse_args()

    meta, rows = export(args.source)
    questions = [json.loads(line)["question"] for line in Path(args.queries).read_text().splitlines()[: args.questions]]
    embedder = resolve_embedder(meta.get("embedder"))
    vectors = [embedder.embed_query(q).tolist() for q in questions]
    bulk, increment = rows[: -args.increment], rows[-args.increment :]
    settings = IndexSettings()
    report: dict[str, Any] = {"source": args.source, "documents": len(rows), "rule": settings.model_dump()}
    with tempfile.TemporaryDirectory() as folder:
        with SurrealStore(f"surrealkv://{folder}/full") as store:
            ensure_schema(store, dimension=int(meta["dimension"]), embedder=str(meta["embedder"]))
            report["bulk_load"] = load(store, bulk, settings)
            report["query_right_after_load"] = latency(store, embedder, questions, vectors)
            rebuilt = store.optimize(force=True)
            report["rebuild_all"] = {"seconds": rebuilt.seconds, "rebuilt": rebuilt.rebuilt}
            report["query_after_rebuilding_all"] = latency(store, embedder, questions, vectors)
            report["increment_into_full_store"] = load(store, increment, settings)
            report["query_after_increment"] = latency(store, embedder, questions, vectors)
        with SurrealStore(f"surrealkv://{folder}/empty") as store:
            ensure_schema(store, dimension=int(meta["dimension"]), embedder=str(meta["embedder"]))
            report["increment_into_empty_store"] = load(store, increment, settings)
        with SurrealStore(f"surrealkv://{folder}/pending") as store:  # the same load, never rebuilt
            ensure_schema(store, dimension=int(meta["dimension"]), embedder=str(meta["embedder"]))
            report["bulk_load_no_rebuild"] = load(store, bulk, IndexSettings(auto_rebuild=False))
            report["query_after_load_no_rebuild"] = latency(store, embedder, questions, vectors)
    after, ref = report["query_right_after_load"], report["query_after_rebuilding_all"]
    report["after_load_vs_after_rebuild"] = {k: round(after[k] / ref[k], 2) for k in after}
    report["no_rebuild_vs_after_rebuild"] = {k: round(report["query_after_load_no_rebuild"][k] / ref[k], 2) for k in ref}
    full, empty = report["increment_into_full_store"], report["increment_into_empty_store"]
    report["increment_full_vs_empty"] = round((full["write_s"] + full["index_s"]) / (empty["write_s"] + empty["index_s"]), 2)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
