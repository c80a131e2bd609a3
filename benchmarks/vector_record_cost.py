"""What a vector costs inside a record on the embedded engine: on disk, to read, and per KNN result.

    .venv/bin/python benchmarks/vector_record_cost.py [--rows 1000] [--store surrealkv:///work/kg-bench/sec10q]

1. For vectors of 64 to 384 floats (and a control of 2 KB of text and no vector): ``--rows``
   records written into a fresh ``surrealkv://`` store, then the store's bytes on disk per record
   (its value log counted apart: SurrealKV moves values of over 4 KiB there) and the p50 time to
   read 100 records by id (``RETURN $ids.{id}``, 30 samples).
2. With ``--store`` (a store the retrieval benchmark built): the p50 of an HNSW search of the chunk
   index for k = 10, 20, 50 and 100 (ef = max(80, k); ``SELECT VALUE id``, so no field but the id
   is sent back), 40 stored chunk vectors as the questions: how its time grows with the results.

Measured here: a float costs about 20 bytes stored and 0.2 microseconds to read, whatever the rest of
the record; a KNN costs about 85 microseconds per result, each a chunk record read with its vector.
That is the floor of the chunk and concept tables' size and of every search's KNN on this engine.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from surreal_kgrag import SurrealStore
from surreal_kgrag.db.sdk import RecordID

DIMS = (64, 128, 192, 384)


def _bytes(folder: Path) -> tuple[int, int]:
    """(bytes of the whole store, bytes of its value log)."""
    total = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
    vlog = sum(f.stat().st_size for f in (folder / "vlog").rglob("*") if f.is_file()) if (folder / "vlog").is_dir() else 0
    return total, vlog


def _read_ms(conn: Any, table: str, rows: int) -> float:
    times = []
    for _ in range(30):
        ids = [RecordID(table, i) for i in random.sample(range(rows), min(100, rows))]
        start = time.perf_counter()
        conn.run(("read", "RETURN $ids.{id}", {"ids": ids}))
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def record_costs(rows: int) -> None:
    rng = np.random.default_rng(0)
    cases: list[tuple[str, int]] = [("2 KB text, no vector", 0)] + [(f"{dim} floats", dim) for dim in DIMS]
    print(f"{'record':22s} {'disk/record':>12s} {'in value log':>13s} {'read 100':>10s} {'per record':>11s}")
    for label, dim in cases:
        with tempfile.TemporaryDirectory(prefix="kg-vector-cost-") as tmp:
            folder = Path(tmp) / "store"
            store = SurrealStore(f"surrealkv://{folder}")
            conn = store._conn()
            empty = _bytes(folder)[0]
            for start in range(0, rows, 200):
                batch = [
                    {"id": i, **({"embedding": rng.standard_normal(dim).tolist()} if dim else {"content": "x" * 2000})}
                    for i in range(start, min(rows, start + 200))
                ]
                conn.run(("write", "INSERT INTO v $rows RETURN NONE", {"rows": batch}))
            store.close()
            total, vlog = _bytes(folder)
            store = SurrealStore(f"surrealkv://{folder}")
            read = _read_ms(store._conn(), "v", rows)
            store.close()
        print(f"{label:22s} {(total - empty) / rows:10.0f} B {vlog / rows:11.0f} B {read:8.2f} ms {read * 10:8.1f} us")


def knn_costs(url: str) -> None:
    with SurrealStore(url) as store:
        conn = store._conn()
        names = [name for name in conn.run(("info", "INFO FOR TABLE chunk", {}))[-1]["indexes"] if "embedding" in name]
        if not names:
            raise SystemExit(f"{url} has no HNSW index on chunk embeddings: build it with the retrieval benchmark first")
        vectors = conn.run(("vectors", "SELECT VALUE embedding FROM chunk LIMIT 40", {}))[-1]
        print(f"\nKNN on {url} ({names[0]}), {len(vectors)} stored chunk vectors as questions:")
        base = None
        for k in (10, 20, 50, 100):
            text = f"SELECT VALUE id FROM chunk WITH INDEX {names[0]} WHERE embedding <|{k},{max(80, k)}|> $e"
            times = []
            for _ in range(3):
                for vector in vectors:
                    start = time.perf_counter()
                    conn.run(("knn", text, {"e": vector}))
                    times.append((time.perf_counter() - start) * 1000)
            p50 = statistics.median(times)
            extra = "" if base is None else f"  ({(p50 - base[1]) / (k - base[0]) * 1000:.0f} us per result beyond k={base[0]})"
            base = base or (k, p50)
            print(f"  k={k:3d}: p50 {p50:6.2f} ms{extra}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1000, help="records written per case (reads take 100 of them)")
    parser.add_argument("--store", help="a store URL with chunks and their HNSW index, for the KNN part")
    args = parser.parse_args()
    random.seed(1)
    record_costs(args.rows)
    if args.store:
        knn_costs(args.store)


if __name__ == "__main__":
    main()
