"""The search indexes a store keeps fast, and how they are rebuilt without disturbing queries.

Three indexes set the speed of retrieval: the HNSW indexes on chunk and concept embeddings and the
BM25 index on chunk texts. On the embedded engine (SurrealDB 3.2), a vector written after its HNSW
index exists waits in a pending queue that every KNN query scans exactly, and nothing in the
embedded engine folds that queue into the graph (a SurrealDB server does, in the background, every
few seconds). Only building an index does. ``REBUILD INDEX`` first empties the index, so queries
running meanwhile find no neighbours (they fail), and an index built while rows are being written
misses some of those rows. So an embedded store rebuilds an index as a *new generation* beside the
live one:

1. writes in this process wait (queries do not);
2. ``DEFINE INDEX <base>_<n+1>`` builds the new generation while queries keep using the live one:
   every query names its index (``WITH INDEX {{chunk_index}}``, filled in by the store);
3. queries switch to the new name, and once no query still runs on the old one it is removed.

A rebuild costs time in proportion to the whole index, so it runs when the pending queue is large
next to the index (``IndexSettings``): after a first bulk load, or once many small ingests have
added up. ``SurrealStore.optimize()`` (``surreal-kgrag optimize``) rebuilds whatever is pending.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from . import surql
from .surql import Identifier

if TYPE_CHECKING:
    from .connection import Connection

_POLL = 0.02  # seconds between checks while a rebuild waits for queries or writes to finish
DRAIN_TIMEOUT = 300.0  # a query still on the old index after this long: leave its removal for later


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
    pending: int = Field(0, description="rows written since; queries scan these one by one")


class IndexReport(BaseModel):
    """What a maintenance call did."""

    rebuilt: list[str] = Field(default_factory=list, description="indexes rebuilt (chunk, concept, text)")
    seconds: float = 0.0
    indexes: dict[str, IndexState] = Field(default_factory=dict)
    deferred: list[str] = Field(default_factory=list, description="old indexes still in use, removed by the next maintenance")
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
        SearchIndex("concept", "concept_embedding", "concept", "index_vector"),
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


# -- the rebuild, on an embedded connection ------------------------------------------------------


async def _run(connection: Connection, name: str, params: Mapping[str, Any] | None = None, **placeholders: Any) -> list[Any]:
    text = surql.render(surql.load(name, 3), **placeholders)
    return await connection.arun((name, text, dict(params or {})))


async def load_catalog(connection: Connection) -> None:
    if not connection.catalog.loaded:
        connection.catalog.load((await _run(connection, "index_state"))[-1])


async def save_catalog(connection: Connection) -> None:
    await _run(connection, "index_state_write", {"state": connection.catalog.record()})
    connection.catalog.mark_recorded()


def _ddl(index: SearchIndex, name: str, dimension: int, hnsw: Mapping[str, int]) -> dict[str, Any]:
    settings = IndexSettings()
    return {
        "index": Identifier(name),
        "table": Identifier(index.table),
        "dimension": dimension,
        "hnsw_efc": int(hnsw.get("efc", settings.hnsw_efc)),
        "hnsw_m": int(hnsw.get("m", settings.hnsw_m)),
    }


async def rebuild(connection: Connection, keys: list[str]) -> IndexReport:
    """Rebuild the given indexes as new generations (see the module docstring)."""
    started = time.perf_counter()
    catalog = connection.catalog
    report = IndexReport()
    while not catalog.begin_rebuild():
        await asyncio.sleep(_POLL)
    try:
        while not catalog.writers_idle():
            await asyncio.sleep(_POLL)
        await load_catalog(connection)
        meta = (await _run(connection, "store_meta"))[-1] or {}
        dimension = int(meta.get("dimension") or 0)
        for key in keys:
            index = SEARCH_INDEXES[key]
            if index.ddl == "index_vector" and not dimension:
                continue  # a store that was never initialised has nothing to index
            old = catalog.states()[key]
            new = index.name(old.generation + 1)
            ddl = _ddl(index, new, dimension, catalog.hnsw())
            await _run(connection, "index_remove", index=ddl["index"], table=ddl["table"])  # left by an interrupted rebuild
            await _run(connection, index.ddl, **ddl)
            info = (await _run(connection, "index_info", index=ddl["index"], table=ddl["table"]))[-1] or {}
            indexed = int((info.get("building") or {}).get("initial") or 0)
            version = catalog.switch(key, old.generation + 1, indexed, 0)
            await save_catalog(connection)
            report.rebuilt.append(key)
            if await _drain(catalog, version):
                await _run(connection, "index_remove", index=Identifier(old.name), table=ddl["table"])
            else:
                report.deferred.append(old.name)
        await _remove_stale(connection, keys, report.deferred)
    finally:
        catalog.end_rebuild()
    report.seconds = round(time.perf_counter() - started, 3)
    report.indexes = catalog.states()
    return report


async def _drain(catalog: IndexCatalog, version: int) -> bool:
    deadline = time.monotonic() + DRAIN_TIMEOUT
    while not catalog.drained(version):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(_POLL)
    return True


async def _remove_stale(connection: Connection, keys: list[str], keep: list[str]) -> None:
    """Remove old generations an earlier rebuild could not (a query was still on them, or the
    process stopped half-way), except those in ``keep``, and none while a query that rendered an
    older name still runs."""
    if not connection.catalog.drained(connection.catalog.version):
        return
    tables = dict(zip(("chunk", "concept", "chunk_text"), await _run(connection, "index_list")))
    live = {state.name for state in connection.catalog.states().values()}
    for key in dict.fromkeys(keys):
        index = SEARCH_INDEXES[key]
        for name in (tables.get(index.table) or {}).get("indexes", {}):
            if name in live or name in keep or index.generation_of(name) is None:
                continue
            await _run(connection, "index_remove", index=Identifier(name), table=Identifier(index.table))


async def after_writes(connection: Connection, counts: Mapping[str, int], settings: IndexSettings) -> IndexReport:
    """Count rows written into each index's pending queue; rebuild the indexes that are due."""
    await load_catalog(connection)
    connection.catalog.add_pending(counts)
    await save_catalog(connection)
    due = [key for key, state in connection.catalog.states().items() if settings.due(state)]
    if not due:
        return IndexReport(indexes=connection.catalog.states())
    return await rebuild(connection, due)


async def optimize(connection: Connection, *, force: bool = False) -> IndexReport:
    """Rebuild every index with pending updates (all of them with ``force``)."""
    await load_catalog(connection)
    keys = [key for key, state in connection.catalog.states().items() if force or state.pending > 0]
    if not keys:
        return IndexReport(indexes=connection.catalog.states(), note="nothing pending: every index is up to date")
    return await rebuild(connection, keys)
