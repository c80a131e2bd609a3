"""Child process of the read-only fuzz test: builds an embedded store, runs every statement of the
JSON file given through run_readonly_query, and prints a JSON summary (ran, refused by the engine,
peak resident memory). Dying here is the failure the test looks for."""

from __future__ import annotations

import json
import resource
import sys
import time
from pathlib import Path

import numpy as np
from store_rows import one_chunk_document

from surreal_kgrag import SurrealStore
from surreal_kgrag.llm import ReadonlyLimits, ReadonlyQueryError, run_readonly_query
from surreal_kgrag.schema import ensure_schema
from surreal_kgrag.surql import NO_FILTER

DOCUMENTS = 300


def main(path: str) -> None:
    statements = json.loads(Path(path).read_text(encoding="utf-8"))
    store = SurrealStore("mem://")
    ensure_schema(store, dimension=4, embedder="fuzz")
    rng = np.random.default_rng(0)
    for i in range(DOCUMENTS):
        store.query("write_documents", one_chunk_document(i, rng.random(4, dtype=np.float32)), scope=NO_FILTER)
    baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    limits = ReadonlyLimits(rows=100, timeout_ms=250)
    ran = failed = 0
    started = time.perf_counter()
    for statement in statements:
        try:
            run_readonly_query(store, statement, limits=limits)
            ran += 1
        except ReadonlyQueryError:
            failed += 1
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"ran": ran, "failed": failed, "baseline_kib": baseline, "peak_kib": peak,
                      "seconds": round(time.perf_counter() - started, 1)}))


if __name__ == "__main__":
    main(sys.argv[1])
