"""What identifies a document, and what a question says about which document it wants.

A long document is one node of the graph with its own names: its title and the parts of its file
name, the periods they name ("2023 Q3" -> ``"2023 q3"``), its metadata concepts and the entities it
is about (named in many of its chunks, or on its first page). Those names are stored on the
document (``document.names``) and matched at query time against every n-gram of the question and
the periods it names (``"Q3 2023"``, ``"third quarter of 2023"`` -> ``"2023 q3"``), so a question
that names a document's company and quarter finds it however long it is, without a per-chunk hub
limit in the way. Rarity is counted over documents (see
:func:`surreal_kgrag.retrieval.documents.named_documents`), so a name every document carries
("10-Q", "United States") weighs nothing.

A question asking for the latest or most recent document, with no period named, is answered by
ordering equally identified documents by ``document.date`` (the period or date the title, file name
or metadata give), newest first.

Nothing here knows a corpus, a file-name pattern or a document type: periods and dates are read
from any text, entities come from the extractor's mentions.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import date, datetime
from pathlib import PurePath
from typing import Any

from .extract import NOUN_PHRASE, NUMERIC_ENTITY_LABELS, normalise_concept
from .models import ConceptMention, SourceDocument

#: A name is one of a document's entities when at least this share of its chunks mention it
#: (and at least ``MIN_CHUNKS``): what the document is about, not what it cites once.
PROMINENT_SHARE = 0.1
MIN_CHUNKS = 3
#: Chunks read as a long document's first page when the loader knew no pages: the entities named
#: there identify it (a report's cover). A document of at most twice as many chunks has no first
#: page apart from its body.
FIRST_CHUNKS = 2
#: Most names a document keeps (the most prominent first): bounds the record and the lookup.
MAX_NAMES = 64

_ORDINALS = {"first": 1, "1st": 1, "second": 2, "2nd": 2, "third": 3, "3rd": 3, "fourth": 4, "4th": 4}
_YEAR = r"(?:fy\s?)?('?\d{2}|\d{4})"
_QUARTER_FIRST = re.compile(r"\bq([1-4])\s*(?:of\s+)?(?:fy|fiscal(?:\s+year)?)?\s*" + _YEAR + r"\b", re.IGNORECASE)
_YEAR_FIRST = re.compile(r"\b" + _YEAR + r"[\s_-]*q([1-4])\b", re.IGNORECASE)
_SPELLED = re.compile(
    r"\b(first|second|third|fourth|1st|2nd|3rd|4th)\s+(?:fiscal\s+)?quarter\s+(?:of\s+)?(?:fiscal\s+(?:year\s+)?)?"
    + _YEAR
    + r"\b",
    re.IGNORECASE,
)
_ISO_DATE = re.compile(r"(?<!\d)((?:19|20)\d{2})[-_./]?(0[1-9]|1[0-2])[-_./]?(0[1-9]|[12]\d|3[01])(?!\d)")
_LATEST = re.compile(r"\b(?:latest|most\s+recent|newest)\b", re.IGNORECASE)
_NAME_PARTS = re.compile(r"[\s_.,;()\[\]]+")
# Legal-form words that end an organisation's name ("Apple Inc.", "Intel Corporation", "Amazon.com,
# Inc."): text elsewhere names it without them, so the name without them identifies it too.
_LEGAL_FORM = re.compile(
    r"(?:[\s,]+(?:inc|incorporated|corp|corporation|co|company|ltd|limited|llc|llp|plc|lp|gmbh|ag|sa|nv|bv|se|spa|oyj|ab|asa)\.?)+$"
    r"|\.com$",
    re.IGNORECASE,
)
_ORGANISATION = "ORG"
# Metadata keys whose value is the document's date (a loader's or the caller's), first found wins.
DATE_KEYS = ("date", "period", "published", "creation_date", "created", "modified")


def periods(text: str) -> list[str]:
    """The quarters ``text`` names, canonical (``"Q3 FY24"``, ``"2024 Q3"``, ``"third quarter of
    2024"`` -> ``"2024 q3"``), in first-seen order."""
    found: list[tuple[int, str]] = []
    for match in _QUARTER_FIRST.finditer(text):
        found.append((match.start(), _period(match.group(2), match.group(1))))
    for match in _YEAR_FIRST.finditer(text):
        found.append((match.start(), _period(match.group(1), match.group(2))))
    for match in _SPELLED.finditer(text):
        found.append((match.start(), _period(match.group(2), str(_ORDINALS[match.group(1).lower()]))))
    return list(dict.fromkeys(name for _, name in sorted(found) if name))


def asks_latest(question: str) -> bool:
    """Whether the question asks for the newest document and names no period itself."""
    return bool(_LATEST.search(question)) and not periods(question)


def _period(year: str, quarter: str) -> str:
    digits = year.lstrip("'")
    value = int(digits) + 2000 if len(digits) == 2 else int(digits)
    return f"{value} q{quarter}" if 1900 < value < 2200 else ""


def document_date(doc: SourceDocument) -> str | None:
    """A sortable date for ``doc`` (ISO ``YYYY-MM-DD``): from a date metadata field, else the first
    period or date its title or file name names; None when nothing gives one."""
    for key in DATE_KEYS:
        value = _as_date(doc.metadata.get(key))
        if value:
            return value
    for text in (doc.title or "", _stem(doc.source)):
        value = _as_date(text)
        if value:
            return value
    return None


def _as_date(value: Any) -> str | None:
    if isinstance(value, datetime):
        return value.date().isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if not isinstance(value, str) or not value.strip():
        return None
    found = periods(value)
    if found:
        year, quarter = found[0].split(" q")
        return f"{year}-{3 * int(quarter) - 2:02d}-01"
    match = _ISO_DATE.search(value)
    return f"{match.group(1)}-{match.group(2)}-{match.group(3)}" if match else None


def _stem(source: str) -> str:
    if not source or "://" in source:
        return ""
    return PurePath(source).stem


def document_names(
    doc: SourceDocument,
    doc_concepts: Sequence[ConceptMention],
    chunk_mentions: Sequence[Iterable[ConceptMention]],
    pages: Sequence[int | None] | None = None,
) -> list[str]:
    """The names that identify ``doc``: its metadata concepts (title, aliases, chosen fields), the
    words and periods of its title and file name, the entities named on its first page (``pages``:
    each chunk's first page, when known; else its first chunks) and the
    entities at least ``PROMINENT_SHARE`` of its chunks mention (most prominent first)."""
    names: dict[str, None] = {}

    def add(name: str | None) -> None:
        if name:
            names.setdefault(name)

    for mention in doc_concepts:
        add(mention.name)
    stem = _stem(doc.source)
    for text in (doc.title or "", stem):
        add(normalise_concept(text, keep_numeric=True))
        for period in periods(text):
            add(period)
    for part in _NAME_PARTS.split(stem):  # a file name strings fields together: "2023 Q3 AAPL"
        add(normalise_concept(part, keep_numeric=True) if len(part) > 1 else None)
    chunks = [[m for m in mentions if m.kind != NOUN_PHRASE and m.kind not in NUMERIC_ENTITY_LABELS] for mentions in chunk_mentions]
    chunks = [[*mentions, *_short_names(mentions)] for mentions in chunks]
    if len(chunks) > 2 * FIRST_CHUNKS:  # long enough to have a first page apart from its body
        # The chunks of page 1 when the loader knew pages (a cover split by its headings is many
        # small chunks), else the first ones.
        first = [i for i, page in enumerate(pages or []) if page == 1] or list(range(FIRST_CHUNKS))
        for i in first:
            for mention in chunks[i]:
                add(mention.name)
    spread = Counter(name for mentions in chunks for name in {m.name for m in mentions})
    least = max(MIN_CHUNKS, PROMINENT_SHARE * len(chunks))
    for name, n in spread.most_common():
        if n < least:
            break
        add(name)
    return list(names)[:MAX_NAMES]


def _short_names(mentions: Iterable[ConceptMention]) -> list[ConceptMention]:
    """Organisations again without their legal form ("apple inc" -> "apple", "amazon.com" -> "amazon")."""
    out = []
    for mention in mentions:
        if mention.kind != _ORGANISATION:
            continue
        display, previous = mention.display, ""
        while display != previous:
            display, previous = _LEGAL_FORM.sub("", display).strip(" ,"), display
        short = normalise_concept(display, keep_numeric=True)
        if short and short != mention.name:
            out.append(mention.model_copy(update={"name": short}))
    return out
