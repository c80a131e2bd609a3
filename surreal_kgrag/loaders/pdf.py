"""PDF files read with pdfium (pypdfium2): text a page at a time, with its pages, sections and tables.

Chosen by measurement (benchmarks/pdf_reader_benchmark.py): it read every one of 20 long real filings,
about 400 pages a second, keeping each table row on one line; pypdf gave up on two of them and was
about 100 times slower; PyMuPDF is AGPL.

- Sections come from the PDF's outline (bookmarks) when it has one, else from headings found by
  font: a short line set bolder or larger than the body text. Numbering ("Part I", "Item 2.",
  "Note 3", "1.2") nests headings of one style.
- Running headers and footers (furniture) are lines among the first or last two of a page that
  recur, digits aside, on a large share of the pages; they are dropped.
- Tables of figures are rows ending in two or more figure cells under the short lines above them.
- Metadata: the PDF's own fields as ``pdf_*`` (not ``author``, so a converter's name never becomes
  a concept), ``pages``, and what every file gets (``file_metadata``).
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..models import LoadFailure, SourceDocument
from .layout import Line, assemble, figures_at_end, mark_numeric_tables, numbering_rank
from .metadata import file_metadata, fitting_title, pdf_date, readable_title
from .options import MAX_PDF_CHARS, MAX_PDF_PAGES

_LOCK = threading.Lock()  # pdfium is not thread-safe
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\ufffe\uffff]")
_LINE = re.compile(r"[^\r\n]+")
_EDGE_LINES = 2  # lines at each end of a page that may be running headers or footers
_FURNITURE_SHARE = 0.4  # ... when they recur on at least this share of the pages (and 3 pages)
_MAX_HEADING_CHARS = 150
_PDF_FIELDS = {
    "Title": "pdf_title",
    "Author": "pdf_author",
    "Subject": "pdf_subject",
    "Keywords": "pdf_keywords",
    "Creator": "pdf_creator",
    "Producer": "pdf_producer",
}


def pdf_document(
    path: Path, data: bytes, resolved: str, *, max_pages: int = MAX_PDF_PAGES, max_chars: int = MAX_PDF_CHARS
) -> SourceDocument | LoadFailure:
    """The PDF's text, layout and metadata; a failure for a PDF of more than ``max_pages`` pages
    (found before any text is read) or more than ``max_chars`` characters of text (a page's count is
    checked before its text is copied out: compressed text can expand far beyond the file's size)."""
    try:
        import pypdfium2 as pdfium
    except ImportError as exc:
        return LoadFailure(source=resolved, reason=f"PDF needs pypdfium2: pip install 'surreal-kgrag[pdf]' ({exc})")
    if not data.strip():
        return LoadFailure(source=resolved, reason="empty file; nothing to index")
    with _LOCK:
        try:
            pdf = pdfium.PdfDocument(data)
        except pdfium.PdfiumError as exc:
            if "password" in str(exc).lower():
                return LoadFailure(source=resolved, reason="encrypted PDF needs a password; save a decrypted copy")
            return LoadFailure(source=resolved, reason=f"malformed PDF: pdfium: {exc}")
        try:
            if len(pdf) > max_pages:
                return LoadFailure(
                    source=resolved,
                    reason=f"PDF has {len(pdf):,} pages, more than max_pdf_pages={max_pages:,}; not read "
                    "(raise max_pdf_pages to load it)",
                )
            pages = _pages(pdf, max_chars)
            if isinstance(pages, str):
                return LoadFailure(source=resolved, reason=pages)
            info = pdf.get_metadata_dict(skip_empty=True)
            outline = [(item.level, item.get_title(), _page_index(item)) for item in pdf.get_toc()]
        except pdfium.PdfiumError as exc:
            return LoadFailure(source=resolved, reason=f"malformed PDF: pdfium: {exc}")
        finally:
            pdf.close()
    _drop_furniture(pages)
    lines = [line for page in pages for line in page]
    if not any(line.text.strip() for line in lines):
        return LoadFailure(source=resolved, reason="PDF has no extractable text (scanned images?); run OCR on it first")
    if not _outline_headings(pages, outline):
        _font_headings(lines)
    mark_numeric_tables(lines)
    text, layout = assemble(pages, paged=True)
    metadata: dict[str, Any] = {"file_name": path.name, "pages": len(pages)}
    for field, key in _PDF_FIELDS.items():
        value = str(info.get(field, "")).strip()
        if value:
            metadata[key] = value
    for field, key in (("CreationDate", "pdf_created"), ("ModDate", "pdf_modified")):
        if (stamp := pdf_date(str(info.get(field, "")))) is not None:
            metadata[key] = stamp
    first_page = text[: layout.pages[1]] if len(layout.pages) > 1 else text
    metadata.update(file_metadata(path, first_page))
    return SourceDocument(
        key=resolved,
        text=text,
        title=fitting_title(_title(metadata.get("pdf_title"))) or readable_title(path),
        source=resolved,
        content_type="application/pdf",
        metadata=metadata,
        layout=layout,
    )


@dataclass
class _PageLine(Line):
    """A line with the font of its first character: size in points, weight (400 regular, 700 bold)."""

    size: float = 0.0
    weight: int = -1


def _pages(pdf: Any, max_chars: int) -> list[list[_PageLine]] | str:
    """Each page's lines, or why not: the text grew past ``max_chars`` characters."""
    pages: list[list[_PageLine]] = []
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


def _page_lines(pdf: Any, index: int, max_chars: int) -> tuple[list[_PageLine], int] | None:
    """The page's lines and its count of characters; None when it has more than ``max_chars``
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
        lines = []
        for match in _LINE.finditer(text):
            line = _CONTROL.sub(" ", match.group()).rstrip()
            if not line.strip():
                continue
            first = match.start() + len(line) - len(line.lstrip())
            size = raw.FPDFText_GetFontSize(textpage, first) if fonts else 0.0
            weight = raw.FPDFText_GetFontWeight(textpage, first) if fonts else -1
            lines.append(_PageLine(line, index + 1, size=round(size * 2) / 2, weight=weight))
        return lines, chars
    finally:
        textpage.close()
        page.close()


def _page_index(bookmark: Any) -> int | None:
    dest = bookmark.get_dest()
    return None if dest is None else dest.get_index()


def _furniture_key(text: str) -> str:
    return re.sub(r"\d+", "#", " ".join(text.lower().split()))


def _drop_furniture(pages: list[list[_PageLine]]) -> None:
    """Remove running headers and footers: edge lines that recur on many pages, digits aside; none
    when they are all the text there is (a page of one line each, "Step 1 of the assembly", ...)."""
    if len(pages) < 3:
        return
    seen: Counter[str] = Counter()
    for lines in pages:
        seen.update({_furniture_key(line.text) for line in _edges(lines)})
    threshold = max(3, _FURNITURE_SHARE * len(pages))
    furniture = {key for key, count in seen.items() if count >= threshold}
    kept = []
    for lines in pages:
        edges = {id(line) for line in _edges(lines) if _furniture_key(line.text) in furniture}
        kept.append([line for line in lines if id(line) not in edges])
    if any(kept):
        pages[:] = kept


def _edges(lines: list[_PageLine]) -> list[_PageLine]:
    return lines[:_EDGE_LINES] + lines[_EDGE_LINES:][-_EDGE_LINES:]


def _outline_headings(pages: list[list[_PageLine]], outline: list[tuple[int, str, int | None]]) -> bool:
    """Mark the lines the outline's entries point at as headings; False when there is no outline."""
    marked = False
    for level, title, page_index in outline:
        if page_index is None or not 0 <= page_index < len(pages) or not pages[page_index] or not title.strip():
            continue
        wanted = _furniture_key(title)
        lines = pages[page_index]
        target = next((ln for ln in lines if ln.heading is None and _furniture_key(ln.text).startswith(wanted[:40])), None)
        if target is None:  # the title is not on the page as text: the section starts at its top
            target = next((ln for ln in lines if ln.heading is None), None)
            if target is None:
                continue
        target.heading = (level, 0)
        target.title = " ".join(title.split())
        marked = True
    return marked


def _font_headings(lines: list[_PageLine]) -> None:
    """Headings by font: short lines bolder or larger than the body (the commonest style by characters)."""
    styles: Counter[tuple[float, int]] = Counter()
    for line in lines:
        styles[(line.size, line.weight)] += len(line.text)
    if not styles:
        return
    body_size, body_weight = styles.most_common(1)[0][0]
    candidates = [line for line in lines if _looks_like_heading(line, body_size, body_weight)]
    sizes = sorted({line.size for line in candidates}, reverse=True)
    for line in candidates:
        line.heading = (sizes.index(line.size), numbering_rank(line.text.strip()))


def _looks_like_heading(line: _PageLine, body_size: float, body_weight: int) -> bool:
    text = line.text.strip()
    if line.size <= 0 or line.size < body_size or not (line.size > body_size * 1.15 or line.weight >= body_weight + 100):
        return False
    words = text.split()
    return (
        len(text) <= _MAX_HEADING_CHARS
        and sum(c.isalpha() for c in text) >= 3
        and figures_at_end(text) < 2
        and not text.endswith((",", ";"))
        and not (text.endswith(".") and len(words) > 8)
    )


def _title(pdf_title: Any) -> str | None:
    """The PDF's Title field when it reads as a title (words, not an identifier such as an accession number)."""
    if not isinstance(pdf_title, str):
        return None
    words = [w for w in pdf_title.split() if sum(c.isalpha() for c in w) >= 2]
    return " ".join(pdf_title.split()) if len(words) >= 2 else None
