"""``SurrealStore`` and ``StoreConfig``; they live in ``surreal_kgrag.db`` (this path stays for imports)."""

from .db.config import DEFAULT_URL, StoreConfig, checked_int, embedded_path, url_scheme, validate_identifier
from .db.store import Placeholder, QueryStep, SurrealStore

__all__ = [
    "DEFAULT_URL",
    "Placeholder",
    "QueryStep",
    "StoreConfig",
    "SurrealStore",
    "checked_int",
    "embedded_path",
    "url_scheme",
    "validate_identifier",
]
