"""Word files (.docx) read with python-docx, as Markdown: headings become its sections, tables its
tables, so a report or manual keeps its structure as an HTML page does (``formats.html_document``).

- Headings are the paragraphs in the built-in heading styles ("Heading 1" .. "Heading 6", 7-9 as 6;
  "Title" is a level-1 heading and the title when the file's properties name none).
- A table is a Markdown table, a row a line; a cell spanning several columns is written once.
- Content controls (``w:sdt``: a template's cover page, table of contents, form fields) and custom
  XML (``w:customXml``) are read as their content, in document order, at any depth: in the body, in
  a table (rows, cells) and in a paragraph. A control still showing its placeholder ("Click or tap
  here to enter text.") is left out. A text box is read once (Word writes it twice: ``mc:Choice`` and
  an ``mc:Fallback`` for older readers).
- Tracked changes: inserted text is read, deleted text (``w:delText``) is not. Headers, footers,
  footnotes, endnotes and comments are not read.
- An entity reference inside a text (only a file with a DTD has one, and Word writes none: a hand-made
  or hostile file) is kept as written (``&name;``), never resolved, and the text after it is read.
- Metadata: the file's own properties as ``docx_*`` (as a PDF's are ``pdf_*``: an author never
  becomes a concept), and what every file gets (``file_metadata``).
- A .docx is a zip archive: its members' uncompressed sizes together must be within
  ``max_file_bytes`` (``LoaderOptions``), checked before anything is parsed, so a small file that
  would expand to gigabytes is refused.
"""

from __future__ import annotations

import io
import re
import zipfile
from pathlib import Path
from typing import Any

from ..models import LoadFailure, SourceDocument
from .formats import markdown_document
from .metadata import OPENING_CHARS, file_metadata, fitting_title
from .options import MAX_FILE_BYTES

CONTENT_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
_HEADING = re.compile(r"^heading ([1-9])$")
_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_TEXT = f"{_W}t"
# A paragraph starts with a space too: a cell's or a text box's paragraphs are read inside another element.
_SPACES = (f"{_W}tab", f"{_W}br", f"{_W}cr", f"{_W}p")
_FALLBACK = "{http://schemas.openxmlformats.org/markup-compatibility/2006}Fallback"
_WRAPPERS = (f"{_W}sdt", f"{_W}customXml")
_OFF = {"0", "false", "off"}
_PROPERTIES = {"title": "docx_title", "author": "docx_author", "subject": "docx_subject", "keywords": "docx_keywords"}


def docx_document(path: Path, data: bytes, resolved: str, *, max_bytes: int = MAX_FILE_BYTES) -> SourceDocument | LoadFailure:
    """The document's body as Markdown, with its sections, tables and properties; a failure for a
    file whose members unpack to more than ``max_bytes`` together."""
    try:
        import docx
    except ImportError as exc:
        return LoadFailure(source=resolved, reason=f"Word files need python-docx: pip install 'surreal-kgrag[docx]' ({exc})")
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            unpacked = sum(member.file_size for member in archive.infolist())
    except (zipfile.BadZipFile, ValueError) as exc:
        return LoadFailure(source=resolved, reason=f"not a Word (.docx) file: {exc}; a .doc file must be saved as .docx first")
    if unpacked > max_bytes:
        return LoadFailure(
            source=resolved,
            reason=f"the .docx unpacks to {unpacked:,} bytes, more than max_file_bytes={max_bytes:,}; not read "
            "(raise max_file_bytes to load it)",
        )
    try:
        document = docx.Document(io.BytesIO(data))
        levels = _heading_levels(document)
        _unwrap(document.element.body)
        blocks = [_block(item, levels) for item in document.iter_inner_content()]
        properties = document.core_properties
    except Exception as exc:  # python-docx raises KeyError, lxml's and zipfile's errors for a broken part
        return LoadFailure(source=resolved, reason=f"malformed .docx: {type(exc).__name__}: {exc}")
    text = "\n\n".join(block for block in blocks if block).strip()
    if not text:
        return LoadFailure(source=resolved, reason="the .docx has no text")
    metadata: dict[str, Any] = {"file_name": path.name}
    for field, key in _PROPERTIES.items():
        value = str(getattr(properties, field, None) or "").strip()
        if value:
            metadata[key] = value
    metadata.update(file_metadata(path, text[:OPENING_CHARS]))
    first_heading = next((block[2:] for block in blocks if block.startswith("# ")), None)
    title = fitting_title(metadata.get("docx_title")) or fitting_title(first_heading)
    return markdown_document(path, resolved, text, title, CONTENT_TYPE, metadata)


def _heading_levels(document: Any) -> dict[str, int]:
    """The heading level of each paragraph style, by style id, read once: a paragraph's ``style``
    looks the document's styles up again on every call (2 ms each in a 20,000-paragraph file).
    Matched by name, which stays English ("heading 1") where a localised Word gives the id its own."""
    levels = {}
    for style in document.styles.element.style_lst:
        name = (style.name_val or "").lower()
        match = _HEADING.match(name)
        level = 1 if name == "title" else min(int(match.group(1)), 6) if match else 0
        if level and style.styleId:
            levels[style.styleId] = level
    return levels


def _unwrap(body: Any) -> None:
    """Replace each content control (``w:sdt``) and custom XML element (``w:customXml``) in the parsed
    body by its content, in place: python-docx reads only the paragraphs and tables that are a body's
    own children (and the rows of a table, the cells of a row), so a cover page, table of contents or
    form in a control, or a table row a repeating section holds, was left out. A control showing its
    placeholder is removed with its content, and so is a text box's second copy (``mc:Fallback``).
    Nested wrappers: the outer one's content moves up with the inner wrapper in it, which is
    replaced in turn."""
    for wrapper in list(body.iter(*_WRAPPERS)):
        parent = wrapper.getparent()
        if wrapper.tag == _WRAPPERS[1]:
            content = [child for child in wrapper if child.tag != f"{_W}customXmlPr"]
        else:
            placeholder = wrapper.find(f"{_W}sdtPr/{_W}showingPlcHdr")
            shown = wrapper.find(f"{_W}sdtContent")
            showing = placeholder is not None and placeholder.get(f"{_W}val", "true").lower() not in _OFF
            content = [] if shown is None or showing else list(shown)
        index = parent.index(wrapper)
        parent[index : index + 1] = content
    for fallback in list(body.iter(_FALLBACK)):  # a text box's copy for older readers (mc:Choice holds it)
        fallback.getparent().remove(fallback)


def _block(item: Any, levels: dict[str, int]) -> str:
    """One paragraph (a Markdown heading when it is in a heading style) or table, as Markdown."""
    if hasattr(item, "rows"):
        return _table(item)
    text = _text(item._p)
    level = levels.get(item._p.style or "", 0)
    return f"{'#' * level} {text}" if level and text else text


def _table(table: Any) -> str:
    rows = [cells for cells in map(_cells, table.rows) if any(cells)]
    if not rows:
        return ""
    lines = ["| " + " | ".join(cells) + " |" for cells in rows]
    return "\n".join([lines[0], "|" + " --- |" * len(rows[0]), *lines[1:]])


def _cells(row: Any) -> list[str]:
    cells, previous = [], None
    for cell in row.cells:
        if cell._tc is previous:  # a cell spanning several columns is listed once per column
            continue
        previous = cell._tc
        cells.append(_text(cell._tc).replace("|", "\\|"))
    return cells


def _text(element: Any) -> str:
    """An element's text, its whitespace runs, tabs, line breaks and paragraphs as one space: read from its
    ``w:t`` elements in one pass (python-docx's ``text`` runs an XPath query per paragraph and cell,
    most of the time of a long file)."""
    parts = ((_t(node) if len(node) else node.text or "") if node.tag == _TEXT else " " for node in element.iter(_TEXT, *_SPACES))
    return " ".join("".join(parts).split())


def _t(node: Any) -> str:
    """A ``w:t`` with nodes inside: an entity reference (python-docx parses with ``resolve_entities=False``,
    so it stays a node and nothing, outside the file or in its DTD, is read), a comment or a processing
    instruction. The entity is kept as written (``&name;``), the others left out, and the text after
    each (its ``tail``) read."""
    from lxml import etree

    inner = ((child.text if child.tag is etree.Entity else "") + (child.tail or "") for child in node)
    return (node.text or "") + "".join(inner)
