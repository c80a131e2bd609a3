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
2. ``DEFINE INDEX <base>_<n+1> ... CONCURRENTLY`` builds the new generation in the engine's own
   batches while queries keep using the live one (every query names its index, ``WITH INDEX
   {{chunk_index}}``, filled in by the store); the rebuild polls ``INFO FOR INDEX`` until the build
   is ready. A build that fails, stops making progress (``BUILD_STALL``) or is not ready within
   ``BUILD_TIMEOUT`` is dropped and the live generation kept (``IndexReport.failed``), so an
   ingest never waits on it for ever;
3. an HNSW generation is not done when it reports ready: its vectors wait in its pending queue,
   and the engine folds them into the graph afterwards, in this process only (about 4 ms a vector
   on one core: 110 s for 30k chunks). A KNN on it meanwhile waits seconds, and if the process ends
   first the rest stay queued for good, every KNN scanning them one by one (100-170 ms at 30k-50k
   chunks). So queries stay on the live generation until probe KNN queries on the new one answer
   within ``SETTLE_PROBE_MS`` plus 1 ms a thousand vectors (``_unsettled``); one that does not
   within ``_settle_limit`` is dropped;
4. queries switch to the new name, and once no query still runs on the old one it is removed.

A rebuild costs time in proportion to the whole index, so it runs when the pending queue is large
next to the index (``IndexSettings``): after a first bulk load, or once many small ingests have
added up. The BM25 index has no queue: what a new generation of it clears is the keys of the rows
removed since it was built (``pending_counts``). ``SurrealStore.optimize()`` (``surreal-kgrag
optimize``) rebuilds whatever is pending.
"""


from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

from .. import surql
from ..errors import QueryExecutionError
from ..surql import Identifier
from .catalog import SEARCH_INDEXES, IndexCatalog, IndexReport, IndexSettings, SearchIndex
from .connection import Connection
from .retry import arun_retrying

_POLL = 0.02  # seconds between checks while a rebuild waits for queries or writes to finish
DRAIN_TIMEOUT = 300.0  # a query still on the old index after this long: leave its removal for later
BUILD_TIMEOUT = 6 * 3600.0  # a new generation not built after this long is dropped; the live one stays
BUILD_STALL = 600.0  # ... and so is one whose build shows no progress for this long
_BUILD_POLL = 0.5  # longest pause between checks of a build's progress
_BUILDING = {"started", "cleaning", "indexing"}  # what INFO FOR INDEX reports before "ready"
SETTLE_PROBE_MS = 50  # a probe's engine time limit, plus 1 ms a thousand vectors:
# a folded generation answers it in 9-11 ms at 50k chunks and 43-57 ms at 143k concepts, a fold's
# batch holds it for 0.6 s (1,500 vectors) to 5 s (30k)
_SETTLE_POLL = 5.0  # longest pause between probes: each may hold the engine (and the GIL) that long
_SETTLE_CONFIRM = 5  # probes in a row that must answer ...
_SETTLE_SPACING = 0.1  # ... this far apart (seconds), longer than the fold's gaps between batches
_SETTLE_SECONDS_PER_ROW = 0.05  # the fold's allowance beyond BUILD_STALL: over 10x what it takes here


async def _run(connection: Connection, name: str, params: Mapping[str, Any] | None = None, **placeholders: Any) -> list[Any]:
    template = surql.load(name, 3)
    return await arun_retrying(connection, (name, surql.render(template, **placeholders), dict(params or {})), template)


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
    await load_catalog(connection)  # before the gate closes: a catalog loads only while no rebuild runs
    while not catalog.begin_rebuild():
        await asyncio.sleep(_POLL)
    try:
        while not catalog.writers_idle():
            await asyncio.sleep(_POLL)
        meta = (await _run(connection, "store_meta"))[-1] or {}
        dimension = int(meta.get("dimension") or 0)
        for position, key in enumerate(keys):
            index = SEARCH_INDEXES[key]
            if index.ddl == "index_vector" and not dimension:
                continue  # a store that was never initialised has nothing to index
            try:
                await _rebuild_one(connection, key, dimension, report)
            except asyncio.TimeoutError:
                # The engine stopped answering a maintenance call: keep the live generations, try no more.
                report.failed.extend(k for k in keys[position:] if k not in report.failed)
                report.note = f"the engine did not answer a call of the {key} index rebuild within {BUILD_STALL:.0f} s"
                break
        else:
            await _remove_stale(connection, keys, report.deferred)
    finally:
        catalog.end_rebuild()
    report.seconds = round(time.perf_counter() - started, 3)
    report.indexes = catalog.states()
    return report


async def _rebuild_one(connection: Connection, key: str, dimension: int, report: IndexReport) -> None:
    catalog = connection.catalog
    index = SEARCH_INDEXES[key]
    old = catalog.states()[key]
    ddl = _ddl(index, index.name(old.generation + 1), dimension, catalog.hnsw())
    place = {"index": ddl["index"], "table": ddl["table"]}
    await _bounded(connection, "index_remove", **place)  # left by an interrupted rebuild
    await _bounded(connection, f"{index.ddl}_build", **ddl)
    indexed = await _built(connection, ddl["index"], ddl["table"])
    if indexed is not None and index.ddl == "index_vector":
        note = await _unsettled(connection, ddl["index"], ddl["table"], dimension, indexed)
        if note:
            report.note, indexed = note, None
    if indexed is None:
        await _bounded(connection, "index_remove", **place)
        report.failed.append(key)
        return
    version = catalog.switch(key, old.generation + 1, indexed, 0)
    await save_catalog(connection)
    report.rebuilt.append(key)
    if await _drain(catalog, version):
        await _bounded(connection, "index_remove", index=Identifier(old.name), table=ddl["table"])
    else:
        report.deferred.append(old.name)


async def _bounded(connection: Connection, name: str, params: Mapping[str, Any] | None = None, **placeholders: Any) -> list[Any]:
    """A maintenance call that may not take longer than ``BUILD_STALL``: on a store past 20k chunks,
    the engine stopped answering one in the process that had just written 10k chunks."""
    return await asyncio.wait_for(_run(connection, name, params, **placeholders), BUILD_STALL)


async def _built(connection: Connection, index: Identifier, table: Identifier) -> int | None:
    """Wait for a concurrent index build: the rows it indexed, or None when the engine reports an
    error, the build shows no progress for ``BUILD_STALL`` seconds or is not ready within
    ``BUILD_TIMEOUT``."""
    now = time.monotonic()
    deadline, stalled_at = now + BUILD_TIMEOUT, now + BUILD_STALL
    seen: tuple[Any, ...] = ()
    pause = _POLL
    while (now := time.monotonic()) < min(deadline, stalled_at):
        info = (await _bounded(connection, "index_info", index=index, table=table))[-1] or {}
        building = info.get("building") or {}
        status = building.get("status")
        if status == "ready":
            return int(building.get("initial") or 0)
        if status not in _BUILDING:
            return None
        progress = (status, building.get("initial"), building.get("pending"), building.get("updated"))
        if progress != seen:
            seen, stalled_at = progress, now + BUILD_STALL
        await asyncio.sleep(pause)
        pause = min(2 * pause, _BUILD_POLL)
    return None


async def _unsettled(connection: Connection, index: Identifier, table: Identifier, dimension: int, rows: int) -> str | None:
    """Wait until a new HNSW generation answers KNN queries from its graph (step 3 of the module
    docstring); why it does not, when it still does not after ``_settle_limit(rows)`` seconds or a
    probe fails otherwise. The engine folds in batches, and a probe that arrives between two gets
    through: only ``_SETTLE_CONFIRM`` probes in a row, ``_SETTLE_SPACING`` apart, say it is done."""
    probe = [1.0] + [0.0] * (dimension - 1)
    timeout_ms = SETTLE_PROBE_MS + rows // 1000
    limit = _settle_limit(rows)
    deadline = time.monotonic() + limit
    pause, answered = _POLL, 0
    while answered < _SETTLE_CONFIRM:
        try:
            folded = await _probe_answers(connection, index, table, probe, timeout_ms)
        except QueryExecutionError as error:
            return f"{index.value} was built but a KNN on it failed: {error}"
        if folded:
            answered += 1
            await asyncio.sleep(_SETTLE_SPACING)
            continue
        answered = 0
        if time.monotonic() + pause > deadline:
            return f"{index.value} was built but its vectors were not in its graph after {limit:.0f} s"
        await asyncio.sleep(pause)
        pause = min(2 * pause, _SETTLE_POLL)
    return None


async def _probe_answers(connection: Connection, index: Identifier, table: Identifier, probe: list[float], timeout_ms: int) -> bool:
    """Whether a KNN on ``index`` answered within ``timeout_ms`` of engine time."""
    try:
        await _bounded(connection, "index_vector_probe", {"probe": probe}, index=index, table=table, timeout_ms=timeout_ms)
    except QueryExecutionError as error:
        if "exceeded the timeout" in str(error):
            return False
        raise
    return True


def _settle_limit(rows: int) -> float:
    return min(BUILD_TIMEOUT, BUILD_STALL + rows * _SETTLE_SECONDS_PER_ROW)


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
    tables = dict(zip((index.table for index in SEARCH_INDEXES.values()), await _run(connection, "index_list")))
    live = {state.name for state in connection.catalog.states().values()}
    for key in dict.fromkeys(keys):
        index = SEARCH_INDEXES[key]
        for name in (tables.get(index.table) or {}).get("indexes", {}):
            if name in live or name in keep or index.generation_of(name) is None:
                continue
            await _run(connection, "index_remove", index=Identifier(name), table=Identifier(index.table))


def pending_counts(*, chunks: int, concepts: int, replaced: int) -> dict[str, int]:
    """What a write leaves pending in each index. The HNSW indexes: every vector written (it waits
    in the queue). The BM25 index: only the chunks the write removed. It indexes rows as they are
    written, but its scorer reads one key per row the index ever took, added or removed, which the
    embedded engine never compacts (``benchmarks/fulltext_scorer.py``): a new generation takes one
    per live row, so it gains nothing after rows were only added and costs most of a rebuild (2.2 of
    3.1 s on HotpotQA's 2,100 chunks)."""
    return {"chunk": chunks, "concept": concepts, "text": replaced}


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
