"""What Python's cyclic garbage collector costs a search, with the loaded models frozen out of its
reach (``surreal_kgrag.longlived``, the default) and with them back in it (``gc.unfreeze()``).

    .venv/bin/python benchmarks/gc_pause.py ../shared/bench/hotpotqa --store-dir /work/kg-bench \\
        [--modes graph,hybrid] [--limit 200]

It reads the store ``retrieval_benchmark.py`` built for the folder and runs two processes one after
the other, the same questions in each: one as the package loads its models (frozen), one where
loading freezes nothing, as before. Printed per process: the objects the collector tracks once the
models are loaded and what one full collection costs at the end; then per mode and setting, each
question answered once as a new question (its embedding included): the wall-clock p50 / p95 / p99 /
max, and the full (oldest-generation) collections that ran during the searches with their time.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import subprocess
import sys
import time
from typing import Any

from query_profile import store_and_questions, store_arguments

from surreal_kgrag import SurrealStore, longlived
from surreal_kgrag.retrieval import make_retriever


class FullCollections:
    """Counts and times the collections of the oldest generation while it is installed."""

    def __init__(self) -> None:
        self.count = 0
        self.ms = 0.0
        self._start = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.count += 1
            self.ms += (time.perf_counter() - self._start) * 1000

    def __enter__(self) -> FullCollections:
        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self)


def full_collection_ms() -> float:
    gc.collect()
    start = time.perf_counter()
    gc.collect()
    return (time.perf_counter() - start) * 1000


def searches(retriever: Any, questions: list[str]) -> dict[str, float]:
    walls = []
    with FullCollections() as full:
        for question in questions:
            retriever.forget(question)
            start = time.perf_counter()
            retriever.search(question, k=5)
            walls.append((time.perf_counter() - start) * 1000)
    cuts = statistics.quantiles(walls, n=100, method="inclusive")
    return {
        "p50": statistics.median(walls),
        "p95": cuts[94],
        "p99": cuts[98],
        "max": max(walls),
        "full_collections": full.count,
        "full_collection_ms": full.ms,
    }


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """One setting, in this process: the models frozen once loaded (the default) or never."""
    if args.setting == "unfrozen":
        longlived.freeze_loaded = gc.collect  # what loading did before: collect, freeze nothing
    found = store_and_questions(args)
    assert found is not None
    store_path, questions = found
    out: dict[str, Any] = {}
    with SurrealStore(f"surrealkv://{store_path}") as store:
        retrievers = {mode: make_retriever(mode, store) for mode in args.modes.split(",")}
        for retriever in retrievers.values():  # warm: models loaded, counts cached
            for question in questions[:5]:
                retriever.search(question, k=5)
        out["tracked"] = len(gc.get_objects())
        out["modes"] = {mode: searches(retriever, questions) for mode, retriever in retrievers.items()}
        out["full_collection_ms"] = full_collection_ms()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    store_arguments(parser, limit=200)
    parser.add_argument("--modes", default="graph,hybrid")
    parser.add_argument("--setting", choices=["frozen", "unfrozen"], help=argparse.SUPPRESS)  # one process of the two
    args = parser.parse_args()
    if args.setting:
        print(json.dumps(measure(args)))
        return 0
    if store_and_questions(args) is None:
        return 1
    results = {}
    for setting in ("frozen", "unfrozen"):  # each in a new process: the models load once per process
        command = [sys.executable, __file__, str(args.folder), "--store-dir", str(args.store_dir), "--limit", str(args.limit)]
        done = subprocess.run([*command, "--modes", args.modes, "--setting", setting], capture_output=True, text=True, check=True)
        results[setting] = json.loads(done.stdout.strip().splitlines()[-1])
    for setting, result in results.items():
        collection = result["full_collection_ms"]
        print(f"models {setting}: {result['tracked']:,} objects tracked after loading; a full collection: {collection:.1f} ms")
    print("| mode | models | p50 ms | p95 ms | p99 ms | max ms | full collections | their ms |")
    print("|---|---|---|---|---|---|---|---|")
    for mode in args.modes.split(","):
        for setting, result in results.items():
            f = result["modes"][mode]
            print(
                f"| {mode} | {setting} | {f['p50']:.1f} | {f['p95']:.1f} | {f['p99']:.1f} | {f['max']:.1f} | "
                f"{f['full_collections']} | {f['full_collection_ms']:.0f} |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
