"""What the loaders accept and how they read it: supported file types, options, and small helpers
shared by the loaders."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import ConfigurationError, LoaderError
from ..models import LoadFailure, SourceDocument

SUPPORTED_SUFFIXES: dict[str, str] = {
    ".txt": "text/plain",
    ".text": "text/plain",
    ".rst": "text/x-rst",
    ".log": "text/plain",
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".html": "text/html",
    ".htm": "text/html",
    ".pdf": "application/pdf",
    ".jsonl": "application/x-ndjson",
    ".ndjson": "application/x-ndjson",
    ".json": "application/json",
}


PLAIN_TYPES = frozenset({"text/plain", "text/markdown", "text/x-rst"})


Result = Iterator[SourceDocument | LoadFailure]


class LoaderOptions(BaseModel):
    """How folders are walked and which JSON / JSON Lines fields hold what."""

    model_config = ConfigDict(frozen=True)

    glob: str = Field(default="**/*", min_length=1)
    text_field: str = Field(default="text", min_length=1)
    title_field: str = Field(default="title", min_length=1)
    id_field: str = Field(default="id", min_length=1)
    access_field: str = Field(default="access", min_length=1)
    follow_symlinks: bool = Field(default=False, description="read symlinks inside a folder whose target lies outside that folder")
    max_file_bytes: int = Field(default=1 << 30, ge=1, description="larger files are reported and skipped unread")
    part_chars: int = Field(
        default=1_000_000,
        ge=1_000,
        description="a text file longer than this is read in parts of about this size, each its own document",
    )


def loader_options(
    glob: str,
    text_field: str,
    title_field: str,
    id_field: str,
    access_field: str,
    follow_symlinks: bool,
    max_file_bytes: int,
    part_chars: int,
) -> LoaderOptions:
    try:
        return LoaderOptions(
            glob=glob,
            text_field=text_field,
            title_field=title_field,
            id_field=id_field,
            access_field=access_field,
            follow_symlinks=follow_symlinks,
            max_file_bytes=max_file_bytes,
            part_chars=part_chars,
        )
    except ValidationError as exc:
        raise ConfigurationError(f"invalid loader options: {exc}") from exc


def access_list(value: Any, name: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise LoaderError(f"{name} must be a list of strings, got {value!r}")
    return list(value)


def sha16(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def guarded(results: Result, source: str) -> Result:
    """``results``, with an error raised while producing them reported as a failure of ``source``.
    A backstop: the readers report the errors they know of; whatever else one input raises must not
    end the loading of the others."""
    try:
        yield from results
    except Exception as exc:  # reported, not hidden: the failure names the input and the error
        yield LoadFailure(source=source, reason=f"could not be loaded: unexpected {type(exc).__name__}: {exc}")
