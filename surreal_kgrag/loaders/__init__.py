"""Turn files, folders and framework documents into :class:`SourceDocument` records.

Batch loading never raises for a bad input: it yields a :class:`LoadFailure` saying what was wrong
and goes on with the next one. Loaders do not sanitise content; text, titles and metadata pass
through verbatim.
"""

from __future__ import annotations

from .documents import from_langchain, from_llama_index, from_text, iter_sources, load_path
from .options import SUPPORTED_SUFFIXES, LoaderOptions
from .records import find_unstorable

__all__ = [
    "SUPPORTED_SUFFIXES",
    "LoaderOptions",
    "find_unstorable",
    "from_langchain",
    "from_llama_index",
    "from_text",
    "iter_sources",
    "load_path",
]
