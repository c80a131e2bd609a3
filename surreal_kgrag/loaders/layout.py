"""Lines of a document with what they are (heading, table header, table row, body), turned into the
document's text and its :class:`TextLayout`: page offsets, section paths and table ranges.

The PDF and Markdown loaders classify lines their own way (fonts; ``#`` and ``|``); what a section
path or a table range is, and how lines are joined, is decided here once.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..models import TextLayout

# A table cell holding a figure: 1,234  (1,234)  $ 12.5  12%  —  -  n/a. A leading "$" or currency
# symbol may be a token of its own ("$ 60,584").
_FIGURE = re.compile(r"^[(]?[-+–—]?[$€£¥]?[(]?\d[\d,.]*[)]?%?[)]?$|^[—–-]+$|^n/?a$", re.IGNORECASE)
_CURRENCY = frozenset("$€£¥")
# Numbered heading conventions, outermost first; a heading without one ranks below them all.
_NUMBERED = (
    re.compile(r"^part\s+[ivxlc\d]+\b", re.IGNORECASE),
    re.compile(r"^(chapter|item|article|appendix|annex|section)\s+[\w.]+", re.IGNORECASE),
    re.compile(r"^note\s+\d+\b", re.IGNORECASE),
)
_DOTTED = re.compile(r"^(\d+(?:\.\d+)*)[.)]?\s+\S")
UNNUMBERED = 9
#: The longest section path a heading makes: each chunk stores its section's path, and a file whose
#: headings nest deeper (a PDF with hundreds of font sizes) would give every chunk hundreds of titles.
MAX_SECTION_DEPTH = 8


@dataclass
class Line:
    """One line of text; ``heading`` is its level when it is a heading (smaller is outer)."""

    text: str
    page: int = 0
    heading: tuple[int, int] | None = None
    table: str | None = None  # "header" or "row"
    title: str | None = None  # the section's name when it is not the line's text (a PDF outline entry)


def figures_at_end(text: str) -> int:
    """How many figure cells end ``text`` (a currency sign alone is part of the cell after it)."""
    count = 0
    for token in reversed(text.split()):
        if token in _CURRENCY:
            continue
        if not _FIGURE.match(token):
            break
        count += 1
    return count


def numbering_rank(title: str) -> int:
    """Where a heading's numbering puts it: Part < Chapter/Item/Section < Note < 1. < 1.1 < none."""
    for rank, pattern in enumerate(_NUMBERED):
        if pattern.match(title):
            return rank
    dotted = _DOTTED.match(title)
    if dotted and len(title) < 120:
        return len(_NUMBERED) + dotted.group(1).count(".")
    return UNNUMBERED


def mark_numeric_tables(lines: Sequence[Line], *, max_header_lines: int = 12) -> None:
    """Mark tables of figures: runs of at least two rows ending in two or more figure cells (a short
    label line such as "Operating expenses:" may sit between rows), with the short lines right
    above the first row as the header. Headings and lines ending a sentence stop the header."""
    n = len(lines)
    i = 0
    while i < n:
        if not _is_row(lines[i]):
            i += 1
            continue
        end = i + 1
        rows = 1
        while end < n:
            if _is_row(lines[end]):
                rows += 1
            elif not (_is_label(lines[end]) and end + 1 < n and _is_row(lines[end + 1])):
                break
            end += 1
        if rows >= 2:
            while i > 0 and _is_label(lines[i - 1]) and lines[i - 1].page == lines[i].page:
                i -= 1  # "Net sales:" above the first row is a row of the table
            for line in lines[i:end]:
                line.table = "row"
            start = i
            while start > 0 and i - start < max_header_lines and _is_header(lines[start - 1], lines[i].page):
                start -= 1
                lines[start].table = "header"
        i = end


def _is_row(line: Line) -> bool:
    return line.heading is None and figures_at_end(line.text) >= 2


def _is_label(line: Line) -> bool:
    text = line.text.strip()
    return line.heading is None and 0 < len(text) <= 80 and text.endswith(":")


def _is_header(line: Line, page: int) -> bool:
    text = line.text.strip()
    return line.heading is None and line.table is None and line.page == page and 0 < len(text) <= 80 and not text.endswith((".", ":", ";"))


def assemble(pages: Sequence[Sequence[Line]], *, paged: bool) -> tuple[str, TextLayout]:
    """Join lines with newlines and pages with a blank line; record where pages, sections (from
    the headings) and tables (header lines then rows) start and end."""
    parts: list[str] = []
    offset = 0
    page_starts: list[int] = []
    sections: list[tuple[int, tuple[str, ...]]] = []
    tables: list[tuple[int, int, int]] = []
    stack: list[tuple[tuple[int, int], str]] = []
    table: list[int] | None = None  # start, body start, end of the table being read

    def close_table() -> None:
        nonlocal table
        if table is not None and table[1] >= 0:
            tables.append((table[0], table[1], table[2]))
        table = None

    for number, lines in enumerate(pages):
        if number:
            parts.append("\n\n")
            offset += 2
        page_starts.append(offset)
        for index, line in enumerate(lines):
            if index:
                parts.append("\n")
                offset += 1
            if line.heading is not None:
                title = line.title or " ".join(line.text.split())
                while stack and stack[-1][0] >= line.heading:
                    stack.pop()
                if len(stack) >= MAX_SECTION_DEPTH:
                    stack.pop()  # the deeper heading takes the deepest place
                stack.append((line.heading, title))
                sections.append((offset, tuple(t for _, t in stack)))
            if line.table == "header" and (table is None or table[1] >= 0):
                close_table()
                table = [offset, -1, offset]
            elif line.table == "row":
                if table is None:
                    table = [offset, offset, offset]
                elif table[1] < 0:
                    table[1] = offset
            elif line.table is None and line.text.strip():
                close_table()
            parts.append(line.text)
            offset += len(line.text)
            if table is not None and line.table is not None:
                table[2] = offset
        close_table()
    text = "".join(parts)
    return text, TextLayout(pages=page_starts if paged else [], sections=sections, tables=tables)
