"""Memory on a very large text file: the ingest streams it (parts, batches, bounded queues).

    .venv/bin/python benchmarks/large_file_benchmark.py [--megabytes 200] [--seconds 180]

Writes a text file of --megabytes of English prose, ingests it with the default pipeline into an
embedded store, and prints the process's resident memory every few seconds. Ingesting 200 MB takes
hours on two cores, so the run is interrupted after --seconds the way Ctrl-C does it (the
transaction in progress finishes); what it shows is whether memory stays flat while the loader, the
models and the database work through the file.
"""

from __future__ import annotations

import _thread
import argparse
import resource
import tempfile
import threading
import time
from pathlib import Path

from surreal_kgrag.ingest import IngestConfig, IngestInterrupted, Ingestor
from surreal_kgrag.store import SurrealStore

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


def rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096 / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=180, help="interrupt the ingest after this long")
    parser.add_argument(
        "--part-chars", type=int, default=IngestConfig().max_document_chars, help="IngestConfig.max_document_chars: the size of a part"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "large.txt"
        write_prose(path, args.megabytes)
        print(f"{path.stat().st_size / 1e6:.0f} MB text file written; RSS {rss_mb():.0f} MB", flush=True)
        samples: list[tuple[float, float]] = []
        done = threading.Event()
        started = time.perf_counter()

        def sample() -> None:
            while not done.wait(5):
                samples.append((time.perf_counter() - started, rss_mb()))
                print(f"  {samples[-1][0]:6.0f} s  RSS {samples[-1][1]:7.0f} MB", flush=True)

        threading.Thread(target=sample, daemon=True).start()
        threading.Timer(args.seconds, _thread.interrupt_main).start()
        with SurrealStore(f"surrealkv://{folder}/kg") as store:
            try:
                summary = Ingestor(store, config=IngestConfig(max_document_chars=args.part_chars)).ingest([path])
            except IngestInterrupted as interrupted:
                summary = interrupted.summary
        done.set()
        late = [rss for t, rss in samples if t > args.seconds / 3] or [rss for _, rss in samples]
        with SurrealStore(f"surrealkv://{folder}/kg") as store:
            stored = sum(row["reach"] for row in store.query("chunk_extents")[-1])
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        per_mb = summary.seconds / max(stored / 1e6, 1e-9)
        print(f"{stored / 1e6:.1f} MB of text stored (chunks reach) in {summary.seconds:.0f} s: {per_mb:.0f} s/MB; peak RSS {peak:.0f} MB")
        print(
            f"{summary.added} parts of {args.megabytes} MB written ({summary.chunks} chunks) in {summary.seconds:.0f} s; "
            f"peak RSS {max(rss for _, rss in samples):.0f} MB; RSS over the last two thirds "
            f"{min(late):.0f}-{max(late):.0f} MB"
        )


if __name__ == "__main__":
    main()
