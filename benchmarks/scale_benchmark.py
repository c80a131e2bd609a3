"""Stores of 10k, 100k and 1M chunks on one machine: write rate, disk, memory and query latency per size.

    .venv/bin/python benchmarks/scale_benchmark.py --sizes 10000,100000,1000000 \\
        [--cache .cache/scale] [--store-dir /var/tmp/kg-scale] [--corpus ../shared/bench/hotpotqa \\
        --corpus ../shared/bench/musique] [--filings ../shared/bench/sec10q/docs] [--questions 100] \\
        [--modes chunk,concept,hybrid,graph] [--optimize force|pending|none] [--threads 1] \\
        [--chart scale.png] [--json scale.json]

The point is the database, not the models: no model runs while a store is written.

The chunks: ``scale_corpus.py`` (real ones with cached model outputs), then ``scale_generator.py``
(generated ones whose concept frequencies follow the real ones).

**Write path.** Chunks, mentions and vectors become ``DocumentWork`` and go through the product's
``records.prepare`` and ``Writer`` (the settings of ``IngestConfig``), then the concept-vector stage
(``embed_queued_concepts`` with the cached vectors; a generated concept's vector is its template's
plus noise) and the index maintenance the ingest runs after its writes (``after_bulk_write``).
Each size is built by appending to the previous one (``--store-dir`` keeps the store between runs,
and a later run with larger sizes continues it; the document sequence is deterministic).

**Printed per size**: database write rate (the ``Writer`` alone: chunks/s, edges/s and rows/s over every
table; and the whole load with prepare, concept vectors and index maintenance), bytes on disk per chunk
and per byte of chunk text (``du`` of the surrealkv directory after the store is closed), peak RSS of
this process, time to open the store (connect + first query), ``optimize`` time (``--optimize force``
rebuilds all three search indexes, as after a bulk load), how long the engine then kept compacting in
the background (queries are timed once it is idle), and per mode (chunk, concept, hybrid, graph)
the wall-clock p50/p95 of ``retriever.search()`` over the real questions with their cached embeddings:
the figures EXCLUDE embedding the question (its MiniLM time on this machine, measured once when the
cache is built, is printed beside them) and include everything else (the question's spaCy analysis,
database, client-side walk, fusion, hydration); the database part (``search_ms``) is printed too. The
same questions are then timed again in a new process that only opens and reads the closed store
(``scale_retime.py``; ``--no-reader`` skips it): a process that has just written tens of thousands of
chunks answers slower than one that serves the store (1.1-1.6x at 10k, 1.2-4x at 30k in two runs), and the reader's figures
are the ones a deployment sees. Then the rows each table holds per chunk. ``--chart`` draws each
figure against size (matplotlib), ``--json`` writes every figure.

**What grows faster than the store**: the write rate. The first runs fell from 33 chunks/s (0 -> 2k)
to 12 (2k -> 10k): ``write_documents.surql`` recounted every touched concept's document frequency
from all its edges, and ``title_concepts.surql`` read a concept record (its vector with it) for every
capitalised phrase of a group. Both are now independent of the store's size (document frequencies by
delta; ``concept_title`` rows): 64.6 chunks/s (0 -> 2k) and 33.6 (2k -> 10k) on a quiet machine.
What still grows is the index work inside ``write_documents`` and the reverse bridge search
(``title_mentions.surql``, a full-text AND whose postings grow with the store); docs/benchmarks.md has
the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from scale_corpus import CACHE_VERSION, DEFAULT_CORPORA, ROOT, CachedEmbedder, RealCorpus, load_real
from scale_disk import du_bytes, store_url, table_bytes
from scale_generator import GENERATOR_VERSION, Generator, frequency_shares
from scale_report import MODES, SizeFigures, chart, format_size

from surreal_kgrag.db import SurrealStore
from surreal_kgrag.ingest.concepts import embed_queued_concepts
from surreal_kgrag.ingest.config import IngestConfig
from surreal_kgrag.ingest.records import DocumentWork, PreparedDocument, prepare
from surreal_kgrag.ingest.writer import Writer
from surreal_kgrag.models import IngestSummary
from surreal_kgrag.retrieval import make_retriever
from surreal_kgrag.schema import ensure_schema

WRITE_BATCH_DOCS = 64  # documents prepared and handed to the Writer at a time (its groups are IngestConfig's)


# -- building and measuring --------------------------------------------------------------------


def peak_rss_mb() -> float:
    """This process's peak resident memory. Linux's VmHWM starts afresh at exec; ``ru_maxrss`` does not
    (a child started by a large benchmark process would report the parent's peak)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kilobytes
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: kilobytes


def table_rows(store: SurrealStore) -> dict[str, int]:
    return {k: int(v) for k, v in store.query("scale_table_counts")[-1].items()}


def build(store: SurrealStore, gen: Generator, start: int, stop: int, embedder: CachedEmbedder, figures: SizeFigures) -> None:
    """Write documents [start, stop) of the sequence through the product's write path, then the
    concept-vector stage and the index maintenance the ingest runs after its writes."""
    config = IngestConfig()
    summary = IngestSummary()
    writer = Writer(
        store, summary, group_size=config.group_size, group_chunks=config.group_chunks, vector_min_chunks=config.concept_vector_min_chunks
    )
    before = table_rows(store)
    batch: list[DocumentWork] = []

    def flush() -> None:
        t = time.perf_counter()
        prepared: list[PreparedDocument] = [prepare(w, gen.metadata.extract_document(w.doc)) for w in batch]
        figures.prepare_s += time.perf_counter() - t
        figures.text_bytes += sum(len(c.content.encode()) for w in batch for c in w.chunks)
        t = time.perf_counter()
        writer.write(prepared, lambda: False)
        figures.write_s += time.perf_counter() - t
        batch.clear()

    for work in gen.works(start, stop):
        batch.append(work)
        if len(batch) >= WRITE_BATCH_DOCS:
            flush()
    if batch:
        flush()
    if summary.failures:
        raise SystemExit(f"{len(summary.failures)} documents failed to write, e.g. {summary.failures[0]}")
    t = time.perf_counter()
    concept_vectors = embed_queued_concepts(store, embedder)
    figures.concept_vectors_s = time.perf_counter() - t
    t = time.perf_counter()
    report = store.after_bulk_write(chunks=summary.chunks, concepts=concept_vectors, settings=config.index)
    figures.index_s = time.perf_counter() - t
    if report.failed:
        print(f"index rebuild after the writes did not finish for {', '.join(report.failed)} (live generations kept)", file=sys.stderr)
    after = table_rows(store)
    figures.written_chunks = summary.chunks
    figures.written_edges = after["MENTIONS_CONCEPT"] - before["MENTIONS_CONCEPT"]
    figures.written_rows = sum(after.values()) - sum(before.values())
    figures.write_chunks_per_s = summary.chunks / figures.write_s if figures.write_s else 0.0
    figures.write_edges_per_s = figures.written_edges / figures.write_s if figures.write_s else 0.0
    figures.write_rows_per_s = figures.written_rows / figures.write_s if figures.write_s else 0.0
    total = figures.prepare_s + figures.write_s + figures.concept_vectors_s + figures.index_s
    figures.load_chunks_per_s = summary.chunks / total if total else 0.0


def wait_until_idle(limit_s: float = 1800.0, window_s: float = 2.0, busy: float = 0.1) -> float:
    """Seconds until this process (the embedded engine's threads) uses under ``busy`` of a core.
    After a rebuild the engine compacts gigabytes in the background for minutes: queries timed
    meanwhile measured that (chunk p50 137 ms at 30k chunks against 15 ms once it was done)."""
    start = time.monotonic()
    while time.monotonic() - start < limit_s:
        cpu = time.process_time()
        time.sleep(window_s)
        if time.process_time() - cpu < busy * window_s:
            break
    return time.monotonic() - start


def measure_queries(
    store: SurrealStore, real: RealCorpus, embedder: CachedEmbedder, modes: Sequence[str], k: int = 5
) -> dict[str, dict[str, float]]:
    """Per mode: wall-clock p50/p95 of ``search()`` with the cached question embedding (embedding
    excluded), and the database part of it (``search_ms``)."""
    out: dict[str, dict[str, float]] = {}
    for mode in modes:
        # One untimed pass first, as a process that has served for a while has read the store's
        # hot blocks: timed cold, the same run's p50s came out 20-30% higher, and varied as much.
        # Then a new retriever, so nothing the first one remembered about a question is reused.
        warm = make_retriever(mode, store, embedder=embedder)
        for question, vector in zip(real.questions, real.question_vectors):
            warm.search(question, k=k, embedding=vector.tolist())
        retriever = make_retriever(mode, store, embedder=embedder)
        wall, db = [], []
        for question, vector in zip(real.questions, real.question_vectors):
            t = time.perf_counter()
            result = retriever.search(question, k=k, embedding=vector.tolist())
            wall.append((time.perf_counter() - t) * 1000)
            db.append(result.search_ms)
        out[mode] = {
            "wall_p50_ms": round(percentile(wall, 50), 2),
            "wall_p95_ms": round(percentile(wall, 95), 2),
            "db_p50_ms": round(percentile(db, 50), 2),
            "db_p95_ms": round(percentile(db, 95), 2),
        }
    return out


def time_in_new_process(store_dir: Path, reader_args: Sequence[str], modes: Sequence[str]) -> dict:
    """``scale_retime.py`` over the closed store in a child process: what a process that serves the
    store, and did not write it, waits."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "reader.json"
        script = Path(__file__).with_name("scale_retime.py")
        command = [sys.executable, str(script), "--store-dir", str(store_dir), *reader_args, "--modes", ",".join(modes), "--json", str(out)]
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        return json.loads(out.read_text())


def percentile(values: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=np.float64), q)) if values else 0.0


@dataclass
class Progress:
    """What a kept store holds: how many documents of the sequence, built from which corpus."""

    key: str
    documents: int = 0
    chunks: int = 0
    text_bytes: int = 0


def store_key(real: RealCorpus, gen: Generator) -> str:
    """What a kept store was built from (``progress.json``): a store is only appended to by the same."""
    return f"{real.embedder_name} {real.chunk_count} {len(real.docs)} {gen.seed} v{CACHE_VERSION} g{GENERATOR_VERSION}"


def run_sizes(
    real: RealCorpus,
    sizes: Sequence[int],
    store_dir: Path,
    *,
    modes: Sequence[str] = MODES,
    optimize: str = "force",
    table_bytes_up_to: int = 0,
    reader_args: Sequence[str] | None = None,
    log: Callable[[str], None] = print,
) -> list[SizeFigures]:
    """Build each size by appending to the store in ``store_dir`` and measure it; with
    ``reader_args`` (how ``scale_retime.py`` loads the same corpus), time it again in a new process."""
    gen = Generator(real)
    embedder = CachedEmbedder(real, gen.noise)
    log(
        f"generator: {len(real.docs):,} real documents, {real.chunk_count:,} real chunks; Pitman-Yor d={gen.d:.3f} "
        f"theta={gen.theta:.1f}; vector noise {gen.noise:.4f} per component"
    )
    path = store_dir / "kg"
    marker = store_dir / "progress.json"
    key = store_key(real, gen)
    progress = Progress(key)
    if marker.is_file():
        progress = Progress(**json.loads(marker.read_text()))
        if progress.key != key:
            raise SystemExit(f"{store_dir} holds a store built from another corpus or generator: remove it or pick another --store-dir")
    elif path.exists():
        raise SystemExit(f"{path} exists without {marker.name}: remove it or pick another --store-dir")
    results = []
    for size in sorted(sizes):
        figures = SizeFigures(size=size)
        target = gen.documents_for(size)
        if target < progress.documents:
            log(f"size {size:,}: the kept store already holds more ({progress.chunks:,} chunks); skipped")
            continue
        with SurrealStore(store_url(path)) as store:
            ensure_schema(store, dimension=real.dimension, embedder=real.embedder_name, settings=IngestConfig().index)
            log(f"size {size:,}: writing documents {progress.documents:,}..{target:,} ...")
            build(store, gen, progress.documents, target, embedder, figures)
        progress.documents = target
        progress.chunks += figures.written_chunks
        progress.text_bytes += figures.text_bytes
        marker.write_text(json.dumps(asdict(progress)))
        figures.documents, figures.chunks = target, progress.chunks
        figures.text_bytes = progress.text_bytes
        figures.disk_bytes = du_bytes(path)
        figures.disk_bytes_per_chunk = figures.disk_bytes / max(1, figures.chunks)
        figures.disk_bytes_per_text_byte = figures.disk_bytes / max(1, figures.text_bytes)
        t = time.perf_counter()
        with SurrealStore(store_url(path)) as store:
            store.query("store_meta")  # the first query: the engine opens the files here
            figures.open_s = time.perf_counter() - t
            if optimize != "none":
                t = time.perf_counter()
                store.optimize(force=optimize == "force")
                figures.optimize_s = time.perf_counter() - t
            figures.settle_s = wait_until_idle()
            log(f"size {size:,}: {figures.chunks:,} chunks written; timing {len(real.questions)} questions per mode ...")
            figures.latency = measure_queries(store, real, embedder, modes)
            figures.rows = table_rows(store)
        figures.rows_per_chunk = {t: round(n / max(1, figures.chunks), 3) for t, n in figures.rows.items()}
        figures.disk_bytes_after_optimize = du_bytes(path)
        figures.peak_rss_mb = round(peak_rss_mb(), 1)  # before the table copies, which hold stores of their own
        if reader_args is not None:
            log(f"size {size:,}: timing the questions again in a new process ...")
            figures.reader = time_in_new_process(store_dir, reader_args, modes)
        if figures.chunks <= table_bytes_up_to:
            log(f"size {size:,}: copying each table alone into an empty store ...")
            measured = table_bytes(path, store_dir / "tables", real.dimension, real.embedder_name, log)
            figures.table_bytes_per_chunk = {t: round(b / max(1, figures.chunks), 1) for t, b in measured.items()}
        results.append(figures)
        log(format_size(figures, real.question_embed_ms))
    return results


def write_report(path: Path, real: RealCorpus, results: list[SizeFigures], shares: dict[str, float]) -> None:
    """Every figure of the run (``--json``), as ``scale_report.py`` reads it."""
    report = {
        "question_embed_ms": real.question_embed_ms,
        "real_chunks": real.chunk_count,
        "real_documents": len(real.docs),
        "real_frequency_shares": shares,
        "sizes": [asdict(r) for r in results],
    }
    path.write_text(json.dumps(report, indent=1))


def corpus_args(args: argparse.Namespace) -> list[str]:
    """The options with which ``scale_retime.py`` loads the corpus this run was given."""
    out = ["--cache", str(args.cache), "--questions", str(args.questions)]
    for corpus in args.corpus or []:
        out += ["--corpus", str(corpus)]
    if args.filings is not None:
        out += ["--filings", str(args.filings)]
    if args.max_docs is not None:
        out += ["--max-docs", str(args.max_docs)]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument(
        "--sizes", default="10000,100000,1000000", help="chunk counts, comma-separated (each snaps down to a document boundary)"
    )
    parser.add_argument(
        "--cache", type=Path, default=ROOT / ".cache" / "scale", help="where the real corpus's vectors and mentions are cached"
    )
    parser.add_argument(
        "--store-dir",
        type=Path,
        default=None,
        help="keep the store here (a later run with larger sizes appends to it); default: a temporary folder, removed",
    )
    parser.add_argument(
        "--corpus",
        type=Path,
        action="append",
        default=None,
        help="a folder with corpus.jsonl (and queries.jsonl); repeatable; default hotpotqa and musique",
    )
    parser.add_argument(
        "--filings",
        type=Path,
        default=None,
        help=(
            "a folder of PDFs to add to the real corpus (e.g. ../shared/bench/sec10q/docs; the queries.jsonl beside it joins "
            "the questions; ~6k chunks, minutes of model work once; symlinks are not followed)"
        ),
    )
    parser.add_argument("--max-docs", type=int, default=None, help="read at most this many records of each corpus (smoke runs)")
    parser.add_argument("--questions", type=int, default=100)
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument(
        "--optimize", choices=("force", "pending", "none"), default="force", help="force: rebuild all three search indexes and time it"
    )
    parser.add_argument(
        "--table-bytes",
        type=int,
        default=0,
        metavar="N",
        help="for sizes of at most N chunks, measure each table's bytes on disk by copying it alone into an empty store (slow)",
    )
    parser.add_argument(
        "--no-reader", action="store_true", help="do not time each size again in a new process (scale_retime.py)"
    )
    parser.add_argument("--threads", type=int, default=1, help="torch threads while the cache is built (the machine is shared)")
    parser.add_argument("--chart", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    corpora = args.corpus or DEFAULT_CORPORA
    modes = [m for m in args.modes.split(",") if m]
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    try:
        import torch

        torch.set_num_threads(args.threads)
    except ImportError:
        pass

    def log(message: str) -> None:
        print(message, flush=True)

    started = time.perf_counter()
    real = load_real(corpora, args.cache, filings=args.filings, max_docs=args.max_docs, questions=args.questions, log=log)
    shares_real = frequency_shares(list(Counter(m.name for c in real.mentions for m in c).values()))
    log("real concept chunk-frequency shares: " + ", ".join(f"{k} {v:.3f}" for k, v in shares_real.items()))
    temporary = args.store_dir is None
    store_dir = args.store_dir or Path(os.environ.get("TMPDIR", "/tmp")) / f"kg-scale-{os.getpid()}"
    store_dir.mkdir(parents=True, exist_ok=True)
    try:
        results = run_sizes(
            real,
            sizes,
            store_dir,
            modes=modes,
            optimize=args.optimize,
            table_bytes_up_to=args.table_bytes,
            reader_args=None if args.no_reader else corpus_args(args),
            log=log,
        )
    finally:
        if temporary:
            shutil.rmtree(store_dir, ignore_errors=True)
    log(f"total {time.perf_counter() - started:.0f} s")
    if args.chart and results:
        log(f"chart: {chart(results, args.chart, log)}")
    if args.json:
        write_report(args.json, real, results, shares_real)
        if len(results) < len(sizes):
            log(f"sizes the kept store held already are in the --json of the run that built them: scale_report.py prints both {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
