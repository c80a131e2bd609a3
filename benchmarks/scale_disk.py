"""Where ``scale_benchmark.py`` keeps a store, and the bytes it takes on disk: the whole directory
(``du``), and with ``--table-bytes`` each table copied alone into an empty store."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from surreal_kgrag.db import SurrealStore
from surreal_kgrag.db.catalog import SEARCH_INDEXES
from surreal_kgrag.ingest.config import IngestConfig
from surreal_kgrag.schema import ensure_schema
from surreal_kgrag.surql import Identifier


def store_url(path: Path) -> str:
    return f"surrealkv://{path}"


def du_bytes(path: Path) -> int:
    """Bytes the directory takes on disk (``du -sk``: allocated blocks), or the sum of file sizes."""
    try:
        out = subprocess.run(["du", "-sk", str(path)], capture_output=True, text=True, check=True).stdout
        return int(out.split()[0]) * 1024
    except (OSError, subprocess.CalledProcessError, ValueError):
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


#: What ``table_bytes`` copies: (label, table, is a relation, search index left out). The variants
#: without their search index say what the index itself takes (the difference).
COPIED_TABLES = (
    ("document", "document", False, None),
    ("document_name", "document_name", False, None),
    ("chunk", "chunk", False, None),
    ("chunk without HNSW", "chunk", False, "chunk"),
    ("chunk_text", "chunk_text", False, None),
    ("chunk_text without BM25", "chunk_text", False, "text"),
    ("term", "term", False, None),
    ("concept", "concept", False, None),
    ("concept_vector", "concept_vector", False, None),
    ("concept_vector without HNSW", "concept_vector", False, "concept"),
    ("concept_chunks", "concept_chunks", False, None),
    ("chunk_concepts", "chunk_concepts", False, None),
    ("MENTIONS_CONCEPT", "MENTIONS_CONCEPT", True, None),
)
COPY_PAGE = 2000


def remove_search_index(store: SurrealStore, key: str) -> None:
    """Every generation of the search index ``key`` (``SEARCH_INDEXES``: chunk, concept, text) on its table."""
    index = SEARCH_INDEXES[key]
    tables = dict(zip((i.table for i in SEARCH_INDEXES.values()), store.query("index_list")))
    for name in tables[index.table]["indexes"]:
        if index.generation_of(name) is not None:
            store.query("index_remove", index=Identifier(name), table=Identifier(index.table))


def table_bytes(path: Path, work_dir: Path, dimension: int, embedder: str, log: Callable[[str], None] = print) -> dict[str, int]:
    """Bytes on disk each table takes with its indexes: its rows copied alone into an empty store (the
    product's schema, the search indexes rebuilt), ``du`` of that store minus ``du`` of an empty one;
    for chunk, chunk_text and concept also without their search index. The sum need not equal the
    whole store's size (compaction differs), but the shares say where the bytes go. Minutes at 10k
    chunks: meant for the smaller sizes."""

    def fresh(name: str) -> SurrealStore:
        target = SurrealStore(store_url(work_dir / name))
        ensure_schema(target, dimension=dimension, embedder=embedder, settings=IngestConfig().index)
        return target

    shutil.rmtree(work_dir, ignore_errors=True)
    with fresh("empty"):
        pass
    empty = du_bytes(work_dir / "empty")
    out: dict[str, int] = {}
    with SurrealStore(store_url(path)) as source:
        for label, table, relation, left_out in COPIED_TABLES:
            t = time.perf_counter()
            folder = label.replace(" ", "_")
            with fresh(folder) as target:
                if left_out is not None:
                    remove_search_index(target, left_out)
                start = 0
                while True:
                    rows = source.query("scale_copy_rows", table=Identifier(table), start=start, limit=COPY_PAGE)[-1]
                    if not rows:
                        break
                    insert = "scale_copy_insert_relation" if relation else "scale_copy_insert"
                    target.query(insert, {"rows": rows}, table=Identifier(table))
                    start += len(rows)
                if left_out is None:
                    target.optimize(force=True)
            out[label] = du_bytes(work_dir / folder) - empty
            log(f"  table bytes: {label} {start:,} rows, {out[label] / 1e6:,.1f} MB ({time.perf_counter() - t:.0f} s)")
            shutil.rmtree(work_dir / folder, ignore_errors=True)
    shutil.rmtree(work_dir, ignore_errors=True)
    return out
