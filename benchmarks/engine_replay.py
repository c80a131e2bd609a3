"""The write floor on the storage engines a SurrealDB server offers: would RocksDB change it?

    .venv/bin/python benchmarks/engine_replay.py [--size 10000] [--work-dir /var/tmp/kg-replay] \\
        [--engines surrealkv,rocksdb] [--json out.json]

No SurrealDB server runs on this machine, and the Python package embeds SurrealKV only. SurrealDB's
embedded engine for JavaScript (``@surrealdb/node``, from npm) includes RocksDB, the storage of a
server started with ``surreal start rocksdb://...``. So:

1. **Record** (this process, on ``surrealkv://``): the store's schema, then the design's rows for
   ``--size`` chunks of ``scale_benchmark.py``'s sequence (the same corpus and cache, no model run) as
   ``write_profile.py --floor`` writes them (``write_floor.surql``, one transaction a write group:
   documents, chunks with their HNSW index, full-text rows with their BM25 index, concepts and
   ``MENTIONS_CONCEPT`` edges; nothing the library derives from them). Every request (its SurrealQL
   and bound parameters) is recorded with its time.
2. **Replay** (``engine_replay/replay.mjs`` under Node; ``npm ci`` installs its two packages once):
   the recording, request by request and in order, on a fresh store on each of ``--engines``.

Printed per engine: the rows' write rate (chunks/s: the write requests' time, as
``scale_benchmark.py`` times the ``Writer``) and bytes on disk per chunk once the store is closed.
Only the floor is replayed, not the library's whole write path: ``@surrealdb/node`` 3.0.3 embeds
SurrealDB 3.0.2, whose array and aggregate functions differ from the 3.2 release the library is
written for (a replayed write's adjacency lists came out wrong), while these rows and indexes mean
the same on both. Nor are searches: on 3.0.2 an HNSW rebuild returned at once and KNN times did not
settle. The ``surrealkv`` replay is the control: its figures against the Python run's say how much of
a difference is the release and the client, not the storage.
"""

from __future__ import annotations

import argparse
import json
import shutil
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

from query_profile import Recorder
from scale_benchmark import WRITE_BATCH_DOCS, wait_until_idle
from scale_corpus import DEFAULT_CORPORA, ROOT, load_real
from scale_disk import du_bytes
from scale_generator import Generator
from surrealdb.data import cbor as sdk_cbor
from write_profile import write_floor

from surreal_kgrag.db import SurrealStore, sdk
from surreal_kgrag.ingest.config import IngestConfig
from surreal_kgrag.ingest.records import prepare
from surreal_kgrag.schema import ensure_schema

REPLAY = Path(__file__).with_name("engine_replay")


class Recording(Recorder):
    """Every request sent through ``sdk.query`` while installed, written to ``path`` as length-prefixed
    CBOR items ``[phase, query file, text, params]`` as they come, and timed: (phase, file, ms)."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.file = path.open("wb")
        self.phase = "schema"
        self.jobs: list[tuple[str, str, float]] = []

    def record(self, name: str, text: str, params: Any, response: dict[str, Any], wall_ms: float) -> None:
        self.jobs.append((self.phase, name, wall_ms))
        item = sdk_cbor.encode([self.phase, name, text, sdk.plain(dict(params))])
        self.file.write(struct.pack(">I", len(item)) + item)

    def __exit__(self, *exc: object) -> None:
        super().__exit__(*exc)
        self.file.close()


def record(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """Write the rows on surrealkv:// in this process, recording every request."""
    real = load_real(DEFAULT_CORPORA, args.cache, questions=100, log=print)
    gen = Generator(real)
    path = work / "python-surrealkv"
    shutil.rmtree(path, ignore_errors=True)
    config = IngestConfig()
    chunks = done = 0
    with Recording(work / "requests.cbor") as rec, SurrealStore(f"surrealkv://{path}") as store:
        ensure_schema(store, dimension=real.dimension, embedder=real.embedder_name, settings=config.index)
        print(f"writing {args.size:,} chunks' rows on surrealkv:// in this process, recording the requests ...", flush=True)
        rec.phase = "write"
        target = gen.documents_for(args.size)
        while done < target:
            stop = min(target, done + WRITE_BATCH_DOCS)
            prepared = [prepare(w, gen.metadata.extract_document(w.doc)) for w in gen.works(done, stop)]
            chunks += write_floor(store, prepared, config)[0]
            done = stop
        rec.phase = "settle"
        wait_until_idle()  # the HNSW index takes its last vectors in the background (surrealdb#6878)
    return {"chunks": chunks, "disk_bytes": du_bytes(path), "figures": summarize(rec.jobs)}


def summarize(jobs: list[tuple[str, str, float]]) -> dict[str, Any]:
    """The writes' total seconds, from (phase, file, ms) rows."""
    return {"write_s": sum(ms for phase, _, ms in jobs if phase == "write") / 1000}


def replay(work: Path, engine: str) -> dict[str, Any]:
    """Replay the recording on a fresh ``engine`` store under Node; its figures and failed requests."""
    if not (REPLAY / "node_modules").is_dir():
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=REPLAY, check=True)
    path = work / f"node-{engine}"
    shutil.rmtree(path, ignore_errors=True)
    out = work / f"node-{engine}.json"
    subprocess.run(["node", str(REPLAY / "replay.mjs"), str(work / "requests.cbor"), f"{engine}://{path}", str(out)], check=True)
    result = json.loads(out.read_text())
    return {"disk_bytes": du_bytes(path), "errors": result["first_error"], "figures": summarize([tuple(j) for j in result["jobs"]])}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--size", type=int, default=10_000, help="chunks (snapped down to a document boundary)")
    parser.add_argument("--work-dir", type=Path, default=Path("/var/tmp/kg-replay"))
    parser.add_argument("--cache", type=Path, default=ROOT / ".cache" / "scale")
    parser.add_argument("--engines", default="surrealkv,rocksdb")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    args.work_dir.mkdir(parents=True, exist_ok=True)
    runs = {"python surrealkv": record(args, args.work_dir)}
    chunks = runs["python surrealkv"]["chunks"]
    for engine in [e for e in args.engines.split(",") if e]:
        print(f"replaying on {engine}:// under Node ...", flush=True)
        runs[f"node {engine}"] = replay(args.work_dir, engine)
    print(f"\n{chunks:,} chunks: the design's rows (write_floor.surql) on each engine")
    print(f"{'engine':18s} {'write s':>8s} {'chunks/s':>9s} {'KB/chunk':>9s}")
    for label, run in runs.items():
        write_s = run["figures"]["write_s"]
        print(f"{label:18s} {write_s:>8.1f} {chunks / write_s:>9.1f} {run['disk_bytes'] / chunks / 1024:>9.1f}")
        if run.get("errors"):
            print(f"  requests failed on it: {run['errors']}")
    if args.json:
        args.json.write_text(json.dumps({"chunks": chunks, "runs": runs}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
