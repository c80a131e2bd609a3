"""Connections under ``SurrealStore``: one engine handle per embedded file, sockets to a server.

Embedded engines (``mem://``, ``surrealkv://``) are opened through the SDK's blocking embedded
connection, one handle per file shared by sync and async code (a ``surrealkv://`` path can be
opened by a single handle only, and two ``mem://`` handles would be two different databases); an
async caller's queries run on it in a worker thread. Not the SDK's async embedded connection: it
builds the engine inside a runtime it drops at once (``surrealdb-embedded`` 3.0.0b10), which takes
the engine's background work with it, so SurrealKV never writes a full memtable to disk; after two
memtables (2 GiB on a 16-64 GiB machine, 256 MiB in a 2 GB container) every write waits for ever.
The blocking connection keeps its runtime, and flushes. It holds the GIL while the engine runs a
query, so queries from several threads take turns. Remote servers (``ws://``, ``http://``) get one
blocking connection for sync calls and one native async connection per event loop, each opened
once under a lock.

Nothing here blocks a running event loop: an async caller opens, queries and closes an embedded
file in a worker thread.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import gc
import threading
import weakref
from collections.abc import Mapping
from typing import Any, ClassVar, TypeVar

from ..errors import ConfigurationError, QueryExecutionError, StoreConnectionError, StoreLockedError
from . import sdk
from .catalog import IndexCatalog
from .config import StoreConfig, is_memory
from .sdk import SurrealError

T = TypeVar("T")
# A query ready to send: the surql file name (for error messages), its text and its bound params.
Job = tuple[str, str, dict[str, Any]]

def _query_error(name: str, error: SurrealError | str) -> QueryExecutionError:
    return QueryExecutionError(f"SurrealDB rejected {name}.surql: {error}")


_NOT_EXECUTED = "not executed due to a failed transaction"


def _results(name: str, response: Mapping[str, Any]) -> list[Any]:
    """One result per statement. On failure, report the statement that failed, not the ones a
    failed transaction cancelled (the SDK's own parser raises on the first of those)."""
    if response.get("error"):
        raise _query_error(name, response["error"].get("message", response["error"]))
    statements = response.get("result") or []
    errors = [(i, s.get("result")) for i, s in enumerate(statements) if s.get("status") == "ERR"]
    if errors:
        cause = next(((i, m) for i, m in errors if _NOT_EXECUTED not in str(m)), errors[0])
        raise _query_error(name, f"statement {cause[0] + 1}: {cause[1]}")
    return [s.get("result") for s in statements]


def _open_error(config: StoreConfig, error: Exception) -> StoreConnectionError:
    message = str(error)
    if "lock" in message.lower() and config.embedded:
        return StoreLockedError(
            f"the embedded store {config.url} is already open in another process ({message}). "
            "An embedded surrealkv:// store serves one process at a time: stop the other process, or run "
            "a SurrealDB server on that path (`surreal start surrealkv://PATH`) and connect with ws://."
        )
    return StoreConnectionError(f"could not open {config.url}: {message}")


def _signin_vars(config: StoreConfig) -> dict[str, Any] | None:
    if config.access:
        return {
            "namespace": config.namespace,
            "database": config.database,
            "access": config.access,
            "variables": dict(config.access_variables or {}),
        }
    if config.username:
        password = config.password.get_secret_value() if config.password else ""
        return {"username": config.username, "password": password}
    return None


class Connection:
    """What a store needs from a connection. ``catalog`` names the live search indexes and keeps
    index maintenance and queries out of each other's way (shared by every store on the handle)."""

    catalog: IndexCatalog
    maintains_indexes: ClassVar[bool] = False
    #: Each query blocks the calling thread (the embedded engine): async callers run it in a worker thread.
    blocking: ClassVar[bool] = False

    def run(self, job: Job) -> list[Any]:
        raise NotImplementedError

    async def arun(self, job: Job) -> list[Any]:
        raise NotImplementedError

    def version(self) -> str:
        raise NotImplementedError

    async def aversion(self) -> str:
        raise NotImplementedError

    def release(self) -> None:
        raise NotImplementedError

    async def arelease(self) -> None:
        self.release()


# -- embedded ------------------------------------------------------------------------------------

class _ClosedHandle:
    """Stands in for the SDK handle of a closed embedded connection."""

    def __init__(self, url: str) -> None:
        self.url = url

    def __getattr__(self, name: str) -> Any:
        raise StoreConnectionError(f"the store {self.url} is closed (closed explicitly, or at interpreter exit)")


class EmbeddedConnection(Connection):
    """One engine handle per embedded file, shared by every store on it in this process.

    Handles still open when the interpreter exits are closed, and the SDK's handle objects
    dropped, by an ``atexit`` hook (:meth:`close_all`): the engine's worker threads then have no
    Python object left to touch while the interpreter finalises. Without it, a program that ended
    without closing its store aborted (SIGABRT, exit 134) after its work in about one run in five.
    """

    blocking = True
    maintains_indexes = True
    _registry: ClassVar[dict[str, EmbeddedConnection]] = {}
    _registry_lock = threading.Lock()
    _live: ClassVar[weakref.WeakSet[EmbeddedConnection]] = weakref.WeakSet()
    _hooked: ClassVar[bool] = False
    _live_lock = threading.Lock()

    def __init__(self, config: StoreConfig) -> None:
        """Opens the engine: blocking (file I/O), so async callers run it in a worker thread."""
        self.config = config
        self.refs = 0
        self.catalog = IndexCatalog()
        try:
            self.db: Any = sdk.blocking_handle(config.url)
            self._open()
        except SurrealError as error:
            raise _open_error(config, error) from error
        with self._live_lock:  # (acquire() holds _registry_lock here)
            if not EmbeddedConnection._hooked:
                atexit.register(EmbeddedConnection.close_all)
                EmbeddedConnection._hooked = True
            self._live.add(self)

    @classmethod
    def close_all(cls) -> None:
        """Close every embedded handle of this process, whoever holds it, and drop the SDK's
        objects; a store used afterwards raises :class:`StoreConnectionError`."""
        with cls._registry_lock, cls._live_lock:
            connections = list(cls._live)
            cls._live.clear()
            cls._registry.clear()
        for connection in connections:
            connection._close_handle()
        gc.collect()  # the SDK's objects are freed now, while the interpreter is whole

    def _close_handle(self) -> None:
        db, self.db = self.db, _ClosedHandle(self.config.url)
        if not isinstance(db, _ClosedHandle):
            with contextlib.suppress(SurrealError):
                sdk.close(db)

    def _open(self) -> None:
        try:
            sdk.open_blocking(self.db, self.config.namespace, self.config.database, _signin_vars(self.config))
        except BaseException:
            sdk.close(self.db)  # a failed sign-in must not keep the file locked
            raise

    @classmethod
    def acquire(cls, config: StoreConfig) -> EmbeddedConnection:
        if is_memory(config.url):
            connection = cls(config)  # each mem:// store is its own database
            connection.refs = 1
            return connection
        with cls._registry_lock:
            shared = cls._registry.get(config.url)
            if shared is None:
                connection = cls._registry[config.url] = cls(config)
            elif (shared.config.namespace, shared.config.database) != (config.namespace, config.database):
                raise ConfigurationError(
                    f"{config.url} is already open in this process for namespace "
                    f"{shared.config.namespace!r} / database {shared.config.database!r}; an embedded "
                    "file is one handle per process, so use the same namespace and database (or a server)"
                )
            elif _signin_vars(shared.config) != _signin_vars(config):  # one handle is one session
                raise ConfigurationError(
                    f"{config.url} is already open in this process signed in as another user; an embedded "
                    "file is one handle, and one session, per process: close the other store first (or use a server)"
                )
            else:
                connection = shared
            connection.refs += 1
            return connection

    def _last_reference(self) -> bool:
        with self._registry_lock:
            self.refs -= 1
            if self.refs > 0:
                return False
            if self._registry.get(self.config.url) is self:
                del self._registry[self.config.url]
            return True

    def release(self) -> None:
        if self._last_reference():
            with self._live_lock:
                self._live.discard(self)
            self._close_handle()

    async def arelease(self) -> None:
        await asyncio.to_thread(self.release)

    def run(self, job: Job) -> list[Any]:
        name, text, params = job
        try:
            response = sdk.query(self.db, text, params)
        except SurrealError as error:
            raise _query_error(name, error) from error
        return _results(name, response)

    async def arun(self, job: Job) -> list[Any]:
        return await asyncio.to_thread(self.run, job)

    def version(self) -> str:
        return sdk.version(self.db)

    async def aversion(self) -> str:
        return await asyncio.to_thread(self.version)


# -- remote --------------------------------------------------------------------------------------


class _LoopConnection:
    """The async connection of one event loop, opened once under that loop's lock."""

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.db: Any = None


class RemoteConnection(Connection):
    """A blocking connection for sync calls, a native async one per event loop for async calls.
    The server folds index updates in the background itself, so no maintenance runs from here."""

    def __init__(self, config: StoreConfig) -> None:
        self.config = config
        self.catalog = IndexCatalog()
        self._sync: Any = None
        self._per_loop: dict[asyncio.AbstractEventLoop, _LoopConnection] = {}
        self._lock = threading.Lock()

    def _blocking(self) -> Any:
        with self._lock:
            if self._sync is None:
                try:
                    db = sdk.blocking_handle(self.config.url)
                    sdk.open_blocking(db, self.config.namespace, self.config.database, _signin_vars(self.config))
                except (SurrealError, OSError) as error:
                    raise _open_error(self.config, error) from error
                self._sync = db
            return self._sync

    async def _native(self) -> Any:
        loop = asyncio.get_running_loop()
        with self._lock:
            # A loop that has closed (asyncio.run per call, a test's loop) can no longer close its
            # socket: dropping it lets the socket go with it, instead of one more held open a loop.
            for closed in [other for other in self._per_loop if other.is_closed()]:
                del self._per_loop[closed]
            slot = self._per_loop.get(loop)
            if slot is None:
                slot = self._per_loop[loop] = _LoopConnection()
        async with slot.lock:
            if slot.db is None:
                db = sdk.async_handle(self.config.url)
                try:
                    await sdk.aopen(db, self.config.namespace, self.config.database, _signin_vars(self.config))
                except (SurrealError, OSError) as error:
                    await _close_quietly(db)
                    raise _open_error(self.config, error) from error
                slot.db = db
            return slot.db

    def run(self, job: Job) -> list[Any]:
        name, text, params = job
        db = self._blocking()
        try:
            response = sdk.query(db, text, params)
        except SurrealError as error:
            raise _query_error(name, error) from error
        return _results(name, response)

    async def arun(self, job: Job) -> list[Any]:
        name, text, params = job
        db = await self._native()
        try:
            response = await sdk.aquery(db, text, params)
        except SurrealError as error:
            raise _query_error(name, error) from error
        return _results(name, response)

    def version(self) -> str:
        return sdk.version(self._blocking())

    async def aversion(self) -> str:
        return await sdk.aversion(await self._native())

    def _take_all(self) -> tuple[Any, dict[asyncio.AbstractEventLoop, _LoopConnection]]:
        with self._lock:
            sync, self._sync = self._sync, None
            per_loop, self._per_loop = self._per_loop, {}
        return sync, per_loop

    def release(self) -> None:
        sync, per_loop = self._take_all()
        if sync is not None:
            sdk.close(sync)
        for loop, slot in per_loop.items():
            _close_on_its_loop(loop, slot.db)

    async def arelease(self) -> None:
        sync, per_loop = self._take_all()
        if sync is not None:
            await asyncio.to_thread(sdk.close, sync)
        current = asyncio.get_running_loop()
        for loop, slot in per_loop.items():
            if loop is current:
                await _close_quietly(slot.db)
            else:
                _close_on_its_loop(loop, slot.db)


async def _close_quietly(db: Any) -> None:
    if db is None:
        return
    try:
        await sdk.aclose(db)
    except (SurrealError, OSError, RuntimeError):
        pass  # closing a connection that never opened, or whose peer is gone


def _close_on_its_loop(loop: asyncio.AbstractEventLoop, db: Any) -> None:
    """Close an async connection from outside its loop: scheduled on the loop while it runs, run
    to completion on it when it is idle; a closed loop has already dropped the socket."""
    if db is None or loop.is_closed():
        return
    if loop.is_running():
        asyncio.run_coroutine_threadsafe(_close_quietly(db), loop)
        return
    # An idle loop cannot be driven from a thread that runs another one: use a short-lived thread.
    closer = threading.Thread(target=loop.run_until_complete, args=(_close_quietly(db),), name="surreal-kgrag-close")
    closer.start()
    closer.join()
