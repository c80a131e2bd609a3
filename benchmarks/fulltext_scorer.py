"""What a BM25 search costs on the embedded engine as its full-text index takes writes.

    .venv/bin/python benchmarks/fulltext_scorer.py [--docs 2000,5000,10000,20000,40000] [--replace 5000]
        [--store surrealkv:///var/tmp/kg-scale16/kg]

1. A fresh ``surrealkv://`` store with the library's schema (``chunk_text`` and its BM25 index,
   analyzer ``kg_english``), filled with full-text rows of 30 random words in batches of 500. At
   each size: the p50 of a search that matches one row, with BM25 scores (``search::score``, as
   ``search_fulltext.surql`` asks) and without, 40 samples each. Then ``--replace`` rows deleted
   and written again (what re-ingesting changed documents does), and last the same rows under a new
   index defined over them (what ``optimize`` does: a new generation, the old one removed).
2. With ``--store`` (a store the library wrote): the same two searches on its live ``chunk_text``
   index, for its rarest stored terms (the ``term`` table).

Why: SurrealDB 3.x keeps a full-text index's document count and total length as one delta key per
row indexed or removed, which a background task of the server folds into one root key
(``index_compaction_interval``); the embedded engine behind the Python SDK runs no such task, and
the scorer every scored search builds reads every delta (``FullTextIndex::new_scorer``). So a
scored search costs a fixed time that grows with every write the index ever took, whatever it
matches; an unscored match does not.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from surreal_kgrag import SurrealStore
from surreal_kgrag.db.sdk import RecordID
from surreal_kgrag.schema import ensure_schema
from surreal_kgrag.surql import Identifier

_LETTERS = random.Random(7)
WORDS = ["".join(_LETTERS.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(7)) for _ in range(5000)]  # one token each
BATCH = 500


def _p50(conn: Any, text: str, params: dict[str, Any], samples: int = 40) -> float:
    times = []
    for _ in range(samples):
        start = time.perf_counter()
        conn.run(("probe", text, params))
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def _searches(conn: Any, index: str, word: str) -> tuple[float, float]:
    """(scored p50 ms, unscored p50 ms) of a search for ``word`` on ``index``, which must match one row
    (that check is also each query's untimed first run)."""
    scored = f"SELECT id, search::score(1) AS score FROM chunk_text WITH INDEX {index} WHERE text @1,OR@ $w"
    unscored = f"SELECT id FROM chunk_text WITH INDEX {index} WHERE text @1,OR@ $w"
    for text in (scored, unscored):
        found = conn.run(("probe", text, {"w": word}))[-1]
        if len(found) != 1:
            raise SystemExit(f"{word!r} matched {len(found)} rows of {index}, not 1: the timings would not be of a one-row search")
    return _p50(conn, scored, {"w": word}), _p50(conn, unscored, {"w": word})


def _rows(start: int, end: int, rng: random.Random) -> list[dict[str, Any]]:
    return [
        {
            "id": RecordID("chunk_text", f"d{i}"),
            "chunk": RecordID("chunk", f"d{i}"),
            "doc": RecordID("document", f"d{i}"),
            "access": [],
            "text": ("needle " if i == 0 else "") + " ".join(rng.choice(WORDS) for _ in range(30)),
        }
        for i in range(start, end)
    ]


def _line(label: str, scored: float, unscored: float) -> None:
    print(f"{label:44s} scored {scored:7.2f} ms   unscored {unscored:6.2f} ms   scorer {scored - unscored:7.2f} ms")


def growing_index(sizes: list[int], replace: int) -> None:
    rng = random.Random(1)
    with tempfile.TemporaryDirectory(prefix="kg-fulltext-") as tmp, SurrealStore(f"surrealkv://{Path(tmp) / 'store'}") as store:
        ensure_schema(store, dimension=8, embedder="none")
        conn = store._conn()
        index = store.index_states()["text"].name
        print(f"one search matching 1 row, {index}:")
        written = 0
        for size in sizes:
            for start in range(written, size, BATCH):
                conn.run(("write", "INSERT INTO chunk_text $rows RETURN NONE", {"rows": _rows(start, min(size, start + BATCH), rng)}))
            written = size
            _line(f"  {size:,} rows indexed", *_searches(conn, index, "needle"))
        if replace:
            for start in range(1, replace + 1, BATCH):
                ids = [RecordID("chunk_text", f"d{i}") for i in range(start, min(replace + 1, start + BATCH))]
                conn.run(("delete", "DELETE $ids RETURN NONE", {"ids": ids}))
                conn.run(("write", "INSERT INTO chunk_text $rows RETURN NONE", {"rows": _rows(start, start + len(ids), rng)}))
            _line(f"  then {replace:,} of them deleted and written again", *_searches(conn, index, "needle"))
        started = time.perf_counter()
        conn.run(("define", store.text("index_fulltext", index=Identifier("fresh")), {}))  # the library's definition, another name
        conn.run(("remove", f"REMOVE INDEX {index} ON chunk_text", {}))
        print(f"  a new index over the {written:,} rows (defined in {time.perf_counter() - started:.1f} s):")
        _line("    the new index", *_searches(conn, "fresh", "needle"))


def stored_index(url: str) -> None:
    with SurrealStore(url) as store:
        conn = store._conn()
        index = store.index_states()["text"].name
        rows = conn.run(("count", "RETURN count(SELECT id FROM chunk_text)", {}))[-1]
        terms = conn.run(("terms", "SELECT VALUE record::id(id) FROM term WHERE df = 1 LIMIT 3", {}))[-1]
        print(f"\n{url}: {rows:,} full-text rows, {index}; searches for terms found in one chunk:")
        for term in terms:
            _line(f"  {term!r}", *_searches(conn, index, term))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", default="2000,5000,10000,20000,40000", help="sizes at which to time the searches")
    parser.add_argument("--replace", type=int, default=5000, help="rows deleted and written again after the last size")
    parser.add_argument("--store", help="a store URL the library wrote, for part 2")
    args = parser.parse_args()
    sizes = sorted(int(size) for size in args.docs.split(","))
    growing_index(sizes, min(args.replace, sizes[-1] - 1))
    if args.store:
        stored_index(args.store)


if __name__ == "__main__":
    main()
