"""Time the queries of a store ``scale_benchmark.py`` kept again, in a new process that wrote nothing.

    .venv/bin/python benchmarks/scale_retime.py --store-dir /var/tmp/kg-scale [--corpus ... --filings ...] \\
        [--modes chunk,concept,hybrid,graph] [--json figures.json]

The same questions, cached vectors and timing (``measure_queries``) as the benchmark's figures in the
process that wrote the store. ``scale_benchmark.py`` runs this after each size: the process that wrote
a large store answers slower than one that only reads it (1.1-1.6x at 10k chunks and 1.2-4x at 30k, in two runs), and a
process serving queries is usually not the one that bulk-loaded the store. ``--corpus``, ``--filings``,
``--max-docs`` and ``--questions`` must be those the store was built with: a store built from another
corpus is refused.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from pathlib import Path

from scale_benchmark import Progress, measure_queries, peak_rss_mb, store_key, wait_until_idle
from scale_corpus import DEFAULT_CORPORA, ROOT, CachedEmbedder, RealCorpus, load_real
from scale_disk import store_url
from scale_generator import Generator
from scale_report import MODES, latency_lines

from surreal_kgrag.db import SurrealStore


def retime(store_dir: Path, real: RealCorpus, modes: Sequence[str]) -> dict:
    """Open the kept store, wait until the engine is idle, time every mode: the reader's figures."""
    gen = Generator(real)
    marker = store_dir / "progress.json"
    if not marker.is_file() or Progress(**json.loads(marker.read_text())).key != store_key(real, gen):
        raise SystemExit(f"{store_dir} holds no store scale_benchmark.py built from this corpus (see its progress.json)")
    embedder = CachedEmbedder(real, gen.noise)
    started = time.perf_counter()
    with SurrealStore(store_url(store_dir / "kg")) as store:
        store.query("store_meta")
        open_s = time.perf_counter() - started
        settle_s = wait_until_idle()
        latency = measure_queries(store, real, embedder, modes)
    return {"open_s": round(open_s, 3), "settle_s": round(settle_s, 1), "latency": latency, "peak_rss_mb": round(peak_rss_mb(), 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--store-dir", type=Path, required=True)
    parser.add_argument("--cache", type=Path, default=ROOT / ".cache" / "scale")
    parser.add_argument("--corpus", type=Path, action="append", default=None, help="as the store was built with")
    parser.add_argument("--filings", type=Path, default=None, help="as the store was built with")
    parser.add_argument("--max-docs", type=int, default=None, help="as the store was built with")
    parser.add_argument("--questions", type=int, default=100)
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--json", type=Path, default=None, help="write the figures here too")
    args = parser.parse_args()
    real = load_real(
        args.corpus or DEFAULT_CORPORA, args.cache, filings=args.filings, max_docs=args.max_docs, questions=args.questions, log=print
    )
    figures = retime(args.store_dir, real, [m for m in args.modes.split(",") if m])
    where = f"open {figures['open_s']:.2f} s; the engine idle after {figures['settle_s']:.0f} s"
    print("\n".join(latency_lines(figures["latency"], where)))
    print(f"peak RSS {figures['peak_rss_mb']:,.0f} MB")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
