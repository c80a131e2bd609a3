"""The SDK's public query path against the embedded fast path (``surreal_kgrag.db.sdk_fastpath``),
on the same workload, in one run:

    .venv/bin/python benchmarks/sdk_paths.py [--rows 2000] [--repeats 3]

  bulk chunk rows: INSERT of rows with a 384-dim float32 vector and two record ids, 500 a request;
  bulk edges:      INSERT RELATION of rows with three record ids, 1,000 a request (5 per chunk);
  KNN query:       one 384-dim query vector, HNSW k=10 (200 queries, after the index is built);

each as rows (or queries) per second end to end into a fresh ``mem://`` database, and the client's
encoding alone (CPU time holding the GIL, per request). Runs alternate between the paths and the
medians of ``--repeats`` runs are printed. The machine is shared: compare the ratios of one run.
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from collections.abc import Callable
from typing import Any

import numpy as np
from surrealdb.data.cbor import encode

from surreal_kgrag.db import sdk, sdk_fastpath
from surreal_kgrag.db.sdk import RecordID

DIM = 384
Path = Callable[[Any, str, dict[str, Any]], dict[str, Any]]


def public(db: Any, text: str, params: dict[str, Any]) -> dict[str, Any]:
    return dict(db.query_raw(text, sdk.plain(params)))


def fast(db: Any, text: str, params: dict[str, Any]) -> dict[str, Any]:
    return sdk_fastpath.execute(sdk_fastpath.engine(db), text, params)


def workload(rows: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]], np.ndarray]:
    vectors = np.random.default_rng(0).standard_normal((rows, DIM)).astype(np.float32)
    chunks = [
        {"id": RecordID("chunk", f"d{i // 10}::h::{i:05d}"), "doc": RecordID("document", f"d{i // 10}"), "embedding": vectors[i]}
        for i in range(rows)
    ]
    edges = [
        {"in": chunk["id"], "out": RecordID("concept", f"c{(i * 7 + j) % 3000}"), "doc": chunk["doc"]}
        for i, chunk in enumerate(chunks)
        for j in range(5)
    ]
    return chunks, edges, vectors


def run(path: Path, chunks: list[dict[str, Any]], edges: list[dict[str, Any]], vectors: np.ndarray) -> dict[str, float]:
    db = sdk.blocking_handle("mem://")
    sdk.open_blocking(db, "bench", "bench", None)
    try:
        started = time.perf_counter()
        for i in range(0, len(chunks), 500):
            path(db, "INSERT INTO chunk $rows RETURN NONE", {"rows": chunks[i : i + 500]})
        chunk_rate = len(chunks) / (time.perf_counter() - started)
        started = time.perf_counter()
        for i in range(0, len(edges), 1000):
            path(db, "INSERT RELATION INTO MENTIONS_CONCEPT $rows RETURN NONE", {"rows": edges[i : i + 1000]})
        edge_rate = len(edges) / (time.perf_counter() - started)
        db.query_raw(f"DEFINE INDEX e ON chunk FIELDS embedding HNSW DIMENSION {DIM} DIST COSINE TYPE F32", {})
        queries = vectors[:200]
        started = time.perf_counter()
        for vector in queries:
            path(db, "SELECT id, vector::distance::knn() AS d FROM chunk WHERE embedding <|10,40|> $v", {"v": vector})
        knn_ms = (time.perf_counter() - started) / len(queries) * 1000
    finally:
        sdk.close(db)
    return {"chunk rows/s": chunk_rate, "edge rows/s": edge_rate, "knn ms/query": knn_ms}


def encoding_ms(chunks: list[dict[str, Any]], edges: list[dict[str, Any]], vectors: np.ndarray) -> dict[str, dict[str, float]]:
    """Client-side encoding of one request of each kind, in ms (the public path: plain() + the SDK's encoder)."""

    def public_bytes(text: str, params: dict[str, Any]) -> bytes:
        return encode({"id": str(uuid.uuid4()), "method": "query", "params": [text, sdk.plain(params)]})

    requests = {
        "500 chunk rows": ("INSERT INTO chunk $rows", {"rows": chunks[:500]}),
        "1,000 edges": ("INSERT RELATION INTO MENTIONS_CONCEPT $rows", {"rows": edges[:1000]}),
        "1 query vector": ("SELECT 1", {"v": vectors[0]}),
    }
    out: dict[str, dict[str, float]] = {}
    for name, (text, params) in requests.items():
        out[name] = {}
        for label, fn in (("public", public_bytes), ("fast", sdk_fastpath.encode_query)):
            reps = 5 if "query" not in name else 200
            started = time.process_time()
            for _ in range(reps):
                fn(text, params)
            out[name][label] = (time.process_time() - started) / reps * 1000
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    chunks, edges, vectors = workload(args.rows)
    figures: dict[str, dict[str, list[float]]] = {"public": {}, "fast": {}}
    for _ in range(args.repeats):
        for label, path in (("public", public), ("fast", fast)):
            for key, value in run(path, chunks, edges, vectors).items():
                figures[label].setdefault(key, []).append(value)
    print(f"end to end, mem://, {args.rows} chunks, {len(edges)} edges; median of {args.repeats} alternating runs")
    print(f"{'':16}{'public':>12}{'fast':>12}{'fast/public':>13}")
    for key in figures["public"]:
        p, f = statistics.median(figures["public"][key]), statistics.median(figures["fast"][key])
        print(f"{key:16}{p:12.1f}{f:12.1f}{f / p:13.2f}")
    print("\nclient encoding per request, ms of CPU holding the GIL")
    print(f"{'':16}{'public':>12}{'fast':>12}{'public/fast':>13}")
    for name, row in encoding_ms(chunks, edges, vectors).items():
        print(f"{name:16}{row['public']:12.2f}{row['fast']:12.2f}{row['public'] / row['fast']:13.1f}")


if __name__ == "__main__":
    main()
