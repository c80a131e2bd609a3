"""Loads the SurrealQL files shipped in ``surql/`` by name.

Every statement the package runs lives in one of those files. Values always travel as bound
``$params``; the only text ever substituted is a ``{{placeholder}}`` for an integer that SurrealQL
cannot take as a parameter (vector dimension, HNSW settings, the k and ef of ``<|k,ef|>``), and
those are checked to be plain integers first.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from .errors import ConfigurationError


@dataclass(frozen=True)
class CompiledFilter:
    """A SurrealQL boolean condition and the values it binds: the one kind of text, besides checked
    integers, that ``render`` puts into a query. The filter compiler
    (``surreal_kgrag.retrieval.filters``) builds it from fixed operators, validated field paths and
    ``$param`` references only; it is evaluated on a row that has ``doc`` (the document record) and
    ``access`` (the document's access labels)."""

    condition: str
    params: dict[str, Any] = field(default_factory=dict)

    def clause(self, keyword: str = "AND") -> str:
        """The condition prefixed by ``keyword``, or nothing when there is no condition."""
        return f"{keyword} ({self.condition})" if self.condition else ""


NO_FILTER = CompiledFilter("")

_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")
_NAME = re.compile(r"^[a-z_][a-z0-9_]*$")


def _surql_dirs() -> list[Path]:
    here = Path(__file__).resolve().parent
    # Installed wheel: surreal_kgrag/surql. Source checkout / editable install: <repo>/surql.
    return [d for d in (here / "surql", here.parent / "surql") if d.is_dir()]


@cache
def load(name: str, major_version: int = 3) -> str:
    """Return the text of ``surql/<name>.surql``, or of ``<name>.v<major>.surql`` when the server's
    major version needs its own dialect."""
    if not _NAME.match(name):
        raise ConfigurationError(f"invalid SurrealQL file name {name!r}")
    for folder in _surql_dirs():
        for candidate in (folder / f"{name}.v{major_version}.surql", folder / f"{name}.surql"):
            if candidate.is_file():
                return candidate.read_text(encoding="utf-8")
    raise FileNotFoundError(f"SurrealQL file {name}.surql not found in {[str(d) for d in _surql_dirs()]}")


def render(text: str, **values: int | CompiledFilter) -> str:
    """Fill ``{{name}}`` placeholders with integers, or with a :class:`CompiledFilter` condition
    (validated field paths and ``$param`` references only)."""
    for key, value in values.items():
        if not isinstance(value, CompiledFilter) and (isinstance(value, bool) or not isinstance(value, int)):
            raise ConfigurationError(f"{key} must be an integer, got {value!r}")

    def fill(match: re.Match[str]) -> str:
        key = match.group(1)
        if key not in values:
            raise ConfigurationError(f"no value given for {{{{{key}}}}} in SurrealQL template")
        value = values[key]
        return value.clause() if isinstance(value, CompiledFilter) else str(int(value))

    return _PLACEHOLDER.sub(fill, text)
