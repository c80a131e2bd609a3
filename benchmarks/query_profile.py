"""Where a search's time goes, per mode: the parts of its wall-clock time and, inside the database
part, each query file and each statement as the engine timed it.

    .venv/bin/python benchmarks/query_profile.py ../shared/bench/hotpotqa --store-dir /work/kg-bench \\
        [--modes chunk,concept,hybrid,graph] [--limit 100] [--embedding-process] [--json]

It reads the store ``retrieval_benchmark.py`` built for the folder (``<store-dir>/<folder name>``; run
that first) and answers each question once per mode, as a new question, on the embedded engine.
Printed per mode: the p50 of the wall-clock time and of each part (``Timings``); per query file,
its p50 as the client waits for it (encoding, the engine, decoding) beside the engine's own time
for its statements; and the statements that take at least ``--min-ms`` at p50, numbered from 1 in
their file (``LET`` statements included). The engine's time comes from the ``time`` it reports
for each statement; the client's from a clock around the one function every query goes through
(``surreal_kgrag.db.sdk.query``).

With ``--embedding-process`` every mode runs twice, its questions embedded first in this process and
then by a child process (``surreal_kgrag.embed.in_own_process``), where the hybrid and graph modes
run their queries that need no vector while the child embeds: the second run's ``embed`` part is the
time the search waited for the vector, and the first run's is the embedding alone.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from collections import defaultdict
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from surreal_kgrag import SurrealStore
from surreal_kgrag.db import sdk
from surreal_kgrag.db.connection import EmbeddedConnection, Job
from surreal_kgrag.embed import ProcessEmbedding, in_own_process, resolve_embedder
from surreal_kgrag.evaluate import find_eval_set
from surreal_kgrag.retrieval import make_retriever

_UNITS = {"ns": 1e-6, "µs": 1e-3, "us": 1e-3, "ms": 1.0, "s": 1000.0}
_DURATION = re.compile(r"([\d.]+)(ns|µs|us|ms|s)")


def engine_ms(duration: str) -> float:
    """A statement's time as the engine reports it ("1.2ms", "830.5µs", "1m2s" never happens here)."""
    return sum(float(value) * _UNITS[unit] for value, unit in _DURATION.findall(duration))


class Recorder:
    """Times every request sent through ``sdk.query`` while it is installed, by query file (the name
    the embedded connection runs it under)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, float, list[float]]] = []
        self._query = sdk.query
        self._run = EmbeddedConnection.run
        self._name = "?"

    def __enter__(self) -> Recorder:
        def named(connection: EmbeddedConnection, job: Job) -> list[Any]:
            self._name = job[0]
            return self._run(connection, job)

        def timed(db: Any, text: str, params: Any) -> dict[str, Any]:
            start = time.perf_counter()
            response = self._query(db, text, params)
            self.record(self._name, text, params, response, (time.perf_counter() - start) * 1000)
            return response

        EmbeddedConnection.run = named  # type: ignore[method-assign]
        sdk.query = timed
        return self

    def __exit__(self, *exc: object) -> None:
        sdk.query = self._query
        EmbeddedConnection.run = self._run  # type: ignore[method-assign]

    def record(self, name: str, text: str, params: Any, response: dict[str, Any], wall_ms: float) -> None:
        """Keep one request: its query file, wall time and each statement's engine time."""
        statements = [engine_ms(str(s.get("time", "0ns"))) for s in response.get("result") or []]
        self.calls.append((name, wall_ms, statements))


def profile(store: SurrealStore, mode: str, questions: list[str], min_ms: float, embedder: Any = None) -> dict[str, Any]:
    retriever = make_retriever(mode, store, embedder=embedder)
    for question in questions[:5]:  # warm: models loaded, catalogue read, counts cached
        retriever.search(question, k=5)
        retriever.forget(question)
    parts: dict[str, list[float]] = defaultdict(list)
    with Recorder() as recorder:
        for question in questions:
            timings = retriever.search(question, k=5).timings
            parts["wall"].append(timings.wall_ms)
            for part, ms in timings.parts().items():
                parts[part].append(ms)
    n = len(questions)
    per_file: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for name, wall, statements in recorder.calls:
        per_file[name]["client"].append(wall)
        per_file[name]["engine"].append(sum(statements))
        for i, ms in enumerate(statements, 1):
            per_file[name][f"statement {i}"].append(ms)
    files = {}
    for name, series in sorted(per_file.items(), key=lambda item: -sum(item[1]["client"])):
        calls = len(series["client"])
        files[name] = {
            "calls_per_search": calls / n,
            "client_p50_ms": statistics.median(series["client"]),
            "engine_p50_ms": statistics.median(series["engine"]),
            "statements": {
                key: statistics.median(values)
                for key, values in series.items()
                if key.startswith("statement") and statistics.median(values) >= min_ms
            },
        }
    if isinstance(embedder, ProcessEmbedding):
        mode += ", questions embedded by a child process" if retriever.embeds_beside else ", with a child it does not use"
    return {"mode": mode, "questions": n, "p50_ms": {part: statistics.median(values) for part, values in parts.items()}, "files": files}


def store_arguments(parser: argparse.ArgumentParser, limit: int) -> None:
    """The arguments that name a store ``retrieval_benchmark.py`` built and the questions to ask it."""
    parser.add_argument("folder", type=Path, help="a benchmark folder retrieval_benchmark.py has ingested")
    parser.add_argument("--store-dir", type=Path, default=Path("/tmp/surreal-kgrag-bench"))
    parser.add_argument("--limit", type=int, default=limit, help="first N questions")


def store_and_questions(args: argparse.Namespace) -> tuple[Path, list[str]] | None:
    """The store ``retrieval_benchmark.py`` built for ``args.folder`` and its first ``args.limit``
    questions; None, after saying what to run, when there is no such store."""
    store_path = args.store_dir / args.folder.resolve().name
    if not store_path.exists():
        print(f"no store at {store_path}: run benchmarks/retrieval_benchmark.py {args.folder} --store-dir {args.store_dir} first")
        return None
    return store_path, [query.question for query in find_eval_set(args.folder).queries[: args.limit]]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    store_arguments(parser, limit=100)
    parser.add_argument("--modes", default="chunk,concept,hybrid,graph")
    parser.add_argument("--min-ms", type=float, default=0.5, help="list statements from this p50 on")
    parser.add_argument("--embedding-process", action="store_true", help="each mode again, its questions embedded by a child")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    found = store_and_questions(args)
    if found is None:
        return 2
    store_path, questions = found
    embedder = resolve_embedder(None)
    with SurrealStore(f"surrealkv://{store_path}") as store, ExitStack() as stack:
        child = stack.enter_context(in_own_process(embedder)) if args.embedding_process else None
        if child is not None and not child.wait_until_ready(120):
            print("the embedding child process did not start: see the warning above")
            return 1
        reports = []
        for mode in args.modes.split(","):
            reports.append(profile(store, mode, questions, args.min_ms, embedder))
            if child is not None:
                reports.append(profile(store, mode, questions, args.min_ms, child))
    if args.json:
        json.dump(reports, sys.stdout, indent=2)
        print()
        return 0
    for report in reports:
        p50 = report["p50_ms"]
        parts = ", ".join(f"{part} {ms:.1f}" for part, ms in p50.items() if part != "wall" and ms >= 0.05)
        print(f"{report['mode']}: wall p50 {p50['wall']:.1f} ms ({parts}; {report['questions']} questions)")
        for name, row in report["files"].items():
            statements = ", ".join(f"{key.split()[1]}: {ms:.1f}" for key, ms in row["statements"].items())
            print(
                f"  {name:28s} {row['calls_per_search']:4.2f} a search   client p50 {row['client_p50_ms']:5.1f} ms"
                f"   engine p50 {row['engine_p50_ms']:5.1f} ms   {statements}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
