"""The search indexes and their upkeep; they live in ``surreal_kgrag.db.catalog`` (state) and
``surreal_kgrag.db.maintenance`` (rebuilds). This path stays for imports."""

from .db.catalog import PLACEHOLDERS, SEARCH_INDEXES, IndexCatalog, IndexReport, IndexSettings, IndexState, Lease, SearchIndex
from .db.maintenance import DRAIN_TIMEOUT, after_writes, load_catalog, optimize, rebuild, save_catalog

__all__ = [
    "DRAIN_TIMEOUT",
    "PLACEHOLDERS",
    "SEARCH_INDEXES",
    "IndexCatalog",
    "IndexReport",
    "IndexSettings",
    "IndexState",
    "Lease",
    "SearchIndex",
    "after_writes",
    "load_catalog",
    "optimize",
    "rebuild",
    "save_catalog",
]
