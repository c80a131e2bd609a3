"""The one adapter over the official ``surrealdb`` SDK: connect by URL, run named SurrealQL files
with bound parameters, sync and async.

Embedded engines (``mem://``, ``surrealkv://``) are opened through the SDK's async embedded
connection, which runs queries without holding the GIL. Sync calls drive that same handle on a
per-thread event loop, so sync and async code in one process share one database: a
``surrealkv://`` path can be opened by a single handle only, and two ``mem://`` handles would be two
different databases. Remote servers (``ws://``, ``http://``) get a blocking connection for sync calls
and a native async one for async calls.
"""

from __future__ import annotations

import asyncio
import os
import re
import threading
from collections.abc import Coroutine, Mapping, Sequence
from concurrent.futures import Future
from typing import Any, ClassVar, TypeVar
from urllib.parse import urlparse

import surrealdb
from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator
from surrealdb.connections.utils_mixin import mapped_engine_errors
from surrealdb.data.cbor import decode as decode_cbor

from . import surql, wire
from .errors import ConfigurationError, QueryExecutionError, StoreConnectionError, StoreLockedError
from .filters import CompiledFilter

T = TypeVar("T")
# One query of a batch: the surql file name, its bound params, its {{placeholder}} values.
QueryStep = tuple[str, Mapping[str, Any] | None, Mapping[str, Any]]

DEFAULT_URL = "surrealkv://.surreal-kgrag"
EMBEDDED_SCHEMES = frozenset({"mem", "memory", "surrealkv", "surrealkv+versioned", "file"})
REMOTE_SCHEMES = frozenset({"ws", "wss", "http", "https"})
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")


class StoreConfig(BaseModel):
    """Where the knowledge graph lives and how to sign in.

    ``from_env()`` reads ``SURREAL_KGRAG_URL``, ``SURREAL_KGRAG_NS``, ``SURREAL_KGRAG_DB``,
    ``SURREAL_KGRAG_USER`` and ``SURREAL_KGRAG_PASS``; explicit arguments win over the environment.
    """

    model_config = ConfigDict(frozen=True)

    url: str = Field(DEFAULT_URL, description="mem://, surrealkv://path, ws(s)://host:port or http(s)://host:port")
    namespace: str = "kgrag"
    database: str = "kgrag"
    username: str | None = Field(None, description="root (system) user; with `access`, ignored")
    password: SecretStr | None = None
    access: str | None = Field(None, description="name of a DEFINE ACCESS ... TYPE RECORD to sign in as a record user")
    access_variables: dict[str, Any] | None = Field(None, description="signin variables for the record access")

    @field_validator("url")
    @classmethod
    def _check_url(cls, url: str) -> str:
        scheme = url_scheme(url)
        if scheme not in EMBEDDED_SCHEMES | REMOTE_SCHEMES:
            known = ", ".join(sorted(f"{s}://" for s in EMBEDDED_SCHEMES | REMOTE_SCHEMES))
            raise ValueError(f"unsupported database URL {url!r}: use one of {known}")
        return url

    @field_validator("namespace", "database")
    @classmethod
    def _check_identifier(cls, value: str) -> str:
        return validate_identifier(value)

    @property
    def embedded(self) -> bool:
        return url_scheme(self.url) in EMBEDDED_SCHEMES

    @classmethod
    def from_env(cls, **overrides: Any) -> StoreConfig:
        env = {
            "url": os.environ.get("SURREAL_KGRAG_URL"),
            "namespace": os.environ.get("SURREAL_KGRAG_NS"),
            "database": os.environ.get("SURREAL_KGRAG_DB"),
            "username": os.environ.get("SURREAL_KGRAG_USER"),
            "password": os.environ.get("SURREAL_KGRAG_PASS"),
        }
        values = {k: v for k, v in env.items() if v}
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)


def url_scheme(url: str) -> str:
    return "memory" if url == "memory" else urlparse(url).scheme.lower()


def validate_identifier(value: str) -> str:
    if not _IDENTIFIER.match(value):
        raise ConfigurationError(
            f"invalid name {value!r}: use letters, digits, '_' or '-', starting with a letter or '_' (64 at most)"
        )
    return value


def checked_int(name: str, value: Any, *, minimum: int = 1, maximum: int = 100_000) -> int:
    """An integer that may be rendered into SurrealQL text (KNN k and ef, HNSW settings)."""
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise ConfigurationError(f"{name} must be an integer between {minimum} and {maximum}, got {value!r}")
    return value


class SurrealStore:
    """A connection to one namespace/database, opened lazily on first use.

    ``query("name", {...})`` runs ``surql/name.surql`` with bound parameters and returns one result
    per statement. Close it (or use ``with``) when done; stores on the same embedded file share one
    engine handle and the last one to close releases it.
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
            )
        self.config = config
        self._lock = threading.Lock()
        self._connection: _Connection | None = None
        self._server_version: str | None = None

    def __repr__(self) -> str:
        return f"SurrealStore(url={self.config.url!r}, namespace={self.config.namespace!r}, database={self.config.database!r})"

    # -- lifecycle -------------------------------------------------------------------------------

    def _conn(self) -> _Connection:
        with self._lock:
            if self._connection is None:
                self._connection = _EmbeddedConnection.acquire(self.config) if self.config.embedded else _RemoteConnection(self.config)
            return self._connection

    def close(self) -> None:
        with self._lock:
            if self._connection is not None:
                self._connection.release()
                self._connection = None

    async def aclose(self) -> None:
        with self._lock:
            connection, self._connection = self._connection, None
        if connection is not None:
            await connection.arelease()

    def settle(self) -> None:
        """Make reads fast again after a bulk load: an embedded file is closed and opened again
        (shared by every store on it in this process); other connections are left as they are."""
        self._conn().reopen()

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
            self._server_version = await self._conn().aversion()
        return self._server_version

    @property
    def major_version(self) -> int:
        return _major(self.server_version)

    def text(self, name: str, **placeholders: int | CompiledFilter) -> str:
        """The SurrealQL of ``surql/<name>.surql`` for this server, placeholders filled."""
        return surql.render(surql.load(name, self.major_version), **placeholders)

    async def atext(self, name: str, **placeholders: int | CompiledFilter) -> str:
        return surql.render(surql.load(name, _major(await self.aserver_version())), **placeholders)

    def query(self, name: str, params: Mapping[str, Any] | None = None, **placeholders: int | CompiledFilter) -> list[Any]:
        """Run ``surql/<name>.surql``; returns one result per statement. ``placeholders`` fill
        ``{{name}}`` slots with checked integers or a compiled filter condition."""
        return self._conn().run(name, self.text(name, **placeholders), dict(params or {}))

    async def aquery(self, name: str, params: Mapping[str, Any] | None = None, **placeholders: int | CompiledFilter) -> list[Any]:
        text = await self.atext(name, **placeholders)
        return await self._conn().arun(name, text, dict(params or {}))

    def query_text(self, name: str, text: str, params: Mapping[str, Any] | None = None) -> list[Any]:
        """Run SurrealQL ``text`` that a caller built from ``surql/<name>.surql`` around a piece it
        checked itself (the read-only guard of text-to-SurrealQL, ``surreal_kgrag.llm.readonly``).
        Everything else goes through :meth:`query`."""
        return self._conn().run(name, text, dict(params or {}))

    async def aquery_text(self, name: str, text: str, params: Mapping[str, Any] | None = None) -> list[Any]:
        return await self._conn().arun(name, text, dict(params or {}))

    def query_many(self, steps: Sequence[QueryStep]) -> list[list[Any]]:
        """Run several ``(name, params, placeholders)`` queries, concurrently where the connection
        allows it (the embedded engine runs them on separate cores); one result list per query."""
        jobs = [(name, self.text(name, **placeholders), dict(params or {})) for name, params, placeholders in steps]
        return self._conn().run_many(jobs)

    async def aquery_many(self, steps: Sequence[QueryStep]) -> list[list[Any]]:
        return list(await asyncio.gather(*(self.aquery(name, params, **placeholders) for name, params, placeholders in steps)))


def _major(version: str) -> int:
    match = re.search(r"(\d+)\.\d+", version)
    if not match:
        raise StoreConnectionError(f"could not read the SurrealDB version from {version!r}")
    return int(match.group(1))


def _query_error(name: str, error: surrealdb.SurrealError | str) -> QueryExecutionError:
    return QueryExecutionError(f"SurrealDB rejected {name}.surql: {error}")


_NOT_EXECUTED = "not executed due to a failed transaction"


def _results(name: str, response: dict[str, Any]) -> list[Any]:
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


class _Connection:
    def run(self, name: str, text: str, params: dict[str, Any]) -> list[Any]:
        raise NotImplementedError

    def run_many(self, jobs: Sequence[tuple[str, str, dict[str, Any]]]) -> list[list[Any]]:
        return [self.run(*job) for job in jobs]

    async def arun(self, name: str, text: str, params: dict[str, Any]) -> list[Any]:
        raise NotImplementedError

    def version(self) -> str:
        raise NotImplementedError

    async def aversion(self) -> str:
        raise NotImplementedError

    def release(self) -> None:
        raise NotImplementedError

    async def arelease(self) -> None:
        self.release()

    def reopen(self) -> None:
        """Only embedded files need it (see _EmbeddedConnection.reopen)."""


# -- embedded ------------------------------------------------------------------------------------

_thread_loops = threading.local()
_background_lock = threading.Lock()
_background_loop: asyncio.AbstractEventLoop | None = None


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from sync code, also when this thread already runs a loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        loop = getattr(_thread_loops, "loop", None)
        if loop is None or loop.is_closed():
            loop = _thread_loops.loop = asyncio.new_event_loop()
        return loop.run_until_complete(coro)
    # Sync API called from inside a running loop (a notebook, an async framework calling sync
    # code): hand the coroutine to a helper thread instead of nesting loops.
    future: Future[T] = asyncio.run_coroutine_threadsafe(coro, _helper_loop())
    return future.result()


def _helper_loop() -> asyncio.AbstractEventLoop:
    global _background_loop
    with _background_lock:
        if _background_loop is None:
            _background_loop = asyncio.new_event_loop()
            threading.Thread(target=_background_loop.run_forever, name="surreal-kgrag-loop", daemon=True).start()
        return _background_loop


class _EmbeddedConnection(_Connection):
    """One engine handle per embedded file, shared by every store in the process."""

    _registry: ClassVar[dict[str, _EmbeddedConnection]] = {}
    _registry_lock = threading.Lock()

    def __init__(self, config: StoreConfig) -> None:
        self.config = config
        self.refs = 0
        try:
            self.db = surrealdb.AsyncSurreal(config.url)
            run_sync(self._open())
        except surrealdb.SurrealError as error:
            raise _open_error(config, error) from error

    async def _open(self) -> None:
        await self.db.connect()
        credentials = _signin_vars(self.config)
        if credentials is not None:
            await self.db.signin(credentials)
        await self.db.use(self.config.namespace, self.config.database)

    @classmethod
    def acquire(cls, config: StoreConfig) -> _EmbeddedConnection:
        if url_scheme(config.url) in ("mem", "memory"):
            connection = cls(config)  # each mem:// store is its own database
            connection.refs = 1
            return connection
        key = config.url
        with cls._registry_lock:
            shared = cls._registry.get(key)
            if shared is None:
                connection = cls._registry[key] = cls(config)
            elif (shared.config.namespace, shared.config.database) != (config.namespace, config.database):
                raise ConfigurationError(
                    f"{config.url} is already open in this process for namespace "
                    f"{shared.config.namespace!r} / database {shared.config.database!r}; an embedded "
                    "file is one handle per process, so use the same namespace and database (or a server)"
                )
            else:
                connection = shared
            connection.refs += 1
            return connection

    def release(self) -> None:
        with self._registry_lock:
            self.refs -= 1
            if self.refs > 0:
                return
            if self._registry.get(self.config.url) is self:
                del self._registry[self.config.url]
        run_sync(self.db.close())

    def reopen(self) -> None:
        """Close the engine and open the file again. After a large write such as an index rebuild,
        reads in the same process stay 1.5-3x slower (concept search: 45-76 ms against 24-28) until
        the engine has closed the file once; a new process starts from the closed state."""
        if url_scheme(self.config.url) in ("mem", "memory"):
            return  # nothing on disk: closing would drop the database
        with self._registry_lock:
            run_sync(self.db.close())
            try:
                self.db = surrealdb.AsyncSurreal(self.config.url)
                run_sync(self._open())
            except surrealdb.SurrealError as error:
                raise _open_error(self.config, error) from error

    def run(self, name: str, text: str, params: dict[str, Any]) -> list[Any]:
        return run_sync(self.arun(name, text, params))

    def run_many(self, jobs: Sequence[tuple[str, str, dict[str, Any]]]) -> list[list[Any]]:
        async def gather() -> list[list[Any]]:
            return list(await asyncio.gather(*(self.arun(*job) for job in jobs)))

        return run_sync(gather())

    async def arun(self, name: str, text: str, params: dict[str, Any]) -> list[Any]:
        engine = getattr(self.db, "_db", None)  # the SDK's engine handle, to send our own encoding
        try:
            if engine is None:
                response = await self.db.query_raw(text, wire.plain(params))
            else:
                with mapped_engine_errors("query"):
                    response = decode_cbor(await engine.execute(wire.encode_query(text, params)))
        except surrealdb.SurrealError as error:
            raise _query_error(name, error) from error
        return _results(name, response)

    def version(self) -> str:
        return run_sync(self.aversion())

    async def aversion(self) -> str:
        return await self.db.version()


# -- remote --------------------------------------------------------------------------------------


class _RemoteConnection(_Connection):
    """A blocking connection for sync calls, a native async one (per event loop) for async calls."""

    def __init__(self, config: StoreConfig) -> None:
        self.config = config
        self._sync: Any = None
        self._async: Any = None
        self._async_loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()

    def _blocking(self) -> Any:
        with self._lock:
            if self._sync is None:
                try:
                    db = surrealdb.Surreal(self.config.url)
                    db.connect()
                    credentials = _signin_vars(self.config)
                    if credentials is not None:
                        db.signin(credentials)
                    db.use(self.config.namespace, self.config.database)
                except (surrealdb.SurrealError, OSError) as error:
                    raise _open_error(self.config, error) from error
                self._sync = db
            return self._sync

    async def _native(self) -> Any:
        loop = asyncio.get_running_loop()
        if self._async is None or self._async_loop is not loop:
            try:
                db = surrealdb.AsyncSurreal(self.config.url)
                await db.connect()
                credentials = _signin_vars(self.config)
                if credentials is not None:
                    await db.signin(credentials)
                await db.use(self.config.namespace, self.config.database)
            except (surrealdb.SurrealError, OSError) as error:
                raise _open_error(self.config, error) from error
            self._async, self._async_loop = db, loop
        return self._async

    def run(self, name: str, text: str, params: dict[str, Any]) -> list[Any]:
        db = self._blocking()
        try:
            response = db.query_raw(text, wire.plain(params))
        except surrealdb.SurrealError as error:
            raise _query_error(name, error) from error
        return _results(name, response)

    async def arun(self, name: str, text: str, params: dict[str, Any]) -> list[Any]:
        db = await self._native()
        try:
            response = await db.query_raw(text, wire.plain(params))
        except surrealdb.SurrealError as error:
            raise _query_error(name, error) from error
        return _results(name, response)

    def version(self) -> str:
        return self._blocking().version()

    async def aversion(self) -> str:
        return await (await self._native()).version()

    def release(self) -> None:
        if self._sync is not None:
            self._sync.close()
            self._sync = None
        # An async connection belongs to its event loop; from sync code it is dropped, and its
        # socket closes with the loop. `aclose()` closes it properly.
        self._async = None

    async def arelease(self) -> None:
        if self._async is not None and self._async_loop is asyncio.get_running_loop():
            await self._async.close()
        self._async = None
        self.release()
