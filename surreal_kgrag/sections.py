"""Chunking a document along its layout: no chunk crosses a section or a table boundary, a table is
cut between rows with its header repeated on every chunk after the first, and every chunk records
its pages and its section path.

Prose between boundaries is chunked by the :class:`SentenceChunker`. A document without a layout is
chunked as one piece of prose, as before.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterator

from .chunking import SentenceChunker, count_tokens
from .models import SourceDocument, TextChunk, TextLayout

__all__ = ["split_document"]


def split_document(chunker: SentenceChunker, doc: SourceDocument) -> list[TextChunk]:
    """The chunks of ``doc``: ``doc.text[c.start:c.end] == c.content`` for every chunk ``c``; its
    section is the one in effect at its middle."""
    layout = doc.layout
    if layout is None or not (layout.pages or layout.sections or layout.tables):
        return chunker.split(doc.text)
    chunks: list[TextChunk] = []
    section_starts = [offset for offset, _ in layout.sections]
    for start, end, table in _segments(layout, doc.text):
        pieces = _table_chunks(chunker, doc.text, table) if table else _prose_chunks(chunker, doc.text, start, end)
        for piece in pieces:
            chunks.append(_placed(piece, len(chunks), layout, section_starts))
    return chunks


def _segments(layout: TextLayout, text: str) -> Iterator[tuple[int, int, tuple[int, int, int] | None]]:
    """Ranges between section starts and table edges; a table's range comes with the table. A
    range that holds only headings (a heading straight above another) joins the next one."""
    length = len(text)
    heading_starts = {offset for offset, _ in layout.sections}
    tables = {start: (start, body, end) for start, body, end in layout.tables if 0 <= start <= body < end <= length}
    cuts = {0, length, *(offset for offset, _ in layout.sections if 0 <= offset <= length)}
    for start, _, end in tables.values():
        cuts.update((start, end))
    ordered = sorted(cuts)
    inside_until = -1
    pending = -1  # start of prose held back to join the next stretch
    for start, end in itertools.pairwise(ordered):
        if start < inside_until:
            continue  # a section heading inside a table does not cut it
        table = tables.get(start)
        if table is not None:
            if pending >= 0:
                yield pending, start, None
                pending = -1
            inside_until = table[2]
            yield start, table[2], table
            continue
        begin = start if pending < 0 else pending
        if end < length and _only_headings(text, start, end, heading_starts):
            pending = begin
            continue
        pending = -1
        yield begin, end, None
    if pending >= 0:
        yield pending, length, None


def _only_headings(text: str, start: int, end: int, heading_starts: set[int]) -> bool:
    """Whether every non-blank line of ``text[start:end]`` starts a section."""
    return all(line_start in heading_starts for line_start, _ in _rows(text, start, end))


def _prose_chunks(chunker: SentenceChunker, text: str, start: int, end: int) -> list[TextChunk]:
    return [TextChunk(index=0, content=c.content, start=c.start + start, end=c.end + start) for c in chunker.split(text[start:end])]


def _table_chunks(chunker: SentenceChunker, text: str, table: tuple[int, int, int]) -> list[TextChunk]:
    """Whole rows under the table's header: the first chunk holds the header, later ones repeat it
    (when it takes at most half the budget). A single row over the budget is cut like prose."""
    start, body, end = table
    if body - start > chunker.max_chars // 2:  # a header this long (padding, say) is not repeated: read it all as prose
        return _prose_chunks(chunker, text, start, end)
    header = text[start:body].strip()
    header_tokens = count_tokens(header)
    repeat = header_tokens <= chunker.max_tokens // 2
    chunks: list[TextChunk] = []
    first = start  # the current chunk starts here (the header, for the first chunk)
    last = -1  # ... and ends here (after its last row), -1 while it is empty
    used = header_tokens
    for row_start, row_end in _rows(text, body, end):
        tokens = count_tokens(text[row_start:row_end])
        if tokens > chunker.max_tokens - (header_tokens if repeat else 0) or row_end - row_start > chunker.max_chars // 2:
            if last >= 0:
                chunks.append(_table_piece(text, first, last, header, start, repeat))
            chunks.extend(_prose_chunks(chunker, text, row_start, row_end))
            first, last, used = row_end, -1, header_tokens if repeat else 0
            continue
        if used + tokens > chunker.max_tokens or row_end - first > chunker.max_chars:
            if last >= 0:
                chunks.append(_table_piece(text, first, last, header, start, repeat))
            else:  # a header too long to repeat, with no room for the first row: the header alone
                chunks.extend(_prose_chunks(chunker, text, start, body))
            first, last, used = row_start, -1, header_tokens if repeat else 0
        if last < 0 and first != start:
            first = row_start
        last = row_end
        used += tokens
    if last >= 0:
        chunks.append(_table_piece(text, first, last, header, start, repeat))
    elif not chunks:  # a header without rows
        chunks.extend(_prose_chunks(chunker, text, start, end))
    return chunks


def _table_piece(text: str, first: int, last: int, header: str, table_start: int, repeat: bool) -> TextChunk:
    continued = repeat and first != table_start
    return TextChunk(index=0, content=text[first:last], start=first, end=last, header=header if continued else "")


def _rows(text: str, start: int, end: int) -> Iterator[tuple[int, int]]:
    """The non-blank lines of ``text[start:end]``, as offsets."""
    position = start
    while position < end:
        newline = text.find("\n", position, end)
        line_end = end if newline == -1 else newline
        if text[position:line_end].strip():
            yield position, line_end
        position = line_end + 1


def _placed(chunk: TextChunk, index: int, layout: TextLayout, section_starts: list[int]) -> TextChunk:
    """``chunk`` numbered ``index`` with its pages and its section."""
    update: dict[str, object] = {"index": index}
    if layout.pages:
        update["page_start"] = bisect.bisect_right(layout.pages, chunk.start)
        update["page_end"] = bisect.bisect_right(layout.pages, max(chunk.start, chunk.end - 1))
    if layout.sections:  # the section at the chunk's middle: a heading over a short one is not its section
        found = bisect.bisect_right(section_starts, (chunk.start + chunk.end) // 2) - 1
        if found >= 0:
            update["section"] = layout.sections[found][1]
    return chunk.model_copy(update=update)
