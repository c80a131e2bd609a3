"""Loads the SurrealQL files shipped in ``surql/`` by name.

Every statement the package runs lives in one of those files. Values always travel as bound
``$params``; the only text ever substituted is a ``{{placeholder}}`` for what SurrealQL cannot take
as a parameter: an integer (vector dimension, HNSW settings, the k and ef of ``<|k,ef|>``), checked
to be a plain integer first; a filter condition compiled by ``surreal_kgrag.retrieval.filters``; or an
``Identifier`` (the name of a search index or table this package built), checked to be a plain name.

A block that several files need is written once, as a fragment in ``surql/fragments/``, and a file
takes it in with a line ``{{> name}}`` (expanded when the file is loaded, before placeholders are
filled, so a fragment's ``{{placeholders}}`` are its includer's). Like a file, a fragment may have a
``<name>.v<major>.surql`` variant for a server dialect. A figure that the Python and the SurrealQL
share is written once, in ``CONSTANTS``, and a file names it as ``{{name}}``: it is filled when the
file is loaded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from .errors import ConfigurationError


@dataclass(frozen=True)
class CompiledFilter:
    """A SurrealQL boolean condition and the values it binds: the one kind of text, besides checked
    integers, that ``render`` puts into a query. The filter compiler
    (``surreal_kgrag.retrieval.filters``) builds it from fixed operators, validated field paths and
    ``$param`` references only; it is evaluated on a row that has ``doc`` (the document record) and
    ``access`` (the document's access labels). ``document`` is the same condition on a document
    row itself (its own fields and labels), None when it has no such form."""

    condition: str
    params: dict[str, Any] = field(default_factory=dict)
    document: str | None = None

    def clause(self, keyword: str = "AND") -> str:
        """The condition prefixed by ``keyword``, or nothing when there is no condition."""
        return f"{keyword} ({self.condition})" if self.condition else ""

    def on_documents(self) -> CompiledFilter:
        """The condition as evaluated on document rows, binding the same values."""
        if self.document is None:
            raise ConfigurationError(f"the filter {self.condition!r} has no form on document rows")
        return CompiledFilter(self.document, self.params, self.document)


NO_FILTER = CompiledFilter("", document="")

#: Figures that the SurrealQL files and the Python share, filled into ``{{name}}`` when a file loads.
#: ``chunk_list_max``: a concept's chunks are listed in `concept_chunks` while at most this many
#: chunks mention it (``surreal_kgrag.schema.CHUNK_LIST_MAX``). ``exact_scan_chunks``: a filtered
#: search scans the chunks inside its filter exactly, instead of a filtered HNSW search, when they
#: number at most this many (``fragments/nearest_chunks.surql``), and the named documents with no
#: chunk near the question are scanned while their chunks add up to at most this many
#: (``fragments/named_passages.surql``). ``passing_documents``: the most
#: documents a count of the chunks inside a scope or filter reads (``count_chunks.surql``).
CONSTANTS: dict[str, int] = {"chunk_list_max": 32, "exact_scan_chunks": 500, "passing_documents": 10_000}

_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")
_INCLUDE = re.compile(r"^\{\{> *(\w+)\}\}[ \t]*$", re.MULTILINE)
_NAME = re.compile(r"^[a-z_][a-z0-9_]*$")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_COMMENT = re.compile(r"--[^\n]*")
_COMMENT_LINE = re.compile(r"^[ \t]*--[^\n]*\n?", re.MULTILINE)
# Statements that change records or definitions. A query that contains one waits while a search index is being
# rebuilt (see surreal_kgrag.indexes); a read that merely mentions the word only waits needlessly.
_WRITE = re.compile(r"\b(INSERT|UPSERT|UPDATE|DELETE|CREATE|RELATE|DEFINE|REMOVE|REBUILD|ALTER)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Identifier:
    """A name rendered into SurrealQL text: a search index or a table of the schema."""

    value: str

    def __post_init__(self) -> None:
        if not _IDENTIFIER.match(self.value):
            raise ConfigurationError(f"invalid SurrealQL identifier {self.value!r}")


Fragment = int | CompiledFilter | Identifier


def _surql_dirs() -> list[Path]:
    here = Path(__file__).resolve().parent
    # Installed wheel: surreal_kgrag/surql. Source checkout / editable install: <repo>/surql.
    return [d for d in (here / "surql", here.parent / "surql") if d.is_dir()]


@cache
def load(name: str, major_version: int = 3) -> str:
    """Return the text of ``surql/<name>.surql``, or of ``<name>.v<major>.surql`` when the server's
    major version needs its own dialect, with its ``{{> fragment}}`` lines expanded and its
    ``CONSTANTS`` filled. Its comments are kept: they hold declarations the store reads (``--
    idempotent:``, see ``surreal_kgrag.db.retry``); :func:`render` leaves them out of what is sent."""
    text = _expand(_read(name, major_version, ""), major_version, ())
    return _PLACEHOLDER.sub(lambda m: str(CONSTANTS.get(m.group(1), m.group(0))), text)


def _read(name: str, major_version: int, subfolder: str) -> str:
    if not _NAME.match(name):
        raise ConfigurationError(f"invalid SurrealQL file name {name!r}")
    for folder in _surql_dirs():
        folder = folder / subfolder
        for candidate in (folder / f"{name}.v{major_version}.surql", folder / f"{name}.surql"):
            if candidate.is_file():
                return candidate.read_text(encoding="utf-8")
    raise FileNotFoundError(f"SurrealQL file {subfolder}{name}.surql not found in {[str(d) for d in _surql_dirs()]}")


def _expand(text: str, major_version: int, including: tuple[str, ...]) -> str:
    def include(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in including:
            raise ConfigurationError(f"SurrealQL fragment {name} includes itself: {' -> '.join((*including, name))}")
        return _expand(_read(name, major_version, "fragments/"), major_version, (*including, name)).rstrip("\n")

    return _INCLUDE.sub(include, text)


@cache
def placeholders(text: str) -> frozenset[str]:
    """The ``{{name}}`` slots of a SurrealQL text."""
    return frozenset(_PLACEHOLDER.findall(text))


@cache
def writes(text: str) -> bool:
    """Whether a SurrealQL text (comments aside) contains a statement that changes records."""
    return bool(_WRITE.search(_COMMENT.sub("", text)))


@lru_cache(maxsize=1024)
def _code(text: str) -> str:
    """``text`` without its lines that are only a comment (a template is one cached string: its hash
    is computed once)."""
    return _COMMENT_LINE.sub("", text)


def render(text: str, **values: Fragment) -> str:
    """Fill ``{{name}}`` placeholders with integers, a filter condition compiled by
    ``surreal_kgrag.retrieval.filters`` (validated field paths and ``$param`` references only), or an
    ``Identifier``. Lines that are only a comment are left out: the engine parses the text on every
    request, and the graph mode's subgraph query is 60% comments (0.3-0.5 ms a search)."""
    text = _code(text)
    for key, value in values.items():
        if isinstance(value, (CompiledFilter, Identifier)):
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigurationError(f"{key} must be an integer, got {value!r}")

    def fill(match: re.Match[str]) -> str:
        key = match.group(1)
        if key not in values:
            raise ConfigurationError(f"no value given for {{{{{key}}}}} in SurrealQL template")
        value = values[key]
        if isinstance(value, CompiledFilter):
            return value.clause()
        if isinstance(value, Identifier):
            return value.value
        return str(int(value))

    return _PLACEHOLDER.sub(fill, text)
