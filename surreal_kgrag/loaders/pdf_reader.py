"""pdfium's side of the PDF loader, run in a child process (:mod:`.pdf_worker` is the parent's side).

pdfium cannot be interrupted or held to a memory budget: a 256 KB PDF whose content stream inflates
to 256 MiB, drawn by 8 pages, took 9.7 s and 2.4 GB. Here, in a process of its own with its address
space capped (``RLIMIT_AS``), such a PDF ends this process, not the ingest. This module imports only
the standard library and pypdfium2, so the child starts without importing the package; it returns
plain data (each page's lines as ``[text, page, size, weight]``, the PDF's metadata and outline) and
the parent does the rest (:mod:`.pdf`).
"""

from __future__ import annotations

import json
import re
import signal
import struct
import sys
from typing import IO, Any

#: One frame, both ways: its kind and its payload's length. Requests: b"R" (read: a JSON line of
#: options, then the PDF). Replies: b"+" (started), b"D" (the data, JSON), b"F" (why not: a reason),
#: b"M" (out of memory).
FRAME = struct.Struct("<cQ")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\ufffe\uffff]")
_LINE = re.compile(r"[^\r\n]+")


def read(data: bytes, max_pages: int, max_chars: int) -> dict[str, Any] | str:
    """The PDF's ``pages``, ``info`` (metadata) and ``outline`` (``[level, title, page index]``), or why
    not: malformed, encrypted, more than ``max_pages`` pages (found before any text is read) or more
    than ``max_chars`` characters of text (a page's count is checked before its text is copied out)."""
    import pypdfium2 as pdfium

    try:
        pdf = pdfium.PdfDocument(data)
    except pdfium.PdfiumError as exc:
        if "password" in str(exc).lower():
            return "encrypted PDF needs a password; save a decrypted copy"
        return f"malformed PDF: pdfium: {exc}"
    try:
        if len(pdf) > max_pages:
            return (
                f"PDF has {len(pdf):,} pages, more than max_pdf_pages={max_pages:,}; not read (raise max_pdf_pages to load it)"
            )
        pages = _pages(pdf, max_chars)
        if isinstance(pages, str):
            return pages
        info = {str(k): str(v) for k, v in pdf.get_metadata_dict(skip_empty=True).items()}
        outline = [[item.level, item.get_title(), _page_index(item)] for item in pdf.get_toc()]
    except pdfium.PdfiumError as exc:
        return f"malformed PDF: pdfium: {exc}"
    finally:
        pdf.close()
    return {"pages": pages, "info": info, "outline": outline}


def _pages(pdf: Any, max_chars: int) -> list[list[list[Any]]] | str:
    pages = []
    room = max_chars
    for index in range(len(pdf)):
        read = _page_lines(pdf, index, room)
        if read is None:
            return (
                f"PDF has more than max_pdf_chars={max_chars:,} characters of text (passed at page {index + 1:,} "
                f"of {len(pdf):,}); not loaded (raise max_pdf_chars to load it)"
            )
        lines, chars = read
        room -= chars
        pages.append(lines)
    return pages


def _page_lines(pdf: Any, index: int, max_chars: int) -> tuple[list[list[Any]], int] | None:
    """The page's lines with the font of their first character (size in half points, weight: 400
    regular, 700 bold) and its count of characters; None when it has more than ``max_chars``
    characters (counted by pdfium; the text is not copied out)."""
    import pypdfium2.raw as raw

    page = pdf[index]
    textpage = page.get_textpage()
    try:
        chars = textpage.count_chars()
        if chars > max_chars:
            return None
        text = textpage.get_text_range()
        fonts = len(text) == textpage.count_chars()  # else offsets do not map to characters
        lines: list[list[Any]] = []
        for match in _LINE.finditer(text):
            line = _CONTROL.sub(" ", match.group()).rstrip()
            if not line.strip():
                continue
            first = match.start() + len(line) - len(line.lstrip())
            size = raw.FPDFText_GetFontSize(textpage, first) if fonts else 0.0
            weight = raw.FPDFText_GetFontWeight(textpage, first) if fonts else -1
            lines.append([line, index + 1, round(size * 2) / 2, weight])
        return lines, chars
    finally:
        textpage.close()
        page.close()


def _page_index(bookmark: Any) -> int | None:
    dest = bookmark.get_dest()
    return None if dest is None else int(dest.get_index())


def serve() -> None:
    """The child: answer read requests until stdin closes (the parent ended or let go of it)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's: it stops this process itself
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing pdfium's wrapper prints may get into the replies

    def reply(kind: bytes, payload: bytes) -> None:
        stdout.write(FRAME.pack(kind, len(payload)) + payload)
        stdout.flush()

    import pypdfium2  # noqa: F401  (loaded once, before the first PDF's time starts)

    reply(b"+", b"")
    while (request := receive(stdin)) is not None:
        options, _, data = request[1].partition(b"\n")
        settings = json.loads(options)
        _cap_memory(settings["max_memory"])
        try:
            result = read(data, settings["max_pages"], settings["max_chars"])
            if isinstance(result, str):
                reply(b"F", result.encode())
            else:
                reply(b"D", json.dumps(result).encode())
        except MemoryError:
            reply(b"M", b"")


def receive(stream: IO[bytes] | None) -> tuple[bytes, bytes] | None:
    """The next frame on ``stream``; None at its end."""
    assert stream is not None
    header = stream.read(FRAME.size)
    if len(header) < FRAME.size:
        return None
    kind, length = FRAME.unpack(header)
    payload = stream.read(length)
    return None if len(payload) < length else (kind, payload)


def _cap_memory(limit: int) -> None:
    try:
        import resource
    except ImportError:  # not POSIX: the time bound still holds
        return
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (limit if hard == resource.RLIM_INFINITY else min(limit, hard), hard))
