"""Ingest benchmark: end-to-end time with the default pipeline, where the time goes, the database
write rate with precomputed embeddings, and vector query latency right after the load.

    .venv/bin/python benchmarks/ingest_benchmark.py [--corpus ../shared/bench/hotpotqa/corpus.jsonl]

Prints a JSON report. Works on any corpus in the bench format (or any path `ingest` accepts).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from surreal_kgrag.embed import resolve_embedder
from surreal_kgrag.extract import resolve_extractor
from surreal_kgrag.ingest import IngestConfig, Ingestor
from surreal_kgrag.retrieve import ChunkRetriever, ConceptRetriever
from surreal_kgrag.stats import get_stats
from surreal_kgrag.store import SurrealStore

DEFAULT_CORPUS = Path(__file__).resolve().parents[2] / "shared" / "bench" / "hotpotqa" / "corpus.jsonl"


class Recording:
    """Wraps an embedder or extractor, remembering its outputs so a second run replays them."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.memory: dict[str, Any] = {}
        self.replay = False

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
        return self._cached(list(texts), self.inner.extract)


def knn_latency(store: SurrealStore, embedder: Any, questions: list[str]) -> dict[str, float]:
    vectors = embedder.embed_documents(questions)
    out = {}
    for name, cls in (("chunk", ChunkRetriever), ("concept", ConceptRetriever)):
        retriever = cls(store, embedder=embedder)
        times = []
        for vector in vectors:
            t = time.perf_counter()
            retriever.search("", embedding=vector.tolist(), k=5)
            times.append((time.perf_counter() - t) * 1000)
        out[f"{name}_p50_ms"] = round(statistics.median(times), 2)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default=str(DEFAULT_CORPUS))
    parser.add_argument("--questions", type=int, default=30, help="vector queries timed after the load")
    args = parser.parse_args()

    embedder = Recording(resolve_embedder(None))
    extractor = Recording(resolve_extractor(None))
    embedder.dimension  # load the model before timing
    extractor.extract(["warm up the spaCy pipeline"])
    report: dict[str, Any] = {"corpus": args.corpus}

    with tempfile.TemporaryDirectory() as tmp:
        # 1. End to end with the default pipeline (index rebuild included).
        with SurrealStore(f"surrealkv://{tmp}/e2e") as store:
            summary = Ingestor(store, embedder=embedder, extractor=extractor).ingest([args.corpus])
            stats = get_stats(store)
            timings = summary.timings
            model = timings["extract"] + timings["embed"]
            report["end_to_end"] = {
                "seconds": summary.seconds,
                "documents": stats.documents,
                "chunks": stats.chunks,
                "concepts": stats.concepts,
                "mentions": stats.mentions,
                "stage_seconds": timings,
                "share_spacy": round(timings["extract"] / summary.seconds, 3),
                "share_embedding": round(timings["embed"] / summary.seconds, 3),
                "share_database": round((timings["write"] + timings["index"]) / summary.seconds, 3),
                "model_dominates": model > timings["write"] + timings["index"],
            }
            questions = [c[:200] for c in list(extractor.memory)[: args.questions]]
            report["query_after_load"] = knn_latency(store, embedder, questions)

            # 2. Re-ingesting the same corpus skips everything.
            t = time.perf_counter()
            again = Ingestor(store, embedder=embedder, extractor=extractor).ingest([args.corpus])
            report["reingest"] = {"seconds": round(time.perf_counter() - t, 2), "skipped": again.skipped, "added": again.added}

        # 3. Database writes alone: models replayed from memory, no index rebuild.
        embedder.replay = extractor.replay = True
        with SurrealStore(f"surrealkv://{tmp}/writes") as store:
            config = IngestConfig(rebuild_index_min_vectors=0)
            summary = Ingestor(store, embedder=embedder, extractor=extractor, config=config).ingest([args.corpus])
            write_s = summary.timings["write"]
            report["database_writes"] = {
                "seconds": round(write_s, 2),
                "chunks_per_s": round(summary.chunks / write_s),
                "edges_per_s": round(summary.edges / write_s),
                "vectors_per_s": round((summary.chunks + summary.concepts) / write_s),
                "chunks": summary.chunks,
                "edges": summary.edges,
                "new_concepts": summary.concepts,
            }
            report["query_before_rebuild"] = knn_latency(store, embedder, questions)
            t = time.perf_counter()
            store.query("rebuild_vector_indexes")
            report["rebuild_seconds"] = round(time.perf_counter() - t, 2)
            report["query_after_rebuild"] = knn_latency(store, embedder, questions)

    json.dump(report, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
