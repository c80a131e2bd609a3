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
    ".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    ".jsonl": "application/x-ndjson",
    ".ndjson": "application/x-ndjson",
    ".json": "application/json",
}


PLAIN_TYPES = frozenset({"text/plain", "text/markdown", "text/x-rst"})


Result = Iterator[SourceDocument | LoadFailure]


#: Default caps on what one input may cost (see :class:`LoaderOptions`).
MAX_FILE_BYTES = 256 << 20
MAX_LINE_BYTES = 64 << 20
MAX_PDF_PAGES = 5_000
MAX_PDF_CHARS = 20_000_000
MAX_PDF_MEMORY = 2 << 30
PDF_TIMEOUT = 300.0
_PDF_MEMORY = (
    "a PDF that needs more address space to read (pdfium reads it in a child process of its own: a content stream can "
    "inflate far beyond the file's size) is reported and skipped; not enforced where Python has no resource module"
)
_PDF_TIMEOUT = "a PDF that takes more seconds to read (in the child process) is reported and skipped"


class LoaderOptions(BaseModel):
    """How folders are walked, which JSON / JSON Lines fields hold what, and what one input may cost.

    An input past a cap is reported as that input's failure (naming the size found, the limit and
    the option to raise) and skipped; the rest of the batch loads as usual."""

    model_config = ConfigDict(frozen=True)

    glob: str = Field(default="**/*", min_length=1)
    text_field: str = Field(default="text", min_length=1)
    title_field: str = Field(default="title", min_length=1)
    id_field: str = Field(default="id", min_length=1)
    access_field: str = Field(default="access", min_length=1)
    follow_symlinks: bool = Field(
        default=False, description="read symlinks (to files or folders) inside a folder whose target lies outside that folder"
    )
    max_file_bytes: int = Field(
        default=MAX_FILE_BYTES,
        ge=1,
        le=1 << 40,
        description="a larger file that is read whole (JSON, HTML, PDF, short text) is reported and skipped unread; "
        "JSON Lines and long text, read a line or a part at a time, may be larger but not grow past their size while read",
    )
    max_line_bytes: int = Field(
        default=MAX_LINE_BYTES,
        ge=1,
        le=1 << 32,
        description="a longer JSON Lines line is reported and skipped without being held; the file's other lines load",
    )
    max_pdf_pages: int = Field(
        default=MAX_PDF_PAGES, ge=1, le=1_000_000, description="a PDF with more pages is reported and skipped before any text is read"
    )
    max_pdf_chars: int = Field(
        default=MAX_PDF_CHARS,
        ge=1_000,
        le=1 << 31,
        description="a PDF whose text is longer (compressed text can expand far beyond the file's size) is reported and skipped, "
        "checked a page at a time before the page's text is copied out",
    )
    max_pdf_memory: int = Field(default=MAX_PDF_MEMORY, ge=64 << 20, le=1 << 40, description=_PDF_MEMORY)
    pdf_timeout: float = Field(default=PDF_TIMEOUT, gt=0, le=86_400, description=_PDF_TIMEOUT)
    part_chars: int = Field(
        default=1_000_000,
        ge=1_000,
        description="a text file longer than this is read in parts of about this size, each its own document",
    )


def loader_options(**values: Any) -> LoaderOptions:
    try:
        return LoaderOptions(**values)
    except ValidationError as exc:
        raise ConfigurationError(f"invalid loader options: {exc}") from exc


def grew_past(max_file_bytes: int) -> str:
    """Why a file that passed the size check but grew while it was read is not loaded."""
    return f"the file grew past max_file_bytes={max_file_bytes:,} while it was read; not loaded"


def os_reason(exc: OSError) -> str:
    """What an OS error says of a path, as a failure's reason."""
    if isinstance(exc, PermissionError):
        return "permission denied; check the file's permissions"
    return exc.strerror or str(exc)


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
