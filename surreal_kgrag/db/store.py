"""``SurrealStore``: one namespace/database, opened lazily. It runs named SurrealQL files with bound
parameters, sync and async, retries a write transaction that lost a race, fills the live search
index names into query texts, and hands index upkeep to ``surreal_kgrag.db.maintenance``.

Connections live in ``surreal_kgrag.db.connection``: stores on one embedded file share one engine
handle, and every call is safe from many threads and event loops at once.
"""

from __future__ import annotations

import asyncio
import re
import threading
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

from .. import surql
from ..errors import StoreConnectionError
from ..surql import CompiledFilter
from . import maintenance
from .catalog import PLACEHOLDERS, IndexReport, IndexSettings, IndexState, Lease
from .config import StoreConfig, check_embedded_path
from .connection import Connection, EmbeddedConnection, RemoteConnection
from .loops import gather_or_cancel, run_sync
from .retry import arun_retrying, run_retrying

# One query of a batch: the surql file name, its bound params, its {{placeholder}} values.
QueryStep = tuple[str, Mapping[str, Any] | None, Mapping[str, Any]]
Placeholder = int | CompiledFilter | surql.Identifier


class SurrealStore:
    """A connection to one namespace/database, opened lazily on first use.

    ``query("name", {...})`` runs ``surql/name.surql`` with bound parameters and returns one result
    per statement. Close it (or use ``with``) when done; stores on the same embedded file share one
    engine handle and the last one to close releases it. Safe to use from many threads and event
    loops at once; queries keep running while documents are written and indexes rebuilt.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        namespace: str | None = None,
        database: str | None = None,
        username: str | None = None,
        password: str | None = None,
        access: str | None = None,
        access_variables: Mapping[str, Any] | None = None,
        create: bool | None = None,
        config: StoreConfig | None = None,
    ) -> None:
        if config is None:
            config = StoreConfig.from_env(
                url=url,
                namespace=namespace,
                database=database,
                username=username,
                password=password,
                access=access,
                access_variables=dict(access_variables) if access_variables else None,
                create=create,
            )
        self.config = config
        self._open_lock = threading.Lock()
        self._connection: Connection | None = None
        self._server_version: str | None = None

    def __repr__(self) -> str:
        return f"SurrealStore(url={self.config.url!r}, namespace={self.config.namespace!r}, database={self.config.database!r})"

    # -- lifecycle -------------------------------------------------------------------------------

    def _conn(self) -> Connection:
        with self._open_lock:
            if self._connection is None:
                if self.config.embedded:
                    check_embedded_path(self.config)
                    self._connection = EmbeddedConnection.acquire(self.config)
                else:
                    self._connection = RemoteConnection(self.config)
            return self._connection

    async def _aconn(self) -> Connection:
        connection = self._connection
        if connection is not None:
            return connection
        return await asyncio.to_thread(self._conn)  # opening an embedded file blocks: not on the loop

    def close(self) -> None:
        with self._open_lock:
            connection, self._connection = self._connection, None
        if connection is not None:
            connection.release()

    def close_when_collected(self) -> None:
        """Release the connection once this object is garbage-collected, for an owner that cannot
        close it at a known point (a retriever LangChain copies per call, or one dropped unclosed).
        Nothing can query a store nobody holds, so this never closes under a reader's feet."""
        finalizer = weakref.finalize(self, _release_dropped, self.__dict__)
        finalizer.atexit = False  # at exit, EmbeddedConnection.close_all closes every engine handle

    async def aclose(self) -> None:
        with self._open_lock:
            connection, self._connection = self._connection, None
        if connection is not None:
            await connection.arelease()

    def __enter__(self) -> SurrealStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> SurrealStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- queries ---------------------------------------------------------------------------------

    @property
    def server_version(self) -> str:
        """The server's version string, e.g. ``surrealdb-3.2.4``."""
        if self._server_version is None:
            self._server_version = self._conn().version()
        return self._server_version

    async def aserver_version(self) -> str:
        if self._server_version is None:
            self._server_version = await (await self._aconn()).aversion()
        return self._server_version

    @property
    def major_version(self) -> int:
        return _major(self.server_version)

    def text(self, name: str, **placeholders: Placeholder) -> str:
        """The SurrealQL of ``surql/<name>.surql`` for this server, placeholders filled (the search
        index names with the live ones)."""
        template = surql.load(name, self.major_version)
        connection = self._conn()
        self._load_catalog(connection, template)
        lease = connection.catalog.enter(write=False)
        assert lease is not None
        connection.catalog.leave(lease)
        return _render(template, lease, placeholders)

    def query(self, name: str, params: Mapping[str, Any] | None = None, **placeholders: Placeholder) -> list[Any]:
        """Run ``surql/<name>.surql``; returns one result per statement. ``placeholders`` fill
        ``{{name}}`` slots with checked integers or a compiled filter condition."""
        return self.query_many([(name, params, placeholders)])[0]

    async def aquery(self, name: str, params: Mapping[str, Any] | None = None, **placeholders: Placeholder) -> list[Any]:
        return (await self.aquery_many([(name, params, placeholders)]))[0]

    def query_text(self, name: str, text: str, params: Mapping[str, Any] | None = None) -> list[Any]:
        """Run SurrealQL ``text`` that a caller built from ``surql/<name>.surql`` around a piece it
        checked itself (the read-only guard of text-to-SurrealQL, ``surreal_kgrag.llm.readonly``).
        Everything else goes through :meth:`query`."""
        return self._conn().run((name, text, dict(params or {})))

    async def aquery_text(self, name: str, text: str, params: Mapping[str, Any] | None = None) -> list[Any]:
        return await (await self._aconn()).arun((name, text, dict(params or {})))

    def query_many(self, steps: Sequence[QueryStep]) -> list[list[Any]]:
        """Run several ``(name, params, placeholders)`` queries, one after the other (:meth:`aquery_many`
        runs them side by side, which only a server's async connection answers in parallel); one
        result list per query."""
        connection = self._conn()
        templates = [surql.load(name, self.major_version) for name, _, _ in steps]
        for template in templates:
            self._load_catalog(connection, template)
        write = any(surql.writes(t) for t in templates)
        while (lease := connection.catalog.enter(write=write)) is None:
            connection.catalog.wait(0.05)  # a write waits while an index is rebuilt
        try:
            jobs = [(name, _render(t, lease, ph), dict(params or {})) for (name, params, ph), t in zip(steps, templates)]
            return [run_retrying(connection, job, t) for job, t in zip(jobs, templates)]
        finally:
            connection.catalog.leave(lease)

    async def aquery_many(self, steps: Sequence[QueryStep]) -> list[list[Any]]:
        connection = await self._aconn()
        if connection.blocking:
            # The embedded engine answers one query at a time, in a worker thread that cancelling
            # the caller does not stop: the whole call runs there, so its lease on the search
            # indexes' names ends with its queries (a rebuild waits for it), not with the caller.
            return await asyncio.to_thread(self.query_many, steps)
        major = _major(await self.aserver_version())
        templates = [surql.load(name, major) for name, _, _ in steps]
        for template in templates:
            await self._aload_catalog(connection, template)
        write = any(surql.writes(t) for t in templates)
        while (lease := connection.catalog.enter(write=write)) is None:
            await asyncio.sleep(0.02)
        try:
            jobs = [(name, _render(t, lease, ph), dict(params or {})) for (name, params, ph), t in zip(steps, templates)]
            return await gather_or_cancel([arun_retrying(connection, job, t) for job, t in zip(jobs, templates)])
        finally:
            connection.catalog.leave(lease)

    def _load_catalog(self, connection: Connection, template: str) -> None:
        if not connection.catalog.loaded and surql.placeholders(template) & PLACEHOLDERS:
            connection.catalog.load(connection.run(("index_state", surql.load("index_state", self.major_version), {}))[-1])

    async def _aload_catalog(self, connection: Connection, template: str) -> None:
        if not connection.catalog.loaded and surql.placeholders(template) & PLACEHOLDERS:
            text = surql.load("index_state", _major(await self.aserver_version()))
            connection.catalog.load((await connection.arun(("index_state", text, {})))[-1])

    # -- search index maintenance ----------------------------------------------------------------

    def index_states(self) -> dict[str, IndexState]:
        """Each search index (chunk, concept, text): its live name, rows built, updates pending."""
        connection = self._conn()
        self._load_catalog(connection, "{{chunk_index}}")
        return connection.catalog.states()

    async def aindex_states(self) -> dict[str, IndexState]:
        connection = await self._aconn()
        await self._aload_catalog(connection, "{{chunk_index}}")
        return connection.catalog.states()

    def after_bulk_write(
        self, *, chunks: int = 0, concepts: int = 0, replaced: int = 0, settings: IndexSettings | None = None
    ) -> IndexReport:
        """Tell the store how many chunk and concept vectors a write added or replaced, and how many
        stored chunks it removed (``replaced``: the old chunks of the documents it wrote again). The
        store counts them as pending in its search indexes (the vectors in the HNSW ones, the
        removed chunks in the BM25 one: maintenance.pending_counts) and rebuilds those whose pending
        share ``settings`` (default ``IndexSettings()``) says is too large, without disturbing
        queries. Call it after each bulk write (an ingest does). Deletions are not counted: the BM25
        keys they leave go with ``optimize(force=True)``."""
        connection = self._conn()
        if not connection.maintains_indexes:
            return IndexReport(note=_SERVER_NOTE)
        counts = maintenance.pending_counts(chunks=chunks, concepts=concepts, replaced=replaced)
        return run_sync(maintenance.after_writes(connection, counts, settings or IndexSettings()))

    async def aafter_bulk_write(
        self, *, chunks: int = 0, concepts: int = 0, replaced: int = 0, settings: IndexSettings | None = None
    ) -> IndexReport:
        connection = await self._aconn()
        if not connection.maintains_indexes:
            return IndexReport(note=_SERVER_NOTE)
        counts = maintenance.pending_counts(chunks=chunks, concepts=concepts, replaced=replaced)
        return await maintenance.after_writes(connection, counts, settings or IndexSettings())

    def optimize(self, *, force: bool = False) -> IndexReport:
        """Rebuild every search index that has pending updates (all three with ``force``), each as
        a new generation while queries go on. Run it after many small ingests."""
        connection = self._conn()
        if not connection.maintains_indexes:
            return IndexReport(note=_SERVER_NOTE)
        return run_sync(maintenance.optimize(connection, force=force))

    async def aoptimize(self, *, force: bool = False) -> IndexReport:
        connection = await self._aconn()
        if not connection.maintains_indexes:
            return IndexReport(note=_SERVER_NOTE)
        return await maintenance.optimize(connection, force=force)


_SERVER_NOTE = "a SurrealDB server folds index updates into its indexes in the background; nothing to do here"


def _render(template: str, lease: Lease, placeholders: Mapping[str, Placeholder]) -> str:
    wanted = surql.placeholders(template)
    values: dict[str, Placeholder] = {k: v for k, v in lease.names.items() if k in wanted}
    values.update(placeholders)
    return surql.render(template, **values)


def _major(version: str) -> int:
    match = re.search(r"(\d+)\.\d+", version)
    if not match:
        raise StoreConnectionError(f"could not read the SurrealDB version from {version!r}")
    return int(match.group(1))


def _release_dropped(state: dict[str, Any]) -> None:
    """A collected store's connection, released in a thread of its own: the collector may run in a
    thread that holds a lock ``release()`` takes."""
    connection = state.get("_connection")
    if connection is not None:
        threading.Thread(target=connection.release, name="surreal-kgrag-release", daemon=True).start()
