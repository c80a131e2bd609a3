"""One document from the content of a text, Markdown or HTML file, with its sections and tables."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, NamedTuple

from ..models import LoadFailure, SourceDocument, TextLayout
from .layout import Line, assemble
from .metadata import OPENING_CHARS, file_metadata, fitting_title, readable_title
from .pdf import pdf_document as pdf_document  # its public path before the PDF reader had a module

_MD_FENCE = re.compile(r"^ {0,3}(```|~~~)")
# An ATX heading's opening: the closing run of #s is stripped in Python (a pattern that strips it
# backtracks quadratically on a long line of spaces).
_MD_ATX = re.compile(r"^ {0,3}(#{1,6})([ \t]+)(.*)$")
_MD_RULE_CELL = re.compile(r":?-{3,}:?")


def text_document(path: Path, text: str, resolved: str, content_type: str) -> SourceDocument:
    markdown = content_type == "text/markdown"
    title = fitting_title(markdown_title(text)) if markdown else None
    return SourceDocument(
        key=resolved,
        text=text,
        title=title or readable_title(path),
        source=resolved,
        content_type=content_type,
        metadata={"file_name": path.name, **file_metadata(path, text[:OPENING_CHARS])},
        layout=markdown_layout(text) if markdown else None,
    )


def markdown_title(text: str) -> str | None:
    in_fence = False
    for line in text.split("\n"):
        if _MD_FENCE.match(line):
            in_fence = not in_fence
        elif not in_fence and (heading := _heading(line)) and heading[0] == 1:
            return heading[1]
    return None


def _heading(line: str) -> tuple[int, str] | None:
    """An ATX heading's level and text (without a closing run of #s), or None."""
    match = _MD_ATX.match(line)
    if match is None:
        return None
    hashes, space, rest = match.groups()
    text = rest.rstrip(" \t")
    if not text:  # only spaces after the #s: the last one is the text, as before; one alone is no heading
        return (len(hashes), space[-1]) if len(space) > 1 else None
    body = text.rstrip("#")
    if len(body) < len(text) and body[-1:] in (" ", "\t"):
        text = body.rstrip(" \t")
    return len(hashes), text


def _table_rule(line: str) -> bool:
    """A pipe table's |---|:--:| line, read cell by cell (a single pattern backtracks on long lines)."""
    cells = line.strip()
    cells = cells[1:] if cells.startswith("|") else cells
    cells = cells[:-1] if cells.endswith("|") else cells
    return all(_MD_RULE_CELL.fullmatch(cell.strip()) for cell in cells.split("|"))


def markdown_layout(text: str) -> TextLayout:
    """Sections from ATX headings (``#`` to ``######``, outside code fences) and pipe tables (a
    header row, its ``|---|`` line, then rows) of Markdown text."""
    return assemble([_markdown_lines(text)[0]], paged=False)[1]


class MarkdownState(NamedTuple):
    """Where a part of a Markdown file read in parts ends: the headings (level, title) still open,
    and whether inside a code fence."""

    headings: tuple[tuple[int, str], ...] = ()
    in_fence: bool = False


def markdown_part_layout(text: str, state: MarkdownState | None = None) -> tuple[TextLayout, MarkdownState]:
    """The layout of one part of a Markdown file read in parts, read on from where the previous part
    left ``state`` (None for the first part); and where this part leaves it."""
    state = state or MarkdownState()
    prefix = "".join(f"{'#' * level} {title}\n" for level, title in state.headings) + ("```\n" if state.in_fence else "")
    lines, in_fence = _markdown_lines(prefix + text)
    stack: list[tuple[int, str]] = []
    for line in lines:
        if line.heading is not None:
            while stack and stack[-1][0] >= line.heading[0]:
                stack.pop()
            stack.append((line.heading[0], line.title or line.text))
    layout = assemble([lines], paged=False)[1]
    shift = len(prefix)
    sections = [(start - shift, path) for start, path in layout.sections if start >= shift]
    inherited = [path for start, path in layout.sections if start < shift]
    if inherited and not (sections and sections[0][0] == 0):
        sections.insert(0, (0, inherited[-1]))
    tables = [(start - shift, body - shift, end - shift) for start, body, end in layout.tables]
    return TextLayout(sections=sections, tables=tables), MarkdownState(tuple(stack), in_fence)


def _markdown_lines(text: str) -> tuple[list[Line], bool]:
    """The lines of Markdown text, headings and table rows marked; and whether it ends in a fence."""
    lines = [Line(line) for line in text.split("\n")]
    in_fence = False
    table = False
    for index, line in enumerate(lines):
        if _MD_FENCE.match(line.text):
            in_fence, table = not in_fence, False
            continue
        if in_fence or line.table == "header":
            continue
        if heading := _heading(line.text):
            line.heading = (heading[0], 0)
            line.title = heading[1]
            table = False
        elif table and "|" in line.text and line.text.strip():
            line.table = "row"
        elif "|" in line.text and index + 1 < len(lines) and _table_rule(lines[index + 1].text):
            line.table = lines[index + 1].table = "header"
            table = True
        else:
            table = False
    return lines, in_fence


def html_document(path: Path, html: str, resolved: str) -> SourceDocument | LoadFailure:
    """The page's main content as Markdown (trafilatura), so its headings and tables are kept."""
    try:
        import trafilatura
        from trafilatura.metadata import extract_metadata
    except ImportError as exc:
        return LoadFailure(source=resolved, reason=f"HTML needs trafilatura: pip install 'surreal-kgrag[html]' ({exc})")
    from lxml import etree

    metadata: dict[str, Any] = {"file_name": path.name}
    try:
        tree = _html_tree(html)
    except (etree.ParserError, etree.XMLSyntaxError, ValueError) as exc:
        return LoadFailure(source=resolved, reason=f"cannot parse HTML: {exc}")
    depth, elements = _shape(tree)
    if depth >= MAX_HTML_DEPTH:
        return LoadFailure(
            source=resolved,
            reason=f"HTML nested {MAX_HTML_DEPTH:,} or more elements deep: the parser stops there, and what lies deeper "
            "would be lost; flatten the page, or save its text as a .txt or .md file",
        )
    large = elements > MAX_EXTRACTED_ELEMENTS  # read as plain text: trafilatura's time grows faster than the page
    found = None if large else extract_metadata(tree)  # before extract(), which prunes the tree it reads
    text = "" if large else (
        trafilatura.extract(
            tree, output_format="markdown", include_comments=False, include_tables=True, include_formatting=True, favor_recall=True
        )
        or ""
    ).strip()
    title = fitting_title(getattr(found, "title", None))
    for field in ("author", "date"):
        value = getattr(found, field, None)
        if value:
            metadata[field] = value
    if not text or not title:
        tree = _html_tree(html)
        title = title or fitting_title(_html_title(tree))
        text = text or _html_text(tree)
    if not text:
        return LoadFailure(source=resolved, reason="HTML page has no text content")
    found_dates = file_metadata(path, text[:OPENING_CHARS])
    if "date" in metadata:  # the page's own date wins over one found in its text
        found_dates.pop("date", None)
    return markdown_document(path, resolved, text, title, "text/html", {**metadata, **found_dates})


def markdown_document(
    path: Path, resolved: str, text: str, title: str | None, content_type: str, metadata: dict[str, Any]
) -> SourceDocument:
    """A file converted to Markdown (an HTML page, a Word file), its sections and tables read from it."""
    return SourceDocument(
        key=resolved,
        text=text,
        title=title or readable_title(path),
        source=resolved,
        content_type=content_type,
        metadata=metadata,
        layout=markdown_layout(text),
    )


#: How deep the HTML parser nests elements (libxml2's limit with ``huge_tree``; 255 without it,
#: past which a page's deeper content and everything after it were dropped without a word).
MAX_HTML_DEPTH = 2_000

#: A page of more elements is read as plain text (its headings and tables not kept): trafilatura took
#: 7.7 s on 100,000 elements, 22 s on 200,000 and 149 s on 400,000 (hours on a 32 MB page).
MAX_EXTRACTED_ELEMENTS = 50_000


def _html_tree(html: str) -> Any:
    import lxml.html

    # Bytes, because lxml rejects str input that carries an XML encoding declaration.
    parser = lxml.html.HTMLParser(encoding="utf-8", huge_tree=True)
    return lxml.html.document_fromstring(html.encode("utf-8"), parser=parser)


def _shape(tree: Any) -> tuple[int, int]:
    """How deep the tree nests, and how many elements it has."""
    deepest = count = 0
    stack = [(tree, 0)]
    while stack:
        element, depth = stack.pop()
        deepest, count = max(deepest, depth), count + 1
        stack.extend((child, depth + 1) for child in element)
    return deepest, count


def _html_title(tree: Any) -> str | None:
    node = tree.find(".//title")
    title = node.text_content().strip() if node is not None else ""
    return title or None


_BLOCKS = ("p", "div", "li", "tr", "br", "h1", "h2", "h3", "h4", "h5", "h6", "section", "article", "table", "blockquote", "pre")


def _html_text(tree: Any) -> str:
    for bad in tree.xpath("//script|//style|//noscript|//template|//head"):
        bad.drop_tree()
    for block in tree.iter(*_BLOCKS):  # a line each: text_content() glues "<p>a.</p><p>b.</p>" into "a.b."
        block.tail = "\n" + (block.tail or "")
    lines = (" ".join(line.split()) for line in tree.text_content().split("\n"))
    return "\n".join(line for line in lines if line)
