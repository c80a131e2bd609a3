"""The one module that talks to the ``surrealdb`` SDK; the rest of the package goes through it.

It holds the SDK's value types the package uses (``RecordID``, ``Null``), its error base class,
opening and closing a connection, and running a query (``query_raw``: one result per statement,
errors reported per statement). All on the SDK's public API, with one measured exception: a
request to the embedded engine is encoded and its answer decoded by ``sdk_fastpath`` (vectors and
record ids encoded about twice as fast, ``benchmarks/sdk_paths.py``; answers decoded by a native
CBOR decoder, a graph search's subgraph in 0.2 ms instead of 3.4). Every request to a server takes
the public path, with numpy values turned into plain lists first.

The embedded engine is opened with the SDK's blocking connection (:func:`blocking_handle`): its
async one drops the runtime its engine was built in, and with it the engine's background work, so a
``surrealkv://`` store never flushes a memtable and stops taking writes after two of them
(``surreal_kgrag.db.connection``; ``tests/test_memory_limit.py`` checks it).

``TESTED`` names the SDK and engine releases the test suite has run against;
``tests/test_sdk_boundary.py`` checks that the installed ones are among them and that the fast path
still finds what it needs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import surrealdb
from surrealdb import Null, RecordID, SurrealError

from . import sdk_fastpath

__all__ = ["TESTED", "Null", "RecordID", "SurrealError", "aquery", "plain", "query"]

# Releases the tests have run with: the SDK distributions, and the SurrealDB engine they embed.
TESTED = {"surrealdb": ("3.0.0b10",), "surrealdb-embedded": ("3.0.0b10",), "engine": ("3.2.4",)}

_FAST = sdk_fastpath.available()

Handle = Any  # an SDK connection; opaque outside this module


def async_handle(url: str) -> Handle:
    return surrealdb.AsyncSurreal(url)


def blocking_handle(url: str) -> Handle:
    """A blocking connection: to a server, or the embedded engine's (the only one that flushes, see above)."""
    return surrealdb.Surreal(url)


async def aopen(db: Handle, namespace: str, database: str, credentials: Mapping[str, Any] | None) -> None:
    await db.connect()
    if credentials is not None:
        await db.signin(dict(credentials))
    await db.use(namespace, database)


def open_blocking(db: Handle, namespace: str, database: str, credentials: Mapping[str, Any] | None) -> None:
    db.connect()
    if credentials is not None:
        db.signin(dict(credentials))
    db.use(namespace, database)


async def aclose(db: Handle) -> None:
    await db.close()


def close(db: Handle) -> None:
    db.close()


async def aversion(db: Handle) -> str:
    return str(await db.version())


def version(db: Handle) -> str:
    return str(db.version())


async def aquery(db: Handle, text: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """Run ``text`` with bound ``params`` on a server; the raw response (``result``: one entry per statement)."""
    return dict(await db.query_raw(text, plain(params)))


def query(db: Handle, text: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """The blocking twin of :func:`aquery`, for a server or the embedded engine (a request to the
    embedded engine takes the fast path)."""
    engine = sdk_fastpath.engine(db) if _FAST else None
    if engine is not None:
        return sdk_fastpath.execute(engine, text, params)
    return dict(db.query_raw(text, plain(params)))


def plain(value: Any) -> Any:
    """``value`` with every numpy array or scalar inside it turned into plain Python values."""
    if isinstance(value, (np.ndarray, np.generic)):
        return value.tolist()
    if type(value) is dict:
        return {k: plain(v) for k, v in value.items()}
    if type(value) in (list, tuple):
        return [plain(v) for v in value]
    return value
