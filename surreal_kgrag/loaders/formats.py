"""One document from the content of a text, Markdown or HTML file, with its sections and tables."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..models import LoadFailure, SourceDocument, TextLayout
from .layout import Line, assemble
from .metadata import OPENING_CHARS, file_metadata, readable_title
from .pdf import pdf_document as pdf_document  # its public path before the PDF reader had a module

_MD_HEADING = re.compile(r"^ {0,3}#[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$")


_MD_FENCE = re.compile(r"^ {0,3}(```|~~~)")
_MD_SECTION = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$")
_MD_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")


def text_document(path: Path, text: str, resolved: str, content_type: str) -> SourceDocument:
    markdown = content_type == "text/markdown"
    title = markdown_title(text) if markdown else None
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
        elif not in_fence and (m := _MD_HEADING.match(line)):
            return m.group(1)
    return None


def markdown_layout(text: str) -> TextLayout:
    """Sections from ATX headings (``#`` to ``######``, outside code fences) and pipe tables (a
    header row, its ``|---|`` line, then rows) of Markdown text."""
    lines = [Line(line) for line in text.split("\n")]
    in_fence = False
    table = False
    for index, line in enumerate(lines):
        if _MD_FENCE.match(line.text):
            in_fence, table = not in_fence, False
            continue
        if in_fence or line.table == "header":
            continue
        if heading := _MD_SECTION.match(line.text):
            line.heading = (len(heading.group(1)), 0)
            line.title = heading.group(2)
            table = False
        elif table and "|" in line.text and line.text.strip():
            line.table = "row"
        elif "|" in line.text and index + 1 < len(lines) and _MD_TABLE_RULE.match(lines[index + 1].text):
            line.table = lines[index + 1].table = "header"
            table = True
        else:
            table = False
    return assemble([lines], paged=False)[1]


def html_document(path: Path, html: str, resolved: str) -> SourceDocument | LoadFailure:
    """The page's main content as Markdown (trafilatura), so its headings and tables are kept."""
    try:
        import trafilatura
        from trafilatura.metadata import extract_metadata
    except ImportError as exc:
        return LoadFailure(source=resolved, reason=f"HTML needs trafilatura: pip install 'surreal-kgrag[html]' ({exc})")
    from lxml import etree

    metadata: dict[str, Any] = {"file_name": path.name}
    text = (
        trafilatura.extract(
            html, output_format="markdown", include_comments=False, include_tables=True, include_formatting=True, favor_recall=True
        )
        or ""
    ).strip()
    found = extract_metadata(html)
    title = getattr(found, "title", None)
    for field in ("author", "date"):
        value = getattr(found, field, None)
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
    found_dates = file_metadata(path, text[:OPENING_CHARS])
    if "date" in metadata:  # the page's own date wins over one found in its text
        found_dates.pop("date", None)
    return SourceDocument(
        key=resolved,
        text=text,
        title=title or readable_title(path),
        source=resolved,
        content_type="text/html",
        metadata={**metadata, **found_dates},
        layout=markdown_layout(text),
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
