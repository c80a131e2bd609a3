"""Database-enforced tenancy: SurrealDB record users that can read only their labels' documents.

The retrievers and tools already apply a caller's :class:`~surreal_kgrag.Scope` inside every query.
This module is the second, independent line: table permissions (``surql/tenancy.surql``) so that a
connection signed in as a *reader* sees only documents, chunks, chunk texts, edges and concepts its
labels allow, whatever SurrealQL it runs -- a raw query included::

    with SurrealStore(url, username="root", password=...) as admin:   # after the first ingest
        enable_tenancy(admin)
        add_reader(admin, "alice", "s3cret", access=["sales"])

    reader = SurrealStore(url, access=READER_ACCESS, access_variables={"name": "alice", "secret": "s3cret"})
    make_retriever("hybrid", reader).search("...")   # scoped to $auth.access as well

Readers cannot write. A store signed in as a reader also restricts its retrievers, tools and
rerankers to the reader's labels (``Scope.record_user``), so KNN searches fill k from what the
reader may see instead of losing hidden neighbours after the search.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from .db import SurrealStore
from .errors import QueryExecutionError, SchemaMismatchError
from .retrieval.scope import Scope

#: The name of the ``DEFINE ACCESS ... TYPE RECORD`` readers sign in with.
READER_ACCESS = "kg_reader"


def enable_tenancy(store: SurrealStore) -> None:
    """Apply ``surql/tenancy.surql`` (idempotent). The store's schema must exist (ingest once, or
    call ``ensure_schema``): permissions on tables created later would silently be missing."""
    with _needs_schema(store):
        store.query("tenancy")


async def aenable_tenancy(store: SurrealStore) -> None:
    with _needs_schema(store):
        await store.aquery("tenancy")


def add_reader(store: SurrealStore, name: str, secret: str, access: Sequence[str]) -> None:
    """Create or update the reader ``name``, who signs in with ``secret`` and reads the documents
    carrying one of ``access``."""
    store.query("tenancy_reader", _reader(name, secret, access))


async def aadd_reader(store: SurrealStore, name: str, secret: str, access: Sequence[str]) -> None:
    await store.aquery("tenancy_reader", _reader(name, secret, access))


def remove_reader(store: SurrealStore, name: str) -> None:
    store.query("tenancy_remove_reader", {"name": name})


async def aremove_reader(store: SurrealStore, name: str) -> None:
    await store.aquery("tenancy_remove_reader", {"name": name})


@contextmanager
def _needs_schema(store: SurrealStore) -> Iterator[None]:
    try:
        yield
    except QueryExecutionError as error:
        if "does not exist" in str(error):
            raise SchemaMismatchError(
                f"{store.config.url} has no surreal-kgrag schema yet: ingest documents (or call ensure_schema) "
                f"before enable_tenancy ({error})"
            ) from error
        raise


def _reader(name: str, secret: str, access: Sequence[str]) -> dict[str, Any]:
    if not isinstance(name, str) or not name or not isinstance(secret, str) or not secret:
        raise ValueError("a reader needs a non-empty name and secret")
    return {"name": name, "secret": secret, "labels": list(Scope(access=access).access or ())}
