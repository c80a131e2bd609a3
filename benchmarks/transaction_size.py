"""How a write transaction's cost grows with its size, per engine: the same documents written in
groups of different sizes (``IngestConfig.group_size`` for passages, ``group_chunks`` for long files).

    .venv/bin/python benchmarks/transaction_size.py ../shared/bench/hotpotqa --docs 256 \\
        --urls mem://,surrealkv:///tmp/kg-tx --sizes 4,16,64
    .venv/bin/python benchmarks/transaction_size.py "../shared/bench/sec10q/docs/2022 Q3 AAPL.pdf" \\
        --urls mem://,surrealkv:///tmp/kg-tx --sizes 256,64

A folder is read as passages (its ``corpus.jsonl``) and the size is documents a transaction; a file
is read by the loaders and the size is chunks a transaction (a long document is written in slices).
Each run writes into a new store. Printed per engine and size: the write transactions
(``write_documents.surql``), their edges, the time the client waited for them, edges a second and
the longest one. Embedding and extraction happen in every run alike and are not in these figures.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from surreal_kgrag import IngestConfig, Ingestor, SourceDocument, SurrealStore
from surreal_kgrag.db.connection import Connection, EmbeddedConnection, Job, RemoteConnection
from surreal_kgrag.embed import resolve_embedder
from surreal_kgrag.extract import SpacyConceptExtractor


def _inputs(path: Path, docs: int) -> list[Any]:
    if path.is_dir():
        with open(path / "corpus.jsonl", encoding="utf-8") as lines:
            rows = [json.loads(line) for _, line in zip(range(docs), lines)]
        return [SourceDocument(key=str(r["id"]), text=r["text"], title=r.get("title"), source=str(r["id"])) for r in rows]
    return [str(path)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("input", type=Path, help="a benchmark folder (passages) or one file")
    parser.add_argument("--urls", default="mem://,surrealkv:///tmp/kg-transaction-size")
    parser.add_argument("--sizes", default="4,16,64")
    parser.add_argument("--docs", type=int, default=256, help="passages read from a folder")
    args = parser.parse_args()
    inputs = _inputs(args.input, args.docs)
    embedder, extractor = resolve_embedder(None), SpacyConceptExtractor()
    writes: list[tuple[float, int]] = []

    def timing(run: Callable[[Connection, Job], list[Any]]) -> Callable[[Connection, Job], list[Any]]:
        def timed(connection: Connection, job: Job) -> list[Any]:
            start = time.perf_counter()
            results = run(connection, job)
            name, _, params = job
            if name == "write_documents":
                writes.append((time.perf_counter() - start, len(params.get("edges") or [])))
            return results

        return timed

    # Both kinds of connection (an embedded engine, a server), which name each request by its file.
    for kind in (EmbeddedConnection, RemoteConnection):
        kind.run = timing(kind.run)  # type: ignore[method-assign]
    for url in args.urls.split(","):
        for size in (int(s) for s in args.sizes.split(",")):
            if url.startswith("surrealkv://"):
                shutil.rmtree(url.removeprefix("surrealkv://"), ignore_errors=True)
            option = {"group_size": size} if args.input.is_dir() else {"group_chunks": size}
            writes.clear()
            with SurrealStore(url) as store:
                summary = Ingestor(store, embedder=embedder, extractor=extractor, config=IngestConfig(**option)).ingest(inputs)
            waited, edges = sum(w for w, _ in writes), sum(e for _, e in writes)
            print(
                f"{url} {next(iter(option))}={size}: {len(writes)} writes, {summary.chunks} chunks, {edges} edges, "
                f"{waited:.2f} s ({edges / waited:.0f} edges/s, {summary.chunks / waited:.1f} chunks/s), "
                f"longest {max(w for w, _ in writes):.2f} s",
                flush=True,
            )


if __name__ == "__main__":
    main()
