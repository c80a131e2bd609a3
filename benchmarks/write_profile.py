"""Where a write's time goes: the next documents of the scale benchmark's sequence appended to a copy
of a store it kept, through the ingest's ``Writer``, timed per query file and statement.

    .venv/bin/python benchmarks/write_profile.py --store-dir /var/tmp/kg-scale [--documents 600] [--check]

``--store-dir`` is a folder ``scale_benchmark.py --store-dir`` filled (its ``kg`` store and
``progress.json``); the store is copied first, so it is never changed. The documents after the ones
it holds (the real passages and generated ones, with their cached model outputs: no model runs)
become ``records.prepare``'s rows and go through ``Writer.write`` as the ingest sends them, in its
write groups. Printed: the chunks written per second; per query file its calls and the time the
client waited (encoding, the engine, decoding) beside the engine's own time for its statements, with
the largest statements numbered from 1 in their file (``LET`` statements included, as
``query_profile.py`` numbers them); and the Python functions that took the most time of their own.
``--check`` then runs ``check_adjacency.surql`` on the copy: every concept's chunk count and chunk
list, and every chunk's list of single concepts, against the edges (a minute at 10k chunks).

``--floor`` then writes the same groups (the same rows, the forward bridges the write found included)
into two more copies with ``write_floor.surql``: the documents, chunks, full-text rows, concepts and
edges alone, nothing derived from them; once with the search indexes and once with the HNSW and BM25
indexes removed from the copy. The engine's rate for the design's rows at this size, beside the
library's: what is left to gain in the library, and what no write path on this engine can pass.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import shutil
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from query_profile import Recorder
from scale_benchmark import store_key, wait_until_idle
from scale_corpus import DEFAULT_CORPORA, ROOT, load_real
from scale_disk import remove_search_index, store_url
from scale_generator import Generator

from surreal_kgrag.db import SurrealStore
from surreal_kgrag.ingest.config import IngestConfig
from surreal_kgrag.ingest.records import PreparedDocument, groups, prepare
from surreal_kgrag.ingest.writer import Writer, concept_records
from surreal_kgrag.models import IngestSummary
from surreal_kgrag.schema import ensure_schema


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store-dir", type=Path, required=True, help="a folder scale_benchmark.py --store-dir kept")
    parser.add_argument("--documents", type=int, default=600, help="documents to append")
    parser.add_argument("--statements", type=int, default=6, help="largest statements printed per query file")
    parser.add_argument("--functions", type=int, default=8, help="Python functions printed")
    parser.add_argument("--check", action="store_true", help="compare the adjacency lists with the edges after")
    parser.add_argument("--floor", action="store_true", help="the same rows alone (write_floor.surql), with and without the search indexes")
    args = parser.parse_args()
    marker = args.store_dir / "progress.json"
    if not marker.is_file():
        print(f"no kept store in {args.store_dir}: run benchmarks/scale_benchmark.py --sizes 10000 --store-dir {args.store_dir} first")
        return 2
    progress = json.loads(marker.read_text())
    real = load_real(DEFAULT_CORPORA, ROOT / ".cache" / "scale", filings=None, max_docs=None, questions=100, log=print)
    gen = Generator(real)
    if progress["key"] != store_key(real, gen):
        print(f"{args.store_dir} was built from another corpus or generator ({progress['key']})")
        return 2
    start = int(progress["documents"])
    config = IngestConfig()
    prepared = [prepare(work, gen.metadata.extract_document(work.doc)) for work in gen.works(start, start + args.documents)]
    with tempfile.TemporaryDirectory(dir=args.store_dir.parent) as folder:
        with _copy(args.store_dir, Path(folder) / "writer", real.dimension, real.embedder_name, config) as store:
            summary = IngestSummary()
            writer = Writer(
                store,
                summary,
                group_size=config.group_size,
                group_chunks=config.group_chunks,
                vector_min_chunks=config.concept_vector_min_chunks,
            )
            profiler = cProfile.Profile()
            with Recorder() as recorder:
                started = time.perf_counter()
                profiler.enable()
                writer.write(prepared, lambda: False)
                profiler.disable()
                wall = time.perf_counter() - started
            print(
                f"{progress['chunks']:,} chunks kept; {args.documents} documents appended: {summary.chunks} chunks, {summary.edges} edges "
                f"in {wall:.1f} s, {summary.chunks / wall:.1f} chunks/s"
            )
            report(recorder, summary.chunks, args.statements)
            print(settled())
            pstats.Stats(profiler).sort_stats("tottime").print_stats(args.functions)
            if args.check:
                started = time.perf_counter()
                print("check (check_adjacency.surql):", store.query("check_adjacency")[-1], f"({time.perf_counter() - started:.0f} s)")
        if args.floor:
            for label, indexed in (("with the search indexes", True), ("without the HNSW and BM25 indexes", False)):
                with _copy(args.store_dir, Path(folder) / f"floor-{indexed}", real.dimension, real.embedder_name, config) as store:
                    if not indexed:
                        for key in ("chunk", "text"):
                            remove_search_index(store, key)
                    with Recorder() as recorder:
                        started = time.perf_counter()
                        chunks, edges = write_floor(store, prepared, config)
                        wall = time.perf_counter() - started
                    print(f"the design's rows alone, {label}: {chunks} chunks, {edges} edges in {wall:.1f} s, {chunks / wall:.1f} chunks/s")
                    report(recorder, chunks, args.statements)
                    print(settled())
    return 0


def settled() -> str:
    """What the engine did in the background after the writes returned (the HNSW index takes new
    vectors into its graph there, surrealdb#6878): until this process used under a tenth of a core
    over 2 s."""
    cpu = time.process_time()
    wall = wait_until_idle(limit_s=900)
    return f"  then busy in the background: {wall:.1f} s until idle (the last 2 s idle included), {time.process_time() - cpu:.1f} s of CPU"


@contextmanager
def _copy(kept: Path, copy: Path, dimension: int, embedder: str, config: IngestConfig) -> Iterator[SurrealStore]:
    """An open copy of the kept store, removed after."""
    shutil.copytree(kept / "kg", copy)
    try:
        with SurrealStore(store_url(copy)) as store:
            ensure_schema(store, dimension=dimension, embedder=embedder, settings=config.index)
            yield store
    finally:
        shutil.rmtree(copy, ignore_errors=True)


def write_floor(store: SurrealStore, prepared: list[PreparedDocument], config: IngestConfig) -> tuple[int, int]:
    """The groups the ingest would write, each as ``write_floor.surql``; returns (chunks, edges)."""
    chunks = edges = 0
    for group in groups(prepared, config.group_size, config.group_chunks):
        params = {
            "documents": [item.record for item in group],
            "concepts": concept_records(group),
            "chunks": [c for item in group for c in item.chunks],
            "texts": [t for item in group for t in item.texts],
            "edges": [e for item in group for e in item.edges],
        }
        store.query("write_floor", params)
        chunks += len(params["chunks"])
        edges += len(params["edges"])
    return chunks, edges


def report(recorder: Recorder, chunks: int, top: int) -> None:
    files: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
    statements: dict[str, dict[int, float]] = defaultdict(lambda: defaultdict(float))
    for name, client_ms, engine_ms in recorder.calls:
        files[name][0] += 1
        files[name][1] += client_ms
        files[name][2] += sum(engine_ms)
        for number, ms in enumerate(engine_ms, 1):
            statements[name][number] += ms
    for name, (calls, client_ms, engine_ms) in sorted(files.items(), key=lambda item: -item[1][1]):
        print(
            f"  {name:<28} {int(calls):>5} calls  client {client_ms / 1000:7.2f} s  engine {engine_ms / 1000:7.2f} s  "
            f"{client_ms / max(1, chunks):6.2f} ms a chunk"
        )
        largest = sorted(statements[name].items(), key=lambda item: -item[1])[:top]
        print("      largest statements:", ", ".join(f"{number}: {ms / 1000:.2f} s" for number, ms in largest))


if __name__ == "__main__":
    raise SystemExit(main())
