"""One document from the content of a text, Markdown, HTML or PDF file."""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

from ..models import LoadFailure, SourceDocument

_MD_HEADING = re.compile(r"^ {0,3}#[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$")


_MD_FENCE = re.compile(r"^ {0,3}(```|~~~)")


def text_document(path: Path, text: str, resolved: str, content_type: str) -> SourceDocument:
    title = markdown_title(text) if content_type == "text/markdown" else None
    return SourceDocument(
        key=resolved,
        text=text,
        title=title or path.stem,
        source=resolved,
        content_type=content_type,
        metadata={"file_name": path.name},
    )


def markdown_title(text: str) -> str | None:
    in_fence = False
    for line in text.split("\n"):
        if _MD_FENCE.match(line):
            in_fence = not in_fence
        elif not in_fence and (m := _MD_HEADING.match(line)):
            return m.group(1)
    return None


def html_document(path: Path, html: str, resolved: str) -> SourceDocument | LoadFailure:
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


def pdf_document(path: Path, data: bytes, resolved: str) -> SourceDocument | LoadFailure:
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
