"""Metadata every file gets, for filters: a readable title from the file name, a date found in the
text's opening or in the file name, and the file's modified time."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from typing import Any

_MONTHS = {
    name: number
    for number, names in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ),
        start=1,
    )
    for name in names
}
_MONTH = "|".join(sorted(_MONTHS, key=len, reverse=True))
_YEAR = r"((?:19|20)\d{2})"
_DATES = (
    # 2023-07-01, 2023_07_01, 2023.07.01, 20230701
    (re.compile(rf"(?<!\d){_YEAR}[-_.]?(0[1-9]|1[0-2])[-_.]?(0[1-9]|[12]\d|3[01])(?!\d)"), ("y", "m", "d")),
    # July 1, 2023  /  Jul. 1 2023
    (re.compile(rf"\b({_MONTH})\.?\s+(\d{{1,2}}),?\s+{_YEAR}\b", re.IGNORECASE), ("month", "d", "y")),
    # 1 July 2023
    (re.compile(rf"\b(\d{{1,2}})\s+({_MONTH})\.?,?\s+{_YEAR}\b", re.IGNORECASE), ("d", "month", "y")),
)
_YEAR_ALONE = re.compile(rf"(?<!\d){_YEAR}(?!\d)")
#: Characters of a text's opening searched for its date (about a page).
OPENING_CHARS = 3_000
#: File stems that say nothing about the document: its folder names it instead.
_GENERIC_STEMS = frozenset({"index", "readme", "main", "default", "home", "document", "untitled"})


def find_date(text: str) -> dt.date | None:
    """The earliest-placed valid calendar date written in ``text`` (ISO, "July 1, 2023", "1 July 2023")."""
    found: list[tuple[int, dt.date]] = []
    for pattern, order in _DATES:
        for match in pattern.finditer(text):
            parts = dict(zip(order, match.groups()))
            month = int(parts["m"]) if "m" in parts else _MONTHS[parts["month"].lower()]
            try:
                found.append((match.start(), dt.date(int(parts["y"]), month, int(parts["d"]))))
            except ValueError:  # 31 June
                continue
            break
    return min(found)[1] if found else None


def file_metadata(path: Path, opening: str) -> dict[str, Any]:
    """``modified`` (the file's mtime, ISO 8601 UTC), ``date`` (the first date in ``opening``, else
    in the file name; ISO ``YYYY-MM-DD``) and ``year`` (of that date, else a year in the file name)."""
    metadata: dict[str, Any] = {}
    try:
        mtime = path.stat().st_mtime
    except OSError:
        mtime = None
    if mtime is not None:
        metadata["modified"] = dt.datetime.fromtimestamp(mtime, dt.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")
    date = find_date(opening[:OPENING_CHARS]) or find_date(path.stem)
    if date is not None:
        metadata["date"] = date.isoformat()
        metadata["year"] = date.year
    elif year := _YEAR_ALONE.search(path.stem):
        metadata["year"] = int(year.group(1))
    return metadata


#: The longest title a document may carry: a title is a name, and it is written above every chunk
#: of its document for the embedding and the full-text index.
MAX_TITLE_CHARS = 1_000


def fitting_title(title: str | None) -> str | None:
    """A title a file gave (its heading, ``<title>``, PDF Title) when it is not longer than
    ``MAX_TITLE_CHARS``; None otherwise, and the file name names the document."""
    return title if title and len(title) <= MAX_TITLE_CHARS else None


def readable_title(path: Path) -> str:
    """A title from a file name: separators as spaces, a lower-case start capitalised; a generic
    name (``index``, ``README``) is replaced by its folder's name."""
    stem = path.stem
    if stem.lower() in _GENERIC_STEMS and path.parent.name and path.parent.name not in (".", "/"):
        stem = path.parent.name
    words = re.sub(r"[_\s]+|(?<=[^\W\d_])-(?=[^\W\d_])" if " " not in stem else r"[_\s]+", " ", stem).strip()
    words = words or stem
    return words[0].upper() + words[1:] if words[:1].islower() else words


def pdf_date(value: str) -> str | None:
    """A PDF date string (``D:20230804060209-04'00'``) as ISO 8601, or None."""
    match = re.match(r"^(?:D:)?(\d{4})(\d{2})?(\d{2})?(\d{2})?(\d{2})?(\d{2})?([Zz]|[+-]\d{2}'?\d{2}'?)?", value.strip())
    if not match:
        return None
    year, month, day, hour, minute, second, zone = match.groups()
    try:
        stamp = dt.datetime(int(year), int(month or 1), int(day or 1), int(hour or 0), int(minute or 0), int(second or 0))
    except ValueError:
        return None
    text = stamp.isoformat()
    if zone and zone.upper() != "Z":
        digits = zone.replace("'", "")
        text += f"{digits[:3]}:{digits[3:5] or '00'}"
    elif zone:
        text += "Z"
    return text
