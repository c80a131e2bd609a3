"""Time the queries of a store ``scale_benchmark.py`` kept again, in a new process that wrote nothing.

    .venv/bin/python benchmarks/scale_retime.py --store-dir /var/tmp/kg-scale [--corpus ... --filings ...] \\
        [--modes chunk,concept,hybrid,graph]

The same questions, cached vectors and timing (``measure_queries``) as the benchmark's own, whose
figures are taken in the process that wrote and rebuilt the store. ``--corpus``, ``--filings`` and
``--questions`` must be those the store was built with: a store built from another corpus is refused.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from scale_benchmark import Progress, measure_queries, peak_rss_mb, store_key, wait_until_idle
from scale_corpus import DEFAULT_CORPORA, ROOT, CachedEmbedder, load_real
from scale_disk import store_url
from scale_generator import Generator
from scale_report import MODES

from surreal_kgrag.db import SurrealStore


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--store-dir", type=Path, required=True)
    parser.add_argument("--cache", type=Path, default=ROOT / ".cache" / "scale")
    parser.add_argument("--corpus", type=Path, action="append", default=None, help="as the store was built with")
    parser.add_argument("--filings", type=Path, default=None, help="as the store was built with")
    parser.add_argument("--questions", type=int, default=100)
    parser.add_argument("--modes", default=",".join(MODES))
    args = parser.parse_args()
    real = load_real(args.corpus or DEFAULT_CORPORA, args.cache, filings=args.filings, max_docs=None, questions=args.questions, log=print)
    gen = Generator(real)
    marker = args.store_dir / "progress.json"
    if not marker.is_file() or Progress(**json.loads(marker.read_text())).key != store_key(real, gen):
        raise SystemExit(f"{args.store_dir} holds no store scale_benchmark.py built from this corpus (see its progress.json)")
    embedder = CachedEmbedder(real, gen.noise)
    started = time.perf_counter()
    with SurrealStore(store_url(args.store_dir / "kg")) as store:
        store.query("store_meta")
        print(f"open {time.perf_counter() - started:.2f} s; the engine idle after {wait_until_idle():.0f} s")
        for mode, figures in measure_queries(store, real, embedder, [m for m in args.modes.split(",") if m]).items():
            print(
                f"  {mode:8s} wall p50 {figures['wall_p50_ms']:7.1f}  p95 {figures['wall_p95_ms']:7.1f}"
                f"   database p50 {figures['db_p50_ms']:7.1f}  p95 {figures['db_p95_ms']:7.1f}"
            )
    print(f"peak RSS {peak_rss_mb():,.0f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
