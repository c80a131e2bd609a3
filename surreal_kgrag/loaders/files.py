"""Files: a path's documents (a folder's files as ``folders`` finds them), size caps, decoding,
and long text files read in parts."""

from __future__ import annotations

import codecs
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from ..errors import LoaderError
from ..models import LoadFailure, SourceDocument
from .folders import folder_files
from .formats import MarkdownState, html_document, markdown_part_layout, markdown_title, text_document
from .metadata import OPENING_CHARS, file_metadata, fitting_title
from .options import PLAIN_TYPES, SUPPORTED_SUFFIXES, LoaderOptions, Result, grew_past, guarded, os_reason
from .pdf import pdf_document
from .records import json_documents, jsonl_documents
from .word import docx_document


def load_entry(path: str | os.PathLike[str], options: LoaderOptions) -> Result:
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
        yield LoadFailure(source=shown, reason=f"cannot access path: {os_reason(exc)}")
        return
    except ValueError as exc:  # an embedded NUL character
        yield LoadFailure(source=repr(shown), reason=f"invalid path: {exc}")
        return
    if is_dir:
        for found in folder_files(path, options):
            if isinstance(found, LoadFailure):
                yield found
            else:
                yield from _load_file(found, options)
    elif path.suffix.lower() not in SUPPORTED_SUFFIXES:
        supported = ", ".join(sorted(SUPPORTED_SUFFIXES))
        yield LoadFailure(source=shown, reason=f"unsupported file type {path.suffix or '(none)'!r}; supported: {supported}")
    else:
        yield from _load_file(path, options)


def _load_file(path: Path, options: LoaderOptions) -> Result:
    """One file's documents, or failures; whatever else reading it raises is its failure too."""
    yield from guarded(_read_file(path, options), path.absolute().as_posix())


def _read_file(path: Path, options: LoaderOptions) -> Result:
    shown = path.absolute().as_posix()
    suffix = path.suffix.lower()
    try:
        info = path.stat()
        resolved = path.resolve().as_posix()
    except OSError as exc:
        yield LoadFailure(source=shown, reason=f"cannot read file: {os_reason(exc)}")
        return
    except RuntimeError as exc:  # Path.resolve() on Python < 3.13 reports symlink loops this way
        yield LoadFailure(source=shown, reason=f"cannot resolve path: {exc}")
        return
    size, limit = info.st_size, options.max_file_bytes
    if stat.S_ISDIR(info.st_mode):
        yield LoadFailure(source=shown, reason="is a directory, not a file")
        return
    if not stat.S_ISREG(info.st_mode):  # a device or FIFO has no size to check, and may never end
        yield LoadFailure(source=resolved, reason="not a regular file (a device, FIFO or socket); not read")
        return
    # JSON Lines and long text are read a line or a part at a time: their memory does not grow with
    # the file, so the cap is only on how far one may grow while it is read
    streamed = suffix in (".jsonl", ".ndjson") or (SUPPORTED_SUFFIXES[suffix] in PLAIN_TYPES and size > options.part_chars)
    if size > limit and not streamed:
        yield LoadFailure(
            source=resolved,
            reason=f"file has {size:,} bytes, more than max_file_bytes={limit:,}; not read (raise max_file_bytes to load it)",
        )
        return
    limit = max(limit, size)
    options = options.model_copy(update={"max_file_bytes": limit})
    try:
        if suffix in (".jsonl", ".ndjson"):
            yield from jsonl_documents(path, resolved, options)
            return
        if streamed:
            yield from _load_text_parts(path, resolved, options.part_chars, limit)
            return
        with path.open("rb") as stream:
            data = _read_at_most(stream, size, limit)
    except IsADirectoryError:
        yield LoadFailure(source=shown, reason="is a directory, not a file")
        return
    except OSError as exc:
        yield LoadFailure(source=shown, reason=f"cannot read file: {os_reason(exc)}")
        return
    if data is None:
        yield LoadFailure(source=resolved, reason=grew_past(limit))
        return
    if suffix == ".pdf":
        yield pdf_document(
            path,
            data,
            resolved,
            max_pages=options.max_pdf_pages,
            max_chars=options.max_pdf_chars,
            max_memory=options.max_pdf_memory,
            timeout=options.pdf_timeout,
        )
        return
    if suffix == ".docx":
        yield docx_document(path, data, resolved, max_bytes=options.max_file_bytes)
        return
    try:
        text = _decode(data, html=suffix in (".html", ".htm"))
    except LoaderError as exc:
        yield LoadFailure(source=resolved, reason=str(exc))
        return
    if suffix == ".json":
        yield from json_documents(text, resolved, options)
    elif suffix in (".html", ".htm"):
        yield html_document(path, text, resolved)
    else:
        yield text_document(path, text, resolved, SUPPORTED_SUFFIXES[suffix])


def _read_at_most(stream: BinaryIO, size: int, limit: int) -> bytes | None:
    """The whole file, ``size`` bytes when it is as its stat said; None when it grew past ``limit``
    since. (``read(limit + 1)`` would allocate the limit up front, whatever the file's size.)"""
    data = stream.read(size + 1)
    if len(data) <= size:
        return data
    blocks, total = [data], len(data)
    while total <= limit and (block := stream.read(_READ_BLOCK)):
        blocks.append(block)
        total += len(block)
    return None if total > limit else b"".join(blocks)


def _decode(data: bytes, *, html: bool = False) -> str:
    if b"\x00" in data:
        raise LoaderError(_nul_reason(data))
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        declared = _html_charset(data) if html else None
        if declared is None:
            raise LoaderError(f"not valid UTF-8 (bad byte at offset {exc.start}); re-save the file as UTF-8") from None
        try:
            text = data.decode(declared, "kgrag-c1" if declared == "cp1252" else "strict")
        except UnicodeDecodeError as declared_exc:
            raise LoaderError(
                f"neither valid UTF-8 nor valid {declared}, the charset the page declares "
                f"(bad byte at offset {declared_exc.start}); re-save the file as UTF-8"
            ) from None
    if not text.strip():
        raise LoaderError("empty file; nothing to index")
    # Same newlines as text-mode open(), so a CRLF checkout hashes like an LF one.
    return text.replace("\r\n", "\n").replace("\r", "\n")


# <meta charset="..."> or <meta http-equiv="Content-Type" content="text/html; charset=...">, which a
# browser looks for in the first 1,024 bytes.
_META_CHARSET = re.compile(rb"""<meta\b[^>]*?charset\s*=\s*["']?\s*([A-Za-z0-9._:-]+)""", re.IGNORECASE)
# As browsers read them (WHATWG Encoding): a page labelled Latin-1 or ASCII is windows-1252, whose
# five unassigned bytes are the C1 controls of the same number.
_CHARSET_AS_BROWSERS_READ = {"iso8859-1": "cp1252", "ascii": "cp1252"}
codecs.register_error("kgrag-c1", lambda exc: (exc.object[exc.start : exc.end].decode("latin-1"), exc.end))  # type: ignore[attr-defined]


def _html_charset(data: bytes) -> str | None:
    """The Python codec of the charset an HTML page that is not UTF-8 declares, if Python has it and
    it reads ASCII as ASCII (as the page's own <meta> was read): not EBCDIC, UTF-7, UTF-16 (a page
    without NUL bytes is none; browsers ignore the label) or a codec that is no charset (base64)."""
    found = _META_CHARSET.search(data[:1024])
    if found is None:
        return None
    label = found.group(1).decode("ascii").lower()
    try:
        name = codecs.lookup(label).name
        if name == "utf-7" or name.startswith(("utf-16", "utf-32")) or _ASCII.decode(name) != _ASCII.decode("ascii"):
            return None
    except (LookupError, UnicodeError, TypeError):  # a codec of bytes to bytes, or one that refuses everything
        return None
    return _CHARSET_AS_BROWSERS_READ.get(name, name)


_ASCII = bytes(range(0x20, 0x7F))


def _nul_reason(start: bytes) -> str:
    """Why a file holding NUL bytes is not read: UTF-16 or UTF-32 text (saved as "Unicode" by
    Notepad, or by PowerShell's ``>``) starts with a byte-order mark; anything else is binary."""
    for bom, encoding in ((codecs.BOM_UTF32_LE, "UTF-32"), (codecs.BOM_UTF32_BE, "UTF-32"),
                          (codecs.BOM_UTF16_LE, "UTF-16"), (codecs.BOM_UTF16_BE, "UTF-16")):
        if start.startswith(bom):
            return f"{encoding} text (it starts with a {encoding} byte-order mark); re-save the file as UTF-8"
    sample = start[: _UTF16_SAMPLE]
    high, low = sample[1::2], sample[0::2]  # little-endian ASCII: every odd byte NUL (big-endian: every even one)
    for zeros, letters in ((high, low), (low, high)):
        if len(zeros) >= 2 and zeros.count(0) >= 0.9 * len(zeros) and letters.count(0) == 0:
            return "UTF-16 text without a byte-order mark (every other byte is NUL); re-save the file as UTF-8"
    return "binary file (contains NUL bytes), not a text document"


_UTF16_SAMPLE = 4096  # bytes of a file's start looked at for UTF-16 without a byte-order mark


_READ_BLOCK = 1 << 20  # bytes read at a time from a text file read in parts or one that grew


def _load_text_parts(path: Path, resolved: str, part_chars: int, max_bytes: int) -> Result:
    """A long text file, read twice a block at a time: once to check and count its parts, once to
    yield them. Each part is a document of its own, so memory stays bounded by ``part_chars``."""
    try:
        total = sum(1 for _ in _text_parts(path, part_chars, max_bytes))
    except LoaderError as exc:
        yield LoadFailure(source=resolved, reason=str(exc))
        return
    if total == 0:
        yield LoadFailure(source=resolved, reason="empty file; nothing to index")
        return
    content_type = SUPPORTED_SUFFIXES[path.suffix.lower()]
    markdown = content_type == "text/markdown"
    title: str | None = None
    found: dict[str, Any] = {}  # the dates its name or opening give, as a file read whole has
    state = MarkdownState()  # a Markdown part's sections continue the previous part's
    try:
        for number, text in enumerate(_text_parts(path, part_chars, max_bytes), start=1):
            if title is None:
                title = (fitting_title(markdown_title(text)) if markdown else None) or path.stem
                found = file_metadata(path, text[:OPENING_CHARS])
            layout = None
            if markdown:
                layout, state = markdown_part_layout(text, state)
            yield SourceDocument(
                key=f"{resolved}#part-{number:05d}",
                text=text,
                title=title,
                source=resolved,
                content_type=content_type,
                metadata={"file_name": path.name, **found, "part": number},
                layout=layout,
                parts=total,
            )
    except LoaderError as exc:  # it passed the first reading: the file changed in between
        yield LoadFailure(source=resolved, reason=f"the file changed while it was read: {exc}")


def _text_parts(path: Path, part_chars: int, max_bytes: int) -> Iterator[str]:
    """The non-blank parts of a UTF-8 text file, each at most ``part_chars`` characters, cut at a
    blank line, else a line end, else a sentence end, else a space, as late as possible; a file
    that grows past ``max_bytes`` while it is read (a log being written) is an error."""
    decoder = codecs.getincrementaldecoder("utf-8-sig")()
    buffer = ""
    offset = 0
    with path.open("rb") as stream:
        while True:
            data = stream.read(_READ_BLOCK)
            if b"\x00" in data:
                raise LoaderError(_nul_reason(data if offset == 0 else b""))
            try:
                buffer += decoder.decode(data, final=not data)
            except UnicodeDecodeError as exc:
                raise LoaderError(f"not valid UTF-8 (bad byte at offset {offset + exc.start}); re-save the file as UTF-8") from None
            offset += len(data)
            if offset > max_bytes:
                raise LoaderError(grew_past(max_bytes))
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
