"""Exceptions users can act on. Every message says what was wrong and what to do about it."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import ValidationError


class KGRagError(Exception):
    """Base class of every error surreal-kgrag raises on purpose."""


class ConfigurationError(KGRagError, ValueError):
    """An argument or setting is invalid (bad URL, identifier, integer, model name...)."""


class StoreConnectionError(KGRagError):
    """The store could not be opened or reached."""


class StoreLockedError(StoreConnectionError):
    """An embedded ``surrealkv://`` store is already open in another process."""


class SchemaMismatchError(KGRagError):
    """The store was built with settings (such as the embedding dimension) that differ from these."""


class QueryExecutionError(KGRagError):
    """SurrealDB rejected a statement; the message names the query file and the server's reason."""


def is_conflict(error: BaseException) -> bool:
    """Whether SurrealDB refused a transaction because another one wrote the same keys meanwhile:
    trying it again may succeed."""
    return isinstance(error, QueryExecutionError) and "conflict" in str(error).lower()


class LoaderError(KGRagError):
    """An input could not be read. Batch loaders report it and move on instead of raising."""


class ModelNotAvailableError(KGRagError):
    """A model (spaCy pipeline, embedding model) is not installed; the message says how to install it."""


class StoreNotFoundError(StoreConnectionError):
    """An embedded store path holds no store (and the caller asked not to create one), or is not a
    folder a store can live in."""


class ScopeError(ConfigurationError, PermissionError):
    """A scoped caller asked to write outside its scope: labels it does not hold, or a document
    it cannot read."""


def validation_problems(error: ValidationError) -> list[tuple[str, str]]:
    """What pydantic found wrong, as (field path, problem) pairs: a validator's own message without
    pydantic's "Value error, " prefix, and neither the input (it may be huge or secret) nor a URL."""
    return [
        (".".join(str(part) for part in e["loc"]), str(e.get("ctx", {}).get("error") or e["msg"]))
        for e in error.errors(include_url=False, include_input=False)
    ]


def describe_validation(error: ValidationError, limit: int | None = None) -> str:
    """``validation_problems`` on one line: "field: problem; ..." (the first ``limit`` of them)."""
    return "; ".join(f"{field}: {problem}" if field else problem for field, problem in validation_problems(error)[:limit])
