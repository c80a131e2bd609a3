"""Any size: a very large text file, or a PDF of hundreds of pages, ingested whole with flat memory.

    .venv/bin/python benchmarks/large_file_benchmark.py --megabytes 20 [--seconds 7200]
    .venv/bin/python benchmarks/large_file_benchmark.py --pdf-from ../shared/bench/sec10q/docs --pages 500

The first writes a text file of --megabytes of English prose; the second builds one PDF of --pages
pages out of the PDFs in a folder (their pages in order, the folder read again from the start when
it has fewer). Either is ingested with the default pipeline into an embedded surrealkv:// store,
and the run prints the process's resident memory and the chunks written every 5 s; then the
characters of the file's text stored (how far the stored chunks reach, against the text the loader
read), seconds per MB (or per page), the write rate over the first and the last third of the run
(time linear in size: the two agree) and the peak RSS. A run still going after --seconds is
interrupted the way Ctrl-C does it (the transaction in progress finishes).

The embedded engine sizes its write buffer and block cache from the memory it sees (printed at the
start): run it under ``benchmarks/memory_limit.py 2000000000 -- ...`` to measure it as in a 2 GB
container.
"""

from __future__ import annotations

import _thread
import argparse
import resource
import tempfile
import threading
import time
from pathlib import Path

from surreal_kgrag.errors import QueryExecutionError
from surreal_kgrag.ingest import IngestConfig, IngestInterrupted, Ingestor
from surreal_kgrag.loaders import iter_sources
from surreal_kgrag.models import SourceDocument
from surreal_kgrag.store import SurrealStore
from surreal_kgrag.surql import NO_FILTER

PEOPLE = ["Ada Lovelace", "Alan Turing", "Grace Hopper", "Marie Curie", "Niels Bohr", "Lise Meitner"]
PLACES = ["Lisbon", "Warsaw", "Nairobi", "Quito", "Hanoi", "Oslo", "Perth", "Tunis", "Lima", "Riga"]


def write_prose(path: Path, megabytes: int) -> None:
    target = megabytes * 1_000_000
    with path.open("w", encoding="utf-8") as out:
        written, i = 0, 0
        while written < target:
            paragraph = " ".join(
                f"In {1800 + (i + j) % 200}, {PEOPLE[(i + j) % 6]} wrote from {PLACES[(i * 3 + j) % 10]} about "
                f"workshop {(i * 31 + j) % 9973} and the letters of district {i + j}."
                for j in range(6)
            )
            written += out.write(paragraph + "\n\n")
            i += 6


def write_pdf(path: Path, folder: Path, pages: int) -> None:
    """One PDF of ``pages`` pages: the pages of the PDFs in ``folder``, in order, again from the start if needed."""
    import pypdfium2 as pdfium

    sources = sorted(folder.glob("*.pdf"))
    if not sources:
        raise SystemExit(f"no PDF files in {folder}")
    out = pdfium.PdfDocument.new()
    while len(out) < pages:
        for source in sources:
            pdf = pdfium.PdfDocument(source)
            take = min(len(pdf), pages - len(out))
            out.import_pages(pdf, list(range(take)))
            pdf.close()
            if len(out) >= pages:
                break
    out.save(path)
    out.close()


def engine_memory() -> str:
    """The memory the embedded engine sizes its memtable and block cache from: the limit of the
    cgroup mounted at /sys/fs/cgroup (a container's), else the machine's RAM (docs/servers.md)."""
    for limit_file in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            value = Path(limit_file).read_text().strip()
        except OSError:
            continue
        if value.isdigit() and int(value) < 2**60:
            return f"a memory limit of {int(value) / 1e6:,.0f} MB ({limit_file})"
    total_kb = next(int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemTotal:"))
    return f"the machine's {total_kb * 1024 / 2**30:.0f} GiB of RAM (no container limit)"


def rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096 / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=int, default=20, help="size of the generated text file")
    parser.add_argument("--pdf-from", type=Path, help="build a PDF from the PDFs in this folder instead of a text file")
    parser.add_argument("--pages", type=int, default=500, help="pages of the PDF built with --pdf-from")
    parser.add_argument("--seconds", type=float, default=7200, help="interrupt the ingest after this long")
    parser.add_argument(
        "--part-chars", type=int, default=IngestConfig().part_chars, help="IngestConfig.part_chars: the size of a text file's part"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        if args.pdf_from:
            path = Path(folder) / "long.pdf"
            write_pdf(path, args.pdf_from, args.pages)
            unit, size = "page", float(args.pages)
        else:
            path = Path(folder) / "large.txt"
            write_prose(path, args.megabytes)
            unit, size = "MB", path.stat().st_size / 1e6
        text_chars = sum(len(doc.text) for doc in iter_sources([path], part_chars=args.part_chars) if isinstance(doc, SourceDocument))
        print(f"{path.name}: {path.stat().st_size / 1e6:.1f} MB, {text_chars:,} characters of text; RSS {rss_mb():.0f} MB", flush=True)
        print(f"the embedded engine sizes its buffers from {engine_memory()}", flush=True)
        samples: list[tuple[float, float, int]] = []  # seconds, RSS MB, chunks stored
        done = threading.Event()
        started = time.perf_counter()
        with SurrealStore(f"surrealkv://{folder}/kg") as store:

            def sample() -> None:
                while not done.wait(5):
                    try:
                        chunks = int(store.query("count_chunks", {"filtered": False}, filter=NO_FILTER)[-1]["store"] or 0)
                    except QueryExecutionError:  # no schema yet: the ingest creates it
                        chunks = 0
                    samples.append((time.perf_counter() - started, rss_mb(), chunks))
                    print(f"  {samples[-1][0]:6.0f} s  RSS {samples[-1][1]:7.0f} MB  {chunks:7,} chunks", flush=True)

            threading.Thread(target=sample, daemon=True).start()
            timer = threading.Timer(args.seconds, _thread.interrupt_main)
            timer.start()
            try:
                summary = Ingestor(store, config=IngestConfig(part_chars=args.part_chars)).ingest([path])
            except IngestInterrupted as interrupted:
                summary = interrupted.summary
            timer.cancel()
            done.set()
            extents = store.query("chunk_extents")[-1]
            stored = sum(row["reach"] for row in extents)
            pages = max((row["last_page"] for row in extents), default=0)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(
            f"{summary.added} documents, {summary.chunks:,} chunks, {summary.failed} failed, in {summary.seconds:.0f} s: "
            f"{summary.seconds / size:.1f} s/{unit}"
        )
        last_page = f"; last page stored: {pages} of {args.pages}" if args.pdf_from else ""
        print(f"characters stored (chunks reach): {stored:,} of {text_chars:,}{last_page}")
        third = [s for s in samples if s[2]]
        if len(third) >= 6:
            k = len(third) // 3
            rate = lambda a, b: (b[2] - a[2]) / max(b[0] - a[0], 1e-9)  # noqa: E731
            print(f"chunks written per second: first third {rate(third[0], third[k]):.1f}, last third {rate(third[-k - 1], third[-1]):.1f}")
        print(f"peak RSS {peak:.0f} MB (sampled max {max((r for _, r, _ in samples), default=0):.0f} MB)")
        child = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        if child:  # IngestConfig.embedding_process: under 4 GB of memory the run starts none
            print(f"peak RSS of the embedding child process {child:.0f} MB (it counts against a memory limit too)")


if __name__ == "__main__":
    main()
