"""The database layer, from the bottom up: ``config`` (URLs, names, checks), ``catalog`` (the
search indexes as plain state), ``connection`` (engine handles and sockets), ``maintenance``
(index rebuilds), ``store`` (``SurrealStore``, what the rest of the package uses)."""

from .catalog import IndexReport, IndexSettings, IndexState
from .config import DEFAULT_URL, StoreConfig, checked_int, validate_identifier
from .store import SurrealStore

__all__ = [
    "DEFAULT_URL",
    "IndexReport",
    "IndexSettings",
    "IndexState",
    "StoreConfig",
    "SurrealStore",
    "checked_int",
    "validate_identifier",
]
