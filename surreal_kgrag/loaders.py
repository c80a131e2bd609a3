"""Turn files, folders and framework documents into :class:`SourceDocument` records.

Batch loading never raises for a bad input: it yields a :class:`LoadFailure` saying what was wrong
and goes on with the next one. Loaders do not sanitise content; text, titles and metadata pass
through verbatim.
"""

from __future__ import annotations

import codecs
import hashlib
import io
import json
import os
import re
import stat
from collections.abc import Iterable, Iterator
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import ConfigurationError, LoaderError
from .models import LoadFailure, SourceDocument

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

Result = Iterator[SourceDocument | LoadFailure]


class LoaderOptions(BaseModel):
    """How folders are walked and which JSON / JSON Lines fields hold what."""

    model_config = ConfigDict(frozen=True)

    glob: str = Field(default="**/*", min_length=1)
    text_field: str = Field(default="text", min_length=1)
    title_field: str = Field(default="title", min_length=1)
    id_field: str = Field(default="id", min_length=1)
    access_field: str = Field(default="access", min_length=1)
    follow_symlinks: bool = Field(
        default=False, description="read symlinks inside a folder whose target lies outside that folder"
    )
    max_file_bytes: int = Field(default=1 << 30, ge=1, description="larger files are reported and skipped unread")
    part_chars: int = Field(
        default=2_000_000,
        ge=1_000,
        description="a text file longer than this is read in parts of about this size, each its own document",
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
    max_file_bytes: int = 1 << 30,
    part_chars: int = 2_000_000,
) -> Iterator[SourceDocument | LoadFailure]:
    """Yield a document or a failure for everything in ``inputs``; never raises for a bad input.

    Strings and path-likes are paths (files or folders); ``SourceDocument`` objects pass through;
    LangChain and LlamaIndex documents are converted. Inside a folder, a symlink whose target lies
    outside the folder is reported and skipped unless ``follow_symlinks``; a file larger than
    ``max_file_bytes`` is reported and skipped unread; a text file longer than ``part_chars``
    characters is read a part at a time, each part a document keyed ``<path>#part-00001``, ...
    """
    options = _options(glob, text_field, title_field, id_field, access_field, follow_symlinks, max_file_bytes, part_chars)
    # A lone path is a common slip; iterating it would walk its characters.
    if isinstance(inputs, (str, os.PathLike, SourceDocument)):
        inputs = [inputs]
    for item in inputs:
        yield from _load_one(item, options)


def load_path(
    path: str | os.PathLike[str],
    *,
    glob: str = "**/*",
    text_field: str = "text",
    title_field: str = "title",
    id_field: str = "id",
    access_field: str = "access",
    follow_symlinks: bool = False,
    max_file_bytes: int = 1 << 30,
    part_chars: int = 2_000_000,
) -> Iterator[SourceDocument | LoadFailure]:
    """Load one file or folder; see :func:`iter_sources`."""
    options = _options(glob, text_field, title_field, id_field, access_field, follow_symlinks, max_file_bytes, part_chars)
    yield from _load_path(path, options)


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
        key=key or "text:" + _sha16(text),
        text=text,
        title=title,
        source=source,
        metadata=dict(metadata or {}),
        access=_access_list(access, "access"),
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


# --- dispatch ---------------------------------------------------------------------------------


def _options(
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


def _load_one(item: Any, options: LoaderOptions) -> Result:
    if isinstance(item, SourceDocument):
        yield item
    elif isinstance(item, (str, os.PathLike)):
        yield from _load_path(item, options)
    elif _is_langchain(item):
        yield _convert(from_langchain, item, options, "LangChain document")
    elif _is_llama_index(item):
        yield _convert(from_llama_index, item, options, "LlamaIndex document")
    else:
        kind = f"{type(item).__module__}.{type(item).__qualname__}"
        yield LoadFailure(
            source=f"<{kind}>",
            reason=f"unsupported input type {kind}; pass a file or folder path, a SourceDocument, "
            "a LangChain or LlamaIndex document, or wrap raw text with from_text()",
        )


def _is_langchain(item: Any) -> bool:
    return hasattr(item, "page_content") and hasattr(item, "metadata")


def _is_llama_index(item: Any) -> bool:
    has_text = callable(getattr(item, "get_content", None)) or hasattr(item, "text")
    return has_text and hasattr(item, "metadata") and (hasattr(item, "id_") or hasattr(item, "doc_id"))


def _convert(convert: Any, item: Any, options: LoaderOptions, what: str) -> SourceDocument | LoadFailure:
    try:
        return convert(item, access_field=options.access_field)
    except LoaderError as exc:
        ident = getattr(item, "id", None) or getattr(item, "id_", None)
        return LoadFailure(source=f"<{what} {ident}>" if ident else f"<{what}>", reason=str(exc))


def _framework_document(
    text: Any, metadata: dict[str, Any], doc_id: Any, framework: str, access_field: str
) -> SourceDocument:
    if not isinstance(text, str):
        raise LoaderError(f"{framework} document text must be a str, got {type(text).__name__}")
    if not text.strip():
        raise LoaderError(f"{framework} document {doc_id or ''} has empty text; there is nothing to index")
    access = _access_list(metadata.pop(access_field, None), f"metadata[{access_field!r}]")
    title = metadata.get("title")
    source = metadata.get("source") or metadata.get("file_path") or framework
    return SourceDocument(
        key=str(doc_id) if doc_id else f"{framework}:{_sha16(text)}",
        text=text,
        title=title if isinstance(title, str) and title else None,
        source=str(source),
        metadata=metadata,
        access=access,
    )


# --- paths ------------------------------------------------------------------------------------


def _load_path(path: str | os.PathLike[str], options: LoaderOptions) -> Result:
    if isinstance(path, str) and not path.strip():
        yield LoadFailure(source=repr(path), reason="empty path; pass a file or folder")
        return
    try:
        path = Path(path)
    except TypeError as exc:  # a path-like that returns bytes
        yield LoadFailure(source=repr(path), reason=f"invalid path: {exc}")
        return
    shown = path.absolute().as_posix()
    try:
        is_dir = stat.S_ISDIR(path.stat().st_mode)
    except FileNotFoundError:
        yield LoadFailure(source=shown, reason="no such file or directory")
        return
    except OSError as exc:
        yield LoadFailure(source=shown, reason=f"cannot access path: {_os_reason(exc)}")
        return
    except ValueError as exc:  # an embedded NUL character
        yield LoadFailure(source=repr(shown), reason=f"invalid path: {exc}")
        return
    if is_dir:
        yield from _load_folder(path, options)
    elif path.suffix.lower() not in SUPPORTED_SUFFIXES:
        supported = ", ".join(sorted(SUPPORTED_SUFFIXES))
        yield LoadFailure(
            source=shown, reason=f"unsupported file type {path.suffix or '(none)'!r}; supported: {supported}"
        )
    else:
        yield from _load_file(path, options)


def _load_folder(root: Path, options: LoaderOptions) -> Result:
    """Walk ``root`` without following symlinked folders, skipping hidden entries."""
    pattern = [p for p in options.glob.split("/") if p]
    if pattern[-1:] == ["**"]:
        pattern.append("*")  # files only: a bare "**" would match folders
    errors: list[OSError] = []
    matches: list[tuple[str, Path]] = []
    for dirpath, dirnames, filenames in os.walk(root, onerror=errors.append):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        folder = Path(dirpath)
        rel_folder = folder.relative_to(root).as_posix()
        for name in filenames:
            if name.startswith(".") or Path(name).suffix.lower() not in SUPPORTED_SUFFIXES:
                continue
            rel = name if rel_folder == "." else f"{rel_folder}/{name}"
            if _glob_match(rel.split("/"), pattern):
                matches.append((rel, folder / name))
    for exc in errors:
        where = Path(exc.filename).absolute().as_posix() if exc.filename else root.absolute().as_posix()
        yield LoadFailure(source=where, reason=f"cannot list folder: {_os_reason(exc)}")
    inside = root.resolve()
    for _, path in sorted(matches):
        if not options.follow_symlinks and path.is_symlink() and not _within(path, inside):
            yield LoadFailure(
                source=path.absolute().as_posix(),
                reason="symlink to a file outside the folder being ingested; not followed "
                "(pass the target itself, or follow_symlinks=True)",
            )
            continue
        yield from _load_file(path, options)


def _within(path: Path, folder: Path) -> bool:
    try:
        return path.resolve().is_relative_to(folder)
    except (OSError, RuntimeError):  # a broken link or a loop: reading it will say so
        return True


def _glob_match(parts: list[str], pattern: list[str]) -> bool:
    """Match path segments against glob segments: ``**`` spans folders, ``*`` stays in one."""
    if not pattern:
        return not parts
    head, rest = pattern[0], pattern[1:]
    if head == "**":
        return any(_glob_match(parts[i:], rest) for i in range(len(parts) + 1))
    return bool(parts) and fnmatchcase(parts[0], head) and _glob_match(parts[1:], rest)


def _load_file(path: Path, options: LoaderOptions) -> Result:
    shown = path.absolute().as_posix()
    suffix = path.suffix.lower()
    try:
        size = path.stat().st_size
        resolved = path.resolve().as_posix()
        if size > options.max_file_bytes:
            yield LoadFailure(
                source=resolved,
                reason=f"file has {size:,} bytes, more than max_file_bytes={options.max_file_bytes:,}; not read",
            )
            return
        if suffix in (".jsonl", ".ndjson"):
            yield from _load_jsonl(path, resolved, options)
            return
        if SUPPORTED_SUFFIXES[suffix] in _PLAIN_TYPES and size > options.part_chars:
            yield from _load_text_parts(path, resolved, options.part_chars)
            return
        data = path.read_bytes()
    except IsADirectoryError:
        yield LoadFailure(source=shown, reason="is a directory, not a file")
        return
    except OSError as exc:
        yield LoadFailure(source=shown, reason=f"cannot read file: {_os_reason(exc)}")
        return
    except RuntimeError as exc:  # Path.resolve() on Python < 3.13 reports symlink loops this way
        yield LoadFailure(source=shown, reason=f"cannot resolve path: {exc}")
        return
    if suffix == ".pdf":
        yield _load_pdf(path, data, resolved)
        return
    try:
        text = _decode(data)
    except LoaderError as exc:
        yield LoadFailure(source=resolved, reason=str(exc))
        return
    if suffix == ".json":
        yield from _load_json(text, resolved, options)
    elif suffix in (".html", ".htm"):
        yield _load_html(path, text, resolved)
    else:
        yield _load_text(path, text, resolved, SUPPORTED_SUFFIXES[suffix])


def _decode(data: bytes) -> str:
    if b"\x00" in data:
        raise LoaderError("binary file (contains NUL bytes), not a text document")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise LoaderError(f"not valid UTF-8 (bad byte at offset {exc.start}); re-save the file as UTF-8") from None
    if not text.strip():
        raise LoaderError("empty file; nothing to index")
    # Same newlines as text-mode open(), so a CRLF checkout hashes like an LF one.
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _os_reason(exc: OSError) -> str:
    if isinstance(exc, PermissionError):
        return "permission denied; check the file's permissions"
    return exc.strerror or str(exc)


# --- formats ----------------------------------------------------------------------------------

_MD_HEADING = re.compile(r"^ {0,3}#[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$")
_MD_FENCE = re.compile(r"^ {0,3}(```|~~~)")


_PLAIN_TYPES = frozenset({"text/plain", "text/markdown", "text/x-rst"})
_READ_BLOCK = 1 << 20  # characters decoded at a time from a text file read in parts


def _load_text_parts(path: Path, resolved: str, part_chars: int) -> Result:
    """A long text file, read twice a block at a time: once to check and count its parts, once to
    yield them. Each part is a document of its own, so memory stays bounded by ``part_chars``."""
    try:
        total = sum(1 for _ in _text_parts(path, part_chars))
    except LoaderError as exc:
        yield LoadFailure(source=resolved, reason=str(exc))
        return
    if total == 0:
        yield LoadFailure(source=resolved, reason="empty file; nothing to index")
        return
    content_type = SUPPORTED_SUFFIXES[path.suffix.lower()]
    title: str | None = None
    for number, text in enumerate(_text_parts(path, part_chars), start=1):
        if title is None:
            title = (_markdown_title(text) if content_type == "text/markdown" else None) or path.stem
        yield SourceDocument(
            key=f"{resolved}#part-{number:05d}",
            text=text,
            title=title,
            source=resolved,
            content_type=content_type,
            metadata={"file_name": path.name, "part": number, "parts": total},
        )


def _text_parts(path: Path, part_chars: int) -> Iterator[str]:
    """The non-blank parts of a UTF-8 text file, each at most ``part_chars`` characters, cut at a
    blank line, else a line end, else a sentence end, else a space, as late as possible."""
    decoder = codecs.getincrementaldecoder("utf-8-sig")()
    buffer = ""
    offset = 0
    with path.open("rb") as stream:
        while True:
            data = stream.read(_READ_BLOCK)
            if b"\x00" in data:
                raise LoaderError("binary file (contains NUL bytes), not a text document")
            try:
                buffer += decoder.decode(data, final=not data)
            except UnicodeDecodeError as exc:
                raise LoaderError(
                    f"not valid UTF-8 (bad byte at offset {offset + exc.start}); re-save the file as UTF-8"
                ) from None
            offset += len(data)
            # Same newlines as text-mode open(); a "\r" at the end may be half of a "\r\n".
            held = "\r" if data and buffer.endswith("\r") else ""
            buffer = buffer[: len(buffer) - len(held)].replace("\r\n", "\n").replace("\r", "\n")
            while len(buffer) > part_chars or (not data and buffer):
                cut = _cut(buffer, part_chars)
                if buffer[:cut].strip():
                    yield buffer[:cut]
                buffer = buffer[cut:]
            buffer += held
            if not data:
                return


def _cut(text: str, limit: int) -> int:
    if len(text) <= limit:
        return len(text)
    for separator in ("\n\n", "\n", ". ", " "):
        found = text.rfind(separator, limit // 2, limit)
        if found != -1:
            return found + len(separator)
    return limit


def find_unstorable(value: Any, where: str = "record") -> str | None:
    """Why ``value`` cannot be stored as it is (a lone surrogate in a string, an integer outside
    SurrealDB's signed 64 bits), naming where it sits; None when it can."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            return (
                f"{where} holds a lone surrogate {value[exc.start]!r} at character {exc.start}, which is not "
                "valid Unicode and cannot be stored; fix the source text"
            )
    elif isinstance(value, int) and not isinstance(value, bool):
        if not -(1 << 63) <= value < 1 << 63:
            return f"{where} holds the integer {value}, outside the signed 64-bit range SurrealDB stores; write it as a string"
    elif isinstance(value, dict):
        for key, item in value.items():
            problem = find_unstorable(key, f"a key of {where}") or find_unstorable(item, f"{where}[{key!r}]")
            if problem is not None:
                return problem
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            problem = find_unstorable(item, f"{where}[{index}]")
            if problem is not None:
                return problem
    return None


def _load_text(path: Path, text: str, resolved: str, content_type: str) -> SourceDocument:
    title = _markdown_title(text) if content_type == "text/markdown" else None
    return SourceDocument(
        key=resolved,
        text=text,
        title=title or path.stem,
        source=resolved,
        content_type=content_type,
        metadata={"file_name": path.name},
    )


def _markdown_title(text: str) -> str | None:
    in_fence = False
    for line in text.split("\n"):
        if _MD_FENCE.match(line):
            in_fence = not in_fence
        elif not in_fence and (m := _MD_HEADING.match(line)):
            return m.group(1)
    return None


def _load_html(path: Path, html: str, resolved: str) -> SourceDocument | LoadFailure:
    try:
        import trafilatura
    except ImportError as exc:
        return LoadFailure(source=resolved, reason=f"HTML needs trafilatura: pip install 'surreal-kgrag[html]' ({exc})")
    from lxml import etree

    metadata: dict[str, Any] = {"file_name": path.name}
    extracted = trafilatura.bare_extraction(
        html, include_comments=False, include_tables=True, favor_recall=True, with_metadata=True
    )
    text = (getattr(extracted, "text", None) or "").strip()
    title = getattr(extracted, "title", None)
    for field in ("author", "date"):
        value = getattr(extracted, field, None)
        if value:
            metadata[field] = value
    if not text or not title:
        try:
            tree = _html_tree(html)
        except (etree.ParserError, etree.XMLSyntaxError, ValueError) as exc:
            return LoadFailure(source=resolved, reason=f"cannot parse HTML: {exc}")
        title = title or _html_title(tree)
        text = text or _html_text(tree)
    if not text:
        return LoadFailure(source=resolved, reason="HTML page has no text content")
    return SourceDocument(
        key=resolved,
        text=text,
        title=title or path.stem,
        source=resolved,
        content_type="text/html",
        metadata=metadata,
    )


def _html_tree(html: str) -> Any:
    import lxml.html

    # Bytes, because lxml rejects str input that carries an XML encoding declaration.
    parser = lxml.html.HTMLParser(encoding="utf-8")
    return lxml.html.document_fromstring(html.encode("utf-8"), parser=parser)


def _html_title(tree: Any) -> str | None:
    node = tree.find(".//title")
    title = node.text_content().strip() if node is not None else ""
    return title or None


def _html_text(tree: Any) -> str:
    for bad in tree.xpath("//script|//style|//noscript|//template|//head"):
        bad.drop_tree()
    lines = (" ".join(line.split()) for line in tree.text_content().split("\n"))
    return "\n".join(line for line in lines if line)


def _load_pdf(path: Path, data: bytes, resolved: str) -> SourceDocument | LoadFailure:
    try:
        import pypdf
        from pypdf.errors import DependencyError, PyPdfError
    except ImportError as exc:
        return LoadFailure(source=resolved, reason=f"PDF needs pypdf: pip install 'surreal-kgrag[pdf]' ({exc})")
    if not data.strip():
        return LoadFailure(source=resolved, reason="empty file; nothing to index")
    # pypdf reports malformed input through many exception types, not only its own.
    malformed = (PyPdfError, ValueError, KeyError, TypeError, IndexError, AttributeError, AssertionError)
    page_number = 0
    try:
        reader = pypdf.PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            return LoadFailure(source=resolved, reason="encrypted PDF needs a password; save a decrypted copy")
        pages = []
        for page in reader.pages:
            page_number += 1
            pages.append(page.extract_text() or "")
        page_number = 0  # failures past this point are not about one page
        info = reader.metadata
        title = _pdf_field(info, "title")
        author = _pdf_field(info, "author")
    except DependencyError as exc:  # e.g. AES decryption without the cryptography package
        return LoadFailure(source=resolved, reason=f"PDF needs an extra package: {exc}")
    except malformed as exc:
        where = f" (page {page_number})" if page_number else ""
        return LoadFailure(source=resolved, reason=f"malformed PDF{where}: pypdf {type(exc).__name__}: {exc}")
    text = "\n\n".join(p.strip() for p in pages if p.strip())
    if not text:
        return LoadFailure(source=resolved, reason="PDF has no extractable text (scanned images?); run OCR on it first")
    metadata: dict[str, Any] = {"file_name": path.name, "pages": len(pages)}
    if author:
        metadata["author"] = author
    return SourceDocument(
        key=resolved,
        text=text,
        title=title or path.stem,
        source=resolved,
        content_type="application/pdf",
        metadata=metadata,
    )


def _pdf_field(info: Any, name: str) -> str | None:
    value = getattr(info, name, None) if info is not None else None
    if value is None:
        return None
    return str(value).strip() or None


# --- JSON records -----------------------------------------------------------------------------


def _load_jsonl(file: Path, path: str, options: LoaderOptions) -> Result:
    """One record per line, read a line at a time (memory does not grow with the file)."""
    seen: dict[str, str] = {}
    empty = True
    with file.open("rb") as stream:
        # Lines end at b"\n" only: JSON strings may hold U+2028 and friends verbatim.
        for number, raw in enumerate(stream, start=1):
            if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            if not raw.strip():
                continue
            empty = False
            if b"\x00" in raw:
                yield LoadFailure(source=path, line=number, reason="binary data (NUL bytes), not a JSON record")
                continue
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                yield LoadFailure(source=path, line=number, reason=f"not valid UTF-8 (bad byte at column {exc.start + 1})")
                continue
            yield _jsonl_record(line, number, path, seen, options)
    if empty:
        yield LoadFailure(source=path, reason="empty file; nothing to index")


def _jsonl_record(line: str, number: int, path: str, seen: dict[str, str], options: LoaderOptions) -> SourceDocument | LoadFailure:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        return LoadFailure(source=path, line=number, reason=f"malformed JSON: {exc.msg} (column {exc.colno})")
    spot = _Spot(path, f"{path}#L{number}", f"{path}:{number}", f"line {number}", number)
    return _record(record, spot, seen, options)


def _load_json(text: str, path: str, options: LoaderOptions) -> Result:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        yield LoadFailure(source=path, line=exc.lineno, reason=f"malformed JSON: {exc.msg} (column {exc.colno})")
        return
    if isinstance(data, dict):
        yield _record(data, _Spot(path, path, path, "", None), {}, options)
    elif isinstance(data, list):
        seen: dict[str, str] = {}
        for i, record in enumerate(data):
            yield _record(record, _Spot(path, f"{path}#{i}", f"{path}#{i}", f"record {i}", None), seen, options)
    else:
        yield LoadFailure(source=path, reason=f"JSON must be an object or an array of objects, not {_json_type(data)}")


class _Spot(NamedTuple):
    """Where a record sits: its file, fallback key, source label, and how failures name it."""

    path: str
    fallback_key: str
    source: str
    label: str
    line: int | None


def _record(record: Any, spot: _Spot, seen: dict[str, str], options: LoaderOptions) -> SourceDocument | LoadFailure:
    """One JSON object -> a document; ``seen`` maps the ids already used in this file to their spot."""

    def fail(reason: str) -> LoadFailure:
        # JSON Lines failures carry the line number; JSON array ones name the record index.
        prefix = f"{spot.label}: " if spot.line is None and spot.label else ""
        return LoadFailure(source=spot.path, line=spot.line, reason=prefix + reason)

    if not isinstance(record, dict):
        return fail(f"expected a JSON object, got {_json_type(record)}")
    text_field, title_field, id_field, access_field = (
        options.text_field,
        options.title_field,
        options.id_field,
        options.access_field,
    )
    text = record.get(text_field)
    if text is None:
        return fail(f"no {text_field!r} field; every record needs its text")
    if not isinstance(text, str):
        return fail(f"{text_field!r} must be a string, got {_json_type(text)}")
    if not text.strip():
        return fail(f"{text_field!r} is empty; there is nothing to index")
    key, title = record.get(id_field), record.get(title_field)
    for name, value in ((id_field, key), (title_field, title)):
        if isinstance(value, (dict, list)):
            return fail(f"{name!r} must be a string or number, got {_json_type(value)}")
    key = spot.fallback_key if key is None or key == "" else str(key)
    if key in seen:
        return fail(f"duplicate {id_field!r} {key!r} (already used at {seen[key]}); ids must be unique")
    seen[key] = spot.label or "the top level"
    try:
        access = _access_list(record.get(access_field), repr(access_field))
    except LoaderError as exc:
        return fail(str(exc))
    known = {text_field, title_field, id_field, access_field}
    problem = find_unstorable(record)
    if problem is not None:
        return fail(problem)
    return SourceDocument(
        key=key,
        text=text,
        title=None if title is None or title == "" else str(title),
        source=spot.source,
        metadata={k: v for k, v in record.items() if k not in known},
        access=access,
    )


def _access_list(value: Any, name: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise LoaderError(f"{name} must be a list of strings, got {value!r}")
    return list(value)


def _json_type(value: Any) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")


def _sha16(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
