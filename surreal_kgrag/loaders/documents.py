"""The loaders' entry points: paths, framework documents and raw text become
:class:`SourceDocument` records (or a :class:`LoadFailure` saying why not)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from ..errors import LoaderError
from ..models import LoadFailure, SourceDocument
from .files import load_entry
from .options import (
    MAX_FILE_BYTES,
    MAX_LINE_BYTES,
    MAX_PDF_CHARS,
    MAX_PDF_MEMORY,
    MAX_PDF_PAGES,
    PDF_TIMEOUT,
    LoaderOptions,
    Result,
    access_list,
    guarded,
    loader_options,
    sha16,
)


def iter_sources(
    inputs: Iterable[str | os.PathLike[str] | SourceDocument | Any],
    *,
    glob: str = "**/*",
    text_field: str = "text",
    title_field: str = "title",
    id_field: str = "id",
    access_field: str = "access",
    follow_symlinks: bool = False,
    max_file_bytes: int = MAX_FILE_BYTES,
    max_line_bytes: int = MAX_LINE_BYTES,
    max_pdf_pages: int = MAX_PDF_PAGES,
    max_pdf_chars: int = MAX_PDF_CHARS,
    max_pdf_memory: int = MAX_PDF_MEMORY,
    pdf_timeout: float = PDF_TIMEOUT,
    part_chars: int = 1_000_000,
) -> Iterator[SourceDocument | LoadFailure]:
    """Yield a document or a failure for everything in ``inputs``; never raises for a bad input.

    Strings and path-likes are paths (files or folders); ``SourceDocument`` objects pass through;
    LangChain and LlamaIndex documents are converted. Inside a folder, a symlink (to a file or a
    folder) whose target lies outside the folder is reported and skipped unless ``follow_symlinks``; a text file longer than
    ``part_chars`` characters is read a part at a time, each part a document keyed
    ``<path>#part-00001``, ...

    Caps on what one input may cost, each reported as that input's failure (the rest load): a file
    read whole (JSON, HTML, PDF, short text) larger than ``max_file_bytes`` (256 MiB) is skipped
    unread, while one read a line or a part at a time (JSON Lines, long text) may be larger; a JSON
    Lines line longer than ``max_line_bytes`` (64 MiB) is skipped; a PDF with more than
    ``max_pdf_pages`` pages (5,000) is skipped before its text is read, and one whose text grows past
    ``max_pdf_chars`` characters (20,000,000) is skipped once it does. PDFs are read in a child
    process: one that needs more than ``max_pdf_memory`` bytes (2 GiB) or ``pdf_timeout`` seconds
    (300) to read, or crashes pdfium, is skipped.
    """
    options = loader_options(
        glob=glob,
        text_field=text_field,
        title_field=title_field,
        id_field=id_field,
        access_field=access_field,
        follow_symlinks=follow_symlinks,
        max_file_bytes=max_file_bytes,
        max_line_bytes=max_line_bytes,
        max_pdf_pages=max_pdf_pages,
        max_pdf_chars=max_pdf_chars,
        max_pdf_memory=max_pdf_memory,
        pdf_timeout=pdf_timeout,
        part_chars=part_chars,
    )
    # A lone path is a common slip; iterating it would walk its characters.
    if isinstance(inputs, (str, os.PathLike, SourceDocument)):
        inputs = [inputs]
    for position, item in enumerate(inputs):
        yield from guarded(_load_one(item, options, position), _label(item, position))


def load_path(path: str | os.PathLike[str], **options: Any) -> Iterator[SourceDocument | LoadFailure]:
    """Load one file or folder; ``options`` are :func:`iter_sources`'s."""
    return iter_sources([path], **options)


def from_text(
    text: str,
    *,
    key: str | None = None,
    title: str | None = None,
    metadata: dict[str, Any] | None = None,
    access: list[str] | None = None,
    source: str = "text",
) -> SourceDocument:
    """Wrap a string; the key defaults to a hash of the text, so the same text keeps its key."""
    if not isinstance(text, str):
        raise LoaderError(f"text must be a str, got {type(text).__name__}")
    if not text.strip():
        raise LoaderError("text is empty; there is nothing to index")
    if key is not None and not key:
        raise LoaderError("key must not be empty; leave it out to derive one from the text")
    return SourceDocument(
        key=key or "text:" + sha16(text),
        text=text,
        title=title,
        source=source,
        metadata=dict(metadata or {}),
        access=access_list(access, "access"),
    )


def from_langchain(doc: Any, *, access_field: str = "access") -> SourceDocument:
    """Convert a LangChain ``Document`` (anything with ``page_content`` and ``metadata``).

    The key is ``doc.id`` when set; otherwise it is derived from the text, so set ids if edited
    documents should replace their earlier versions. ``metadata[access_field]`` (a list of str)
    becomes the document's access list.
    """
    text = getattr(doc, "page_content", None)
    metadata = dict(getattr(doc, "metadata", None) or {})
    doc_id = getattr(doc, "id", None)
    return _framework_document(text, metadata, doc_id, "langchain", access_field)


def from_llama_index(doc: Any, *, access_field: str = "access") -> SourceDocument:
    """Convert a LlamaIndex ``Document`` or ``TextNode`` (``get_content()`` or ``text``, ``metadata``).

    LlamaIndex assigns a random id when none is given; set ``doc_id`` (or use
    ``SimpleDirectoryReader(filename_as_id=True)``) so keys stay stable across runs.
    """
    get_content = getattr(doc, "get_content", None)
    text = get_content() if callable(get_content) else getattr(doc, "text", None)
    metadata = dict(getattr(doc, "metadata", None) or {})
    doc_id = getattr(doc, "doc_id", None) or getattr(doc, "id_", None)
    return _framework_document(text, metadata, doc_id, "llama_index", access_field)


def _load_one(item: Any, options: LoaderOptions, position: int) -> Result:
    if isinstance(item, SourceDocument):
        yield item
    elif isinstance(item, (str, os.PathLike)):
        yield from load_entry(item, options)
    elif _is_langchain(item):
        yield _convert(from_langchain, item, options, "LangChain document", position)
    elif _is_llama_index(item):
        yield _convert(from_llama_index, item, options, "LlamaIndex document", position)
    else:
        kind = f"{type(item).__module__}.{type(item).__qualname__}"
        yield LoadFailure(
            source=_label(item, position),
            reason=f"unsupported input type {kind}; pass a file or folder path, a SourceDocument, "
            "a LangChain or LlamaIndex document, or wrap raw text with from_text()",
        )


def _label(item: Any, position: int) -> str:
    """How a failure names an input: its path, else its type and place among the inputs."""
    if isinstance(item, (str, os.PathLike)):
        try:
            return Path(item).absolute().as_posix()
        except (TypeError, ValueError):
            return repr(item)
    return f"<{type(item).__module__}.{type(item).__qualname__} #{position}>"


def _is_langchain(item: Any) -> bool:
    return hasattr(item, "page_content") and hasattr(item, "metadata")


def _is_llama_index(item: Any) -> bool:
    has_text = callable(getattr(item, "get_content", None)) or hasattr(item, "text")
    return has_text and hasattr(item, "metadata") and (hasattr(item, "id_") or hasattr(item, "doc_id"))


def _convert(convert: Any, item: Any, options: LoaderOptions, what: str, position: int) -> SourceDocument | LoadFailure:
    try:
        return convert(item, access_field=options.access_field)
    except LoaderError as exc:
        ident = getattr(item, "id", None) or getattr(item, "id_", None)
        return LoadFailure(source=f"<{what} {ident}>" if ident else f"<{what} #{position}>", reason=str(exc))


def _framework_document(text: Any, metadata: dict[str, Any], doc_id: Any, framework: str, access_field: str) -> SourceDocument:
    if not isinstance(text, str):
        raise LoaderError(f"{framework} document text must be a str, got {type(text).__name__}")
    if not text.strip():
        raise LoaderError(f"{framework} document {doc_id or ''} has empty text; there is nothing to index")
    access = access_list(metadata.pop(access_field, None), f"metadata[{access_field!r}]")
    title = metadata.get("title")
    key = str(doc_id) if doc_id else f"{framework}:{sha16(text)}"
    # Without a source of its own, its key names it (in failures too): "langchain" named none.
    source = metadata.get("source") or metadata.get("file_path") or (f"{framework}:{key}" if doc_id else key)
    return SourceDocument(
        key=key,
        text=text,
        title=title if isinstance(title, str) and title else None,
        source=str(source),
        metadata=metadata,
        access=access,
    )
