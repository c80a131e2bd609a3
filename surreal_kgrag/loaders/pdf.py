"""PDF files read with pdfium (pypdfium2): text a page at a time, with its pages, sections and tables.

Chosen by measurement (benchmarks/pdf_reader_benchmark.py): it read every one of 20 long real filings,
about 400 pages a second, keeping each table row on one line; pypdf gave up on two of them and was
about 100 times slower; PyMuPDF is AGPL.

- pdfium reads each PDF in a child process bounded in memory and time (:mod:`.pdf_worker`); the
  pages' lines, metadata and outline it returns are made into a document here.
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

import importlib.util
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..models import LoadFailure, SourceDocument
from .layout import Line, assemble, figures_at_end, mark_numeric_tables, numbering_rank
from .metadata import file_metadata, fitting_title, pdf_date, readable_title
from .options import MAX_PDF_CHARS, MAX_PDF_MEMORY, MAX_PDF_PAGES, PDF_TIMEOUT
from .pdf_worker import WORKER

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
    path: Path,
    data: bytes,
    resolved: str,
    *,
    max_pages: int = MAX_PDF_PAGES,
    max_chars: int = MAX_PDF_CHARS,
    max_memory: int = MAX_PDF_MEMORY,
    timeout: float = PDF_TIMEOUT,
) -> SourceDocument | LoadFailure:
    """The PDF's text, layout and metadata, read by pdfium in a child process (:mod:`.pdf_worker`);
    a failure for a PDF of more than ``max_pages`` pages (found before any text is read), more than
    ``max_chars`` characters of text, or that needs more than ``max_memory`` bytes or ``timeout``
    seconds to read."""
    if importlib.util.find_spec("pypdfium2") is None:
        return LoadFailure(source=resolved, reason="PDF needs pypdfium2: pip install 'surreal-kgrag[pdf]'")
    if not data.strip():
        return LoadFailure(source=resolved, reason="empty file; nothing to index")
    read = WORKER.read(data, max_pages, max_chars, max_memory, timeout)
    if isinstance(read, str):
        return LoadFailure(source=resolved, reason=read)
    pages = [[_PageLine(text, page, size=size, weight=weight) for text, page, size, weight in lines] for lines in read["pages"]]
    info: dict[str, str] = read["info"]
    outline = [(level, title, index) for level, title, index in read["outline"]]
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
    level = {size: rank for rank, size in enumerate(sorted({line.size for line in candidates}, reverse=True))}
    for line in candidates:
        line.heading = (level[line.size], numbering_rank(line.text.strip()))


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
