"""Ingest benchmark: end-to-end time with the default pipeline, where the time goes, the database
write rate with precomputed embeddings, and vector query latency and recall right after the load and after rebuilding every index afresh.

    .venv/bin/python benchmarks/ingest_benchmark.py [--corpus ../shared/bench/hotpotqa/corpus.jsonl]
        [--models-cache /tmp/models.pkl] [--db-only]

Prints a JSON report. Works on any corpus in the bench format (or any path `ingest` accepts).
The model outputs of the end-to-end run are recorded and replayed for the database-only run;
`--models-cache` keeps them in a pickle so `--db-only` can time the database part in seconds.
"""

from __future__ import annotations

import argparse
import json
import pickle
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from surreal_kgrag.ingest import IngestConfig, Ingestor
from surreal_kgrag.retrieval import ChunkRetriever, ConceptRetriever
from surreal_kgrag.schema import IndexSettings
from surreal_kgrag.stats import get_stats
from surreal_kgrag.store import SurrealStore

DEFAULT_CORPUS = Path(__file__).resolve().parents[2] / "shared" / "bench" / "hotpotqa" / "corpus.jsonl"
RECALL_K = 40  # the concept retriever's default candidate count


class Recording:
    """Wraps an embedder or extractor, remembering its outputs so a second run replays them."""

    def __init__(self, inner: Any, memory: dict[str, Any] | None = None) -> None:
        self.inner = inner
        self.memory: dict[str, Any] = memory if memory is not None else {}
        self.replay = memory is not None

    name = property(lambda self: self.inner.name)
    dimension = property(lambda self: self.inner.dimension)

    def embed_query(self, text: str) -> np.ndarray:
        return self.inner.embed_query(text)

    async def aembed_query(self, text: str) -> np.ndarray:
        return self.inner.embed_query(text)

    async def aembed_documents(self, texts: list[str]) -> np.ndarray:
        return self.embed_documents(texts)

    def _cached(self, texts: list[str], compute: Any) -> list[Any]:
        if self.replay:
            return [self.memory[t] for t in texts]
        results = compute(texts)
        for text, result in zip(texts, results):
            self.memory[text] = result
        return results

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self._cached(list(texts), lambda ts: list(self.inner.embed_documents(ts))), dtype=np.float32)

    def extract(self, texts: list[str]) -> list[Any]:
        return self._cached(list(texts), lambda ts: self.inner.extract(ts))


class RecordedModel:
    """Stands in for the embedder of a cached recording: same name and dimension, no model."""

    def __init__(self, name: str, dimension: int) -> None:
        self.name = name
        self.dimension = dimension

    def embed_query(self, text: str) -> np.ndarray:
        raise KeyError(f"{text[:40]!r} was not recorded; run without --db-only to record it")


class WriteLog:
    """A store that passes every query through and keeps the rows of each write transaction."""

    TABLES = ("documents", "chunks", "texts", "concepts", "edges")

    def __init__(self, store: SurrealStore) -> None:
        self.store = store
        self.rows: dict[str, list[Any]] = {key: [] for key in self.TABLES}
        self.transactions = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def query(self, name: str, params: dict[str, Any] | None = None, **placeholders: Any) -> list[Any]:
        if name == "write_documents" and params:
            self.transactions += 1
            for key in self.TABLES:
                self.rows[key].extend(params[key])
        return self.store.query(name, params, **placeholders)


def engine_ceiling(log: WriteLog, folder: str) -> dict[str, Any]:
    """The rows the pipeline wrote, in statements of the same average size, written again with bare
    INSERTs into tables with no schema, no index and no transaction: the engine's own rate here."""
    times: dict[str, float] = {}
    with SurrealStore(f"surrealkv://{folder}/ceiling") as store:
        for key in WriteLog.TABLES:
            rows = log.rows[key]
            size = max(1, round(len(rows) / max(1, log.transactions)))
            empty: dict[str, list[Any]] = {table: [] for table in WriteLog.TABLES}
            t = time.perf_counter()
            for start in range(0, len(rows), size):
                store.query("bulk_insert", {**empty, key: rows[start : start + size]})
            times[key] = time.perf_counter() - t
    total = sum(times.values())
    return {
        "seconds": round(total, 2),
        "chunks_per_s": round(len(log.rows["chunks"]) / total),
        "rows_per_s": {key: round(len(log.rows[key]) / t) for key, t in times.items() if t > 0},
        "rows": {key: len(rows) for key, rows in log.rows.items()},
    }


def query_vectors(embedder: Recording, count: int) -> np.ndarray:
    """Query vectors: the first recorded embeddings, those of the first chunks (no model needed to replay them)."""
    return np.asarray(list(embedder.memory.values())[:count], dtype=np.float32)


def knn_latency(store: SurrealStore, embedder: Any, vectors: np.ndarray) -> dict[str, float]:
    out = {}
    for name, cls in (("chunk", ChunkRetriever), ("concept", ConceptRetriever)):
        retriever = cls(store, embedder=embedder)
        times = []
        for vector in vectors:
            t = time.perf_counter()
            retriever.search("vector query", embedding=vector.tolist(), k=5)
            times.append((time.perf_counter() - t) * 1000)
        out[f"{name}_p50_ms"] = round(statistics.median(times), 2)
    return out


def concept_recall(store: SurrealStore, embedder: Recording, vectors: np.ndarray, ef: int = 80) -> float:
    """Share of the exact top-RECALL_K concepts (cosine, numpy) that the HNSW index returns."""
    rows = store.query("concept_vectors")[-1]
    names = [row["name"] for row in rows]
    matrix = np.asarray([row["embedding"] for row in rows], dtype=np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    hits = []
    for vector in vectors:
        exact = {names[i] for i in np.argsort(-(matrix @ vector))[:RECALL_K]}
        found = store.query("nearest_concepts", {"embedding": vector}, k=RECALL_K, ef=ef)[-1]
        hits.append(len(exact & set(found)) / RECALL_K)
    return round(float(np.mean(hits)), 3)


def end_to_end(corpus: str, embedder: Recording, extractor: Recording, folder: str, questions: int) -> dict[str, Any]:
    report: dict[str, Any] = {}
    with SurrealStore(f"surrealkv://{folder}/e2e") as store:
        summary = Ingestor(store, embedder=embedder, extractor=extractor).ingest([corpus])
        stats = get_stats(store)
        timings = summary.timings
        model = timings["extract"] + timings["embed"]
        database = timings["write"] + timings["index"]
        report["end_to_end"] = {
            "seconds": summary.seconds,
            "documents": stats.documents,
            "chunks": stats.chunks,
            "concepts": stats.concepts,
            "mentions": stats.mentions,
            "stage_seconds": timings,
            "share_spacy": round(timings["extract"] / summary.seconds, 3),
            "share_embedding": round(timings["embed"] / summary.seconds, 3),
            "share_database": round(database / summary.seconds, 3),
            "model_dominates": model > database,
        }
        report["end_to_end"]["query_after_load"] = knn_latency(store, embedder, query_vectors(embedder, questions))
        t = time.perf_counter()
        again = Ingestor(store, embedder=embedder, extractor=extractor).ingest([corpus])
        report["reingest"] = {"seconds": round(time.perf_counter() - t, 2), "skipped": again.skipped, "added": again.added}
    return report


def database_writes(
    corpus: str, embedder: Recording, extractor: Recording, folder: str, questions: int, config: IngestConfig
) -> dict[str, Any]:
    """The default pipeline with the models replayed from memory: only the database is timed."""
    embedder.replay = extractor.replay = True
    vectors = query_vectors(embedder, questions)
    report: dict[str, Any] = {}
    with SurrealStore(f"surrealkv://{folder}/writes") as store:
        log = WriteLog(store)
        summary = Ingestor(log, embedder=embedder, extractor=extractor, config=config).ingest([corpus])
        write_s, index_s = summary.timings["write"], summary.timings["index"]
        report["database_writes"] = {
            "write_seconds": round(write_s, 2),
            "index_seconds": round(index_s, 2),
            "chunks_per_s": round(summary.chunks / write_s),
            "edges_per_s": round(summary.edges / write_s),
            "vectors_per_s": round((summary.chunks + summary.concepts) / write_s),
            "chunks_per_s_with_index": round(summary.chunks / (write_s + index_s)),
            "chunks": summary.chunks,
            "edges": summary.edges,
            "new_concepts": summary.concepts,
            "hnsw": config.index.model_dump(),
        }
        # The ingest rebuilt the indexes whose pending queue was large next to them (all three, on
        # an empty store) as new generations; nothing was reopened.
        report["index_generations_after_load"] = {k: v.generation for k, v in store.index_states().items()}
        report["query_right_after_load"] = knn_latency(store, embedder, vectors)
        report["query_right_after_load"]["concept_recall@40"] = concept_recall(store, embedder, vectors)
        t = time.perf_counter()
        rebuilt = store.optimize(force=True)  # every index rebuilt afresh: the reference point
        report["rebuild_seconds"] = round(time.perf_counter() - t, 2)
        report["rebuilt"] = rebuilt.rebuilt
        report["query_after_rebuild"] = knn_latency(store, embedder, vectors)
        report["query_after_rebuild"]["concept_recall@40"] = concept_recall(store, embedder, vectors)
        report["after_load_vs_after_rebuild"] = {
            key: round(report["query_right_after_load"][key] / report["query_after_rebuild"][key], 2)
            for key in ("chunk_p50_ms", "concept_p50_ms")
        }
    report["engine_ceiling"] = engine_ceiling(log, folder)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default=str(DEFAULT_CORPUS))
    parser.add_argument("--questions", type=int, default=30, help="vector queries timed after the load")
    parser.add_argument("--models-cache", type=Path, help="pickle of recorded model outputs (written, or read with --db-only)")
    parser.add_argument("--db-only", action="store_true", help="skip the end-to-end run; replay --models-cache")
    parser.add_argument("--hnsw-efc", type=int, default=IndexSettings().hnsw_efc)
    parser.add_argument("--hnsw-m", type=int, default=IndexSettings().hnsw_m)
    parser.add_argument("--group-size", type=int, default=IngestConfig().group_size)
    args = parser.parse_args()
    config = IngestConfig(group_size=args.group_size, index=IndexSettings(hnsw_efc=args.hnsw_efc, hnsw_m=args.hnsw_m))
    report: dict[str, Any] = {"corpus": args.corpus}

    if args.db_only:
        if not args.models_cache or not args.models_cache.exists():
            parser.error("--db-only replays --models-cache FILE, written by a run without --db-only")
        cached = pickle.loads(args.models_cache.read_bytes())
        embedder = Recording(RecordedModel(cached["embedder"], cached["dimension"]), cached["embed"])
        extractor = Recording(None, cached["extract"])
    else:
        from surreal_kgrag.embed import resolve_embedder
        from surreal_kgrag.extract import resolve_extractor

        embedder = Recording(resolve_embedder(None))
        extractor = Recording(resolve_extractor(None))
        _ = embedder.dimension  # load the model before timing
        extractor.inner.extract(["warm up the spaCy pipeline"])

    with tempfile.TemporaryDirectory() as folder:
        if not args.db_only:
            report.update(end_to_end(args.corpus, embedder, extractor, folder, args.questions))
            if args.models_cache:
                record = {"embedder": embedder.name, "dimension": embedder.dimension, "embed": embedder.memory,
                          "extract": extractor.memory}
                args.models_cache.write_bytes(pickle.dumps(record))
        report.update(database_writes(args.corpus, embedder, extractor, folder, args.questions, config))

    json.dump(report, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
