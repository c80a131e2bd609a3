"""Connections under ``SurrealStore``; they live in ``surreal_kgrag.db.connection`` (this path stays for imports)."""

from .db.config import EMBEDDED_SCHEMES, REMOTE_SCHEMES, is_memory, url_scheme
from .db.connection import Connection, EmbeddedConnection, Job, RemoteConnection
from .db.loops import run_sync

__all__ = [
    "EMBEDDED_SCHEMES",
    "REMOTE_SCHEMES",
    "Connection",
    "EmbeddedConnection",
    "Job",
    "RemoteConnection",
    "is_memory",
    "run_sync",
    "url_scheme",
]
