"""The search indexes a store keeps fast, as plain state: their settings, their live names and
generations, and the bookkeeping (``IndexCatalog``) that lets a rebuild replace an index under
running queries. Nothing here talks to a database; ``surreal_kgrag.db.maintenance`` does the
rebuilding, and each connection holds one catalogue shared by every store on it.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..surql import Identifier


class IndexSettings(BaseModel):
    """HNSW build settings (cosine distance, F32) and when a store rebuilds its search indexes.

    After a write, an index is rebuilt when its pending updates number at least
    ``max(rebuild_min_pending, rebuild_ratio * indexed)``: a first bulk load always is, a small
    ingest into a large store is not (its cost then stays in proportion to what it adds)."""

    model_config = ConfigDict(frozen=True)

    hnsw_efc: int = Field(150, ge=8, le=2000, description="candidate list size while building the graph")
    hnsw_m: int = Field(12, ge=2, le=128, description="links per node")
    auto_rebuild: bool = Field(True, description="rebuild after writes when the rule above says so (False: only optimize())")
    rebuild_min_pending: int = Field(1000, ge=1, description="never rebuild for fewer pending updates than this")
    rebuild_ratio: float = Field(0.2, ge=0.0, description="rebuild when pending updates reach this share of the indexed rows")

    def due(self, state: IndexState) -> bool:
        return self.auto_rebuild and state.pending >= max(self.rebuild_min_pending, self.rebuild_ratio * state.indexed)


class IndexState(BaseModel):
    """One search index: its live name, rows in its built structure, updates written since."""

    name: str
    generation: int = 0
    indexed: int = Field(0, description="rows when the live generation was built (0 if unknown)")
    pending: int = Field(
        0,
        description="HNSW: vectors written since, which queries scan one by one; BM25: chunks removed since, each a key "
        "every scored search reads",
    )


class IndexReport(BaseModel):
    """What a maintenance call did."""

    rebuilt: list[str] = Field(default_factory=list, description="indexes rebuilt (chunk, concept, text)")
    seconds: float = 0.0
    indexes: dict[str, IndexState] = Field(default_factory=dict)
    deferred: list[str] = Field(default_factory=list, description="old indexes still in use, removed by the next maintenance")
    failed: list[str] = Field(
        default_factory=list, description="indexes whose new generation did not build (the live one is kept; run optimize again)"
    )
    note: str | None = None


@dataclass(frozen=True)
class SearchIndex:
    key: str
    base: str
    table: str
    ddl: str  # the surql file that defines it

    @property
    def placeholder(self) -> str:
        return f"{self.key}_index"

    def name(self, generation: int) -> str:
        return self.base if generation == 0 else f"{self.base}_{generation}"

    def generation_of(self, name: str) -> int | None:
        if name == self.base:
            return 0
        prefix, _, number = name.rpartition("_")
        return int(number) if prefix == self.base and number.isdigit() else None


SEARCH_INDEXES: dict[str, SearchIndex] = {
    index.key: index
    for index in (
        SearchIndex("chunk", "chunk_embedding", "chunk", "index_vector"),
        SearchIndex("concept", "concept_embedding", "concept_vector", "index_vector"),
        SearchIndex("text", "chunk_text_search", "chunk_text", "index_fulltext"),
    )
}
PLACEHOLDERS = frozenset(index.placeholder for index in SEARCH_INDEXES.values())


@dataclass
class Lease:
    """Held by a query from rendering its text until its results are back."""

    version: int
    write: bool
    names: dict[str, Identifier]


class IndexCatalog:
    """The live search index names of one connection (shared by every store on it), and the
    bookkeeping that lets a rebuild replace an index under running queries."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._states: dict[str, IndexState] | None = None
        self._recorded = False
        self._hnsw: dict[str, int] = {}
        self._version = 0
        self._leases: Counter[int] = Counter()
        self._writers = 0
        self._rebuilding = False

    @property
    def loaded(self) -> bool:
        """Whether the state recorded in the store has been read. A store that records none yet
        (never initialised, or from before index generations) is read again on the next query."""
        return self._recorded

    def load(self, record: Mapping[str, Any] | None) -> None:
        """Take the state recorded in the store (``kg_meta:indexes``)."""
        with self._cond:
            if self._recorded or self._rebuilding:
                return
            stored = dict(record or {})
            self._states = {}
            for key, index in SEARCH_INDEXES.items():
                values = dict(stored.get(key) or {})
                generation = int(values.get("generation", 0))
                self._states[key] = IndexState(
                    name=index.name(generation),
                    generation=generation,
                    indexed=int(values.get("indexed", 0)),
                    pending=int(values.get("pending", 0)),
                )
            self._hnsw = {k: int(v) for k, v in dict(stored.get("hnsw") or {}).items()}
            self._recorded = record is not None

    def states(self) -> dict[str, IndexState]:
        with self._cond:
            return {key: state.model_copy() for key, state in (self._states or {}).items()}

    def hnsw(self) -> dict[str, int]:
        with self._cond:
            return dict(self._hnsw)

    def record(self) -> dict[str, Any]:
        """The state as stored in ``kg_meta:indexes``."""
        with self._cond:
            states = self._states or {}
            out: dict[str, Any] = {key: s.model_dump(exclude={"name"}) for key, s in states.items()}
            out["hnsw"] = dict(self._hnsw)
            return out

    def mark_recorded(self) -> None:
        with self._cond:
            self._recorded = True

    # -- queries ---------------------------------------------------------------------------------

    def enter(self, *, write: bool) -> Lease | None:
        """A lease on the live names, or None for a write while a rebuild runs (wait and retry)."""
        with self._cond:
            if write and self._rebuilding:
                return None
            self._leases[self._version] += 1
            if write:
                self._writers += 1
            names = {index.placeholder: Identifier(state.name) for index, state in self._live()}
            return Lease(self._version, write, names)

    def leave(self, lease: Lease) -> None:
        with self._cond:
            self._leases[lease.version] -= 1
            if not self._leases[lease.version]:
                del self._leases[lease.version]
            if lease.write:
                self._writers -= 1
            self._cond.notify_all()

    def wait(self, timeout: float) -> None:
        with self._cond:
            self._cond.wait(timeout)

    def _live(self) -> list[tuple[SearchIndex, IndexState]]:
        return [(SEARCH_INDEXES[key], state) for key, state in (self._states or {}).items()]

    # -- maintenance -----------------------------------------------------------------------------

    def add_pending(self, counts: Mapping[str, int]) -> None:
        with self._cond:
            for key, n in counts.items():
                if self._states is not None and n:
                    self._states[key].pending += n

    def begin_rebuild(self) -> bool:
        """Close the gate to writers; False when another rebuild holds it."""
        with self._cond:
            if self._rebuilding:
                return False
            self._rebuilding = True
            return True

    def writers_idle(self) -> bool:
        with self._cond:
            return self._writers == 0

    def switch(self, key: str, generation: int, indexed: int, pending: int) -> int:
        """Point queries at a new generation; returns the version older leases belong before."""
        with self._cond:
            assert self._states is not None
            self._states[key] = IndexState(
                name=SEARCH_INDEXES[key].name(generation), generation=generation, indexed=indexed, pending=pending
            )
            self._version += 1
            return self._version

    @property
    def version(self) -> int:
        with self._cond:
            return self._version

    def drained(self, version: int) -> bool:
        """No query that rendered names before ``version`` is still running."""
        with self._cond:
            return not any(v < version for v in self._leases)

    def end_rebuild(self) -> None:
        with self._cond:
            self._rebuilding = False
            self._cond.notify_all()
