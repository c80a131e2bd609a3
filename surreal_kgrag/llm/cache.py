"""A persistent cache of extraction replies, so ingesting a text again costs no tokens.

It is a SQLite file, not a table in the store: it outlives a store that is deleted and built again
(the case that costs tokens), serves every store and process on the machine (SQLite locks the file
for concurrent writers), and a lookup needs no database round-trip. A key is the SHA-256 of the
extractor settings that shape the reply (model, temperature, prompt with its ontology) and the
chunk text; the value is the model's validated reply, so changing what is done with a reply (such
as ``on_violation``) reuses it. Delete the file to empty the cache.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from ..errors import ConfigurationError

DEFAULT_FILE = "llm-extractions.sqlite3"


def default_cache_path() -> Path:
    """``$XDG_CACHE_HOME/surreal-kgrag/llm-extractions.sqlite3`` (``~/.cache`` when unset)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "surreal-kgrag" / DEFAULT_FILE


class ExtractionCache:
    """Replies by key in a SQLite file (``":memory:"`` for a cache that lives as long as the object)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            try:
                Path(self.path).expanduser().parent.mkdir(parents=True, exist_ok=True)
            except OSError as error:
                raise ConfigurationError(f"cannot create the folder of the extraction cache {self.path}: {error}") from error
            self.path = str(Path(self.path).expanduser())
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None

    def __repr__(self) -> str:
        return f"ExtractionCache({self.path!r})"

    def _connection(self) -> sqlite3.Connection:
        if self._db is None:
            try:
                db = sqlite3.connect(self.path, timeout=30, check_same_thread=False)
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("CREATE TABLE IF NOT EXISTS reply (key TEXT PRIMARY KEY, value TEXT NOT NULL, created REAL NOT NULL)")
            except sqlite3.Error as error:
                raise ConfigurationError(f"cannot open the extraction cache {self.path}: {error}") from error
            self._db = db
        return self._db

    def get_many(self, keys: Sequence[str]) -> dict[str, str]:
        """The cached replies among ``keys``."""
        found: dict[str, str] = {}
        with self._lock:
            db = self._connection()
            for start in range(0, len(keys), 500):  # SQLite limits the number of bound values
                part = list(keys[start : start + 500])
                marks = ",".join("?" * len(part))
                found.update(db.execute(f"SELECT key, value FROM reply WHERE key IN ({marks})", part).fetchall())
        return found

    def put_many(self, items: Mapping[str, str] | Iterable[tuple[str, str]]) -> None:
        rows = [(key, value, time.time()) for key, value in (items.items() if isinstance(items, Mapping) else items)]
        if not rows:
            return
        with self._lock:
            db = self._connection()
            with db:
                db.executemany("INSERT OR REPLACE INTO reply (key, value, created) VALUES (?, ?, ?)", rows)

    def __len__(self) -> int:
        with self._lock:
            return int(self._connection().execute("SELECT count(*) FROM reply").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None


def resolve_cache(spec: ExtractionCache | str | os.PathLike[str] | None) -> ExtractionCache | None:
    """``"auto"``: the default file (:func:`default_cache_path`); a path: that file; None: no cache."""
    if spec is None or isinstance(spec, ExtractionCache):
        return spec
    if spec == "auto":
        return ExtractionCache(default_cache_path())
    if isinstance(spec, (str, os.PathLike)):
        return ExtractionCache(spec)
    raise ConfigurationError(f"cache must be 'auto', a file path, an ExtractionCache or None, not {type(spec).__name__}")
