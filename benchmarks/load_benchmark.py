"""Load: 1, 4 and 16 concurrent clients (threads, and asyncio tasks) querying hybrid mode on the
HotpotQA store, once idle and once while the MuSiQue corpus is ingested into the same store.

    .venv/bin/python benchmarks/load_benchmark.py ../shared/bench/hotpotqa ../shared/bench/musique \\
        --store-dir /tmp/kg-bench [--seconds 20] [--clients 1,4,16] [--musique-limit N]

The HotpotQA folder is ingested into ``--store-dir/<folder name>`` once (re-runs reuse it, as
retrieval_benchmark.py does) and copied for the run, so the ingest below never changes it. An
embedded store serves one process, so the ingest runs in this process, beside the clients, as it
would in an application. Each client has its own retriever on the one shared store and asks the
folder's questions in turn (their embeddings computed beforehand: the figures are the store's, plus
the spaCy pass hybrid makes over a question the first time). Printed per cell: queries per second,
p50 / p95 latency, errors (must be 0), and the share of the cell during which the ingest ran; a last
"ingest" row of 4 threads runs until the ingest, its index step included, has finished. A last
line checks the store: no document without its chunks, no edge to a missing record. Exit status 1
when any query failed or the check found a torn write.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from surreal_kgrag import Ingestor, SurrealStore, make_retriever
from surreal_kgrag.embed import resolve_embedder


@dataclass
class Cell:
    phase: str
    kind: str
    clients: int
    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0
    ingest_share: float = 0.0

    def row(self) -> dict[str, Any]:
        ordered = sorted(self.latencies)
        p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))] if ordered else float("nan")
        return {
            "phase": self.phase, "kind": self.kind, "clients": self.clients,
            "queries": len(self.latencies), "qps": round(len(self.latencies) / self.seconds, 1) if self.seconds else 0.0,
            "p50_ms": round(statistics.median(ordered), 1) if ordered else float("nan"), "p95_ms": round(p95, 1),
            "errors": len(self.errors), "ingest_share": round(self.ingest_share, 2),
        }


class Ingest:
    """The MuSiQue ingest in a background thread; tracks when it ran."""

    def __init__(self, store: SurrealStore, corpus: Path, embedder: Any) -> None:
        self.store, self.corpus, self.embedder = store, corpus, embedder
        self.started = self.finished = 0.0
        self.summary: Any = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="musique-ingest")

    def _run(self) -> None:
        self.started = time.monotonic()
        try:
            self.summary = Ingestor(self.store, embedder=self.embedder).ingest([self.corpus])
        except BaseException as error:  # reported with the table
            self.error = error
        finally:
            self.finished = time.monotonic()

    def share(self, start: float, end: float) -> float:
        """Share of [start, end] during which the ingest was running."""
        stop = self.finished or end
        overlap = max(0.0, min(end, stop) - max(start, self.started or end))
        return overlap / (end - start) if end > start else 0.0


def run_threads(cell: Cell, store: SurrealStore, embedder: Any, questions: list[tuple[str, list[float]]], seconds: float,
                until: threading.Thread | None = None) -> None:
    """Clients on threads for ``seconds``, or while ``until`` (a thread) is alive."""
    stop = time.monotonic() + seconds
    lock = threading.Lock()

    def running() -> bool:
        return until.is_alive() if until is not None else time.monotonic() < stop

    def client(offset: int) -> None:
        retriever = make_retriever("hybrid", store, embedder=embedder)
        n = offset
        while running():
            question, vector = questions[n % len(questions)]
            t = time.perf_counter()
            try:
                retriever.search(question, embedding=vector, k=5)
                with lock:
                    cell.latencies.append((time.perf_counter() - t) * 1000)
            except Exception as error:  # counted: the benchmark's point is that there are none
                with lock:
                    cell.errors.append(f"{type(error).__name__}: {error}")
            n += 7

    threads = [threading.Thread(target=client, args=(i * 13,)) for i in range(cell.clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


async def run_tasks(cell: Cell, store: SurrealStore, embedder: Any, questions: list[tuple[str, list[float]]], seconds: float) -> None:
    stop = time.monotonic() + seconds

    async def client(offset: int) -> None:
        retriever = make_retriever("hybrid", store, embedder=embedder)
        n = offset
        while time.monotonic() < stop:
            question, vector = questions[n % len(questions)]
            t = time.perf_counter()
            try:
                await retriever.asearch(question, embedding=vector, k=5)
                cell.latencies.append((time.perf_counter() - t) * 1000)
            except Exception as error:
                cell.errors.append(f"{type(error).__name__}: {error}")
            n += 7

    await asyncio.gather(*(client(i * 13) for i in range(cell.clients)))


def measure(phase: str, store: SurrealStore, embedder: Any, questions: list[tuple[str, list[float]]], levels: list[int],
            seconds: float, ingest: Ingest | None) -> list[Cell]:
    cells = []
    for kind in ("threads", "asyncio"):
        for clients in levels:
            cell = Cell(phase, kind, clients)
            start = time.monotonic()
            if kind == "threads":
                run_threads(cell, store, embedder, questions, seconds)
            else:
                asyncio.run(run_tasks(cell, store, embedder, questions, seconds))
            end = time.monotonic()
            cell.seconds = end - start
            cell.ingest_share = ingest.share(start, end) if ingest else 0.0
            cells.append(cell)
            print(json.dumps(cell.row()), file=sys.stderr, flush=True)
    return cells


def prepare(folder: Path, store_dir: Path, embedder: Any) -> Path:
    """The folder's corpus ingested once into store_dir/<name>; returns the store's path."""
    path = store_dir / folder.resolve().name
    with SurrealStore(f"surrealkv://{path}") as store:
        summary = Ingestor(store, embedder=embedder).ingest([folder / "corpus.jsonl"])
        print(f"store {path}: {summary.added} added, {summary.skipped} already there", file=sys.stderr)
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("queried", type=Path, help="folder with corpus.jsonl and queries.jsonl (HotpotQA)")
    parser.add_argument("ingested", type=Path, help="folder whose corpus.jsonl is ingested during the second phase (MuSiQue)")
    parser.add_argument("--store-dir", type=Path, default=Path("/tmp/surreal-kgrag-bench"))
    parser.add_argument("--seconds", type=float, default=20.0, help="per cell")
    parser.add_argument("--clients", default="1,4,16")
    parser.add_argument("--musique-limit", type=int, default=None, help="first N records of the ingested corpus only")
    args = parser.parse_args()
    levels = [int(n) for n in args.clients.split(",")]

    embedder = resolve_embedder(None)
    source = prepare(args.queried, args.store_dir, embedder)
    lines = (args.queried / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    asked = [json.loads(line)["question"] for line in lines]
    questions = [(q, embedder.embed_query(q).tolist()) for q in asked]

    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder) / "store"
        shutil.copytree(source, work)
        corpus = args.ingested / "corpus.jsonl"
        if args.musique_limit:
            corpus = Path(folder) / "ingested.jsonl"
            head = (args.ingested / "corpus.jsonl").read_text(encoding="utf-8").splitlines()[: args.musique_limit]
            corpus.write_text("\n".join(head) + "\n", encoding="utf-8")
        store = SurrealStore(f"surrealkv://{work}", create=False)
        warm = make_retriever("hybrid", store, embedder=embedder)
        for question, vector in questions:  # the spaCy pass over each question, once, outside the cells
            warm.search(question, embedding=vector, k=5)
        cells = measure("idle", store, embedder, questions, levels, args.seconds, None)
        ingest = Ingest(store, corpus, embedder)
        ingest.thread.start()
        cells += measure("ingest", store, embedder, questions, levels, args.seconds, ingest)
        # The rest of the ingest, its index step (a rebuild, when due) included, under 4 clients.
        tail = Cell("ingest", "threads", 4)
        start = time.monotonic()
        run_threads(tail, store, embedder, questions, 0.0, until=ingest.thread)
        tail.seconds, tail.ingest_share = time.monotonic() - start, 1.0
        cells.append(tail)
        ingest.thread.join()
        check = store.query("check_consistency")[-1]
        states = store.index_states()
        store.close()

    rows = [cell.row() for cell in cells]
    print(f"{'phase':<8}{'kind':<9}{'clients':>8}{'queries':>9}{'qps':>8}{'p50 ms':>9}{'p95 ms':>9}{'errors':>8}{'ingest':>8}")
    for r in rows:
        print(f"{r['phase']:<8}{r['kind']:<9}{r['clients']:>8}{r['queries']:>9}{r['qps']:>8.1f}{r['p50_ms']:>9.1f}"
              f"{r['p95_ms']:>9.1f}{r['errors']:>8}{r['ingest_share']:>8.2f}")
    summary = ingest.summary
    if summary is not None:
        print(f"ingest: {summary.added} documents, {summary.chunks} chunks, {summary.concepts} concepts in {summary.seconds:.0f}s "
              f"(index step {summary.timings.get('index', 0):.0f}s); index generations now "
              + ", ".join(f"{k} {s.generation}" for k, s in states.items()))
    if ingest.error is not None:
        print(f"ingest failed: {ingest.error!r}")
    print(f"store check: {check['documents']} documents, {len(check['torn'])} torn, {len(check['dangling'])} dangling edges")
    errors = [e for cell in cells for e in cell.errors]
    for error in sorted(set(errors))[:10]:
        print(f"error: {error}")
    return 1 if errors or check["torn"] or check["dangling"] or ingest.error else 0


if __name__ == "__main__":
    sys.exit(main())
