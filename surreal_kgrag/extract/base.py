"""What every concept extractor is (``ConceptExtractor``), the ``kind`` values of concepts that do not
come from an entity label, and how extractors count what they find in a text (``Collector``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ..models import ConceptMention

TITLE_KIND = "metadata:title"
"""``kind`` of a document's title concept."""


ALIAS_KIND = "metadata:alias"
"""``kind`` of the other names a title gives its document (see :func:`title_aliases`)."""


NOUN_PHRASE = "NOUN_PHRASE"
"""``kind`` of concepts that come from noun chunks (entities use their label: PERSON, ORG, ...)."""


@runtime_checkable
class ConceptExtractor(Protocol):
    """Finds concepts in texts; one list of mentions per input text, in input order."""

    def extract(self, texts: Sequence[str]) -> list[list[ConceptMention]]: ...


@dataclass
class Found:
    display: str
    kind: str
    count: int
    first: int  # character offset of the first occurrence, for a stable order


ConceptItem = str | tuple[str, str] | ConceptMention


class Collector:
    """Merges mentions by name: first display and kind win, counts add up, first-seen order."""

    def __init__(self) -> None:
        self._found: dict[str, Found] = {}

    def add(self, name: str, display: str, kind: str, count: int = 1) -> None:
        item = self._found.get(name)
        if item is None:
            self._found[name] = Found(display, kind, count, len(self._found))
        else:
            item.count += count

    def __len__(self) -> int:
        return len(self._found)

    def __contains__(self, name: str) -> bool:
        return name in self._found

    def mentions(self) -> list[ConceptMention]:
        return [ConceptMention(name=n, display=f.display, kind=f.kind, count=f.count) for n, f in self._found.items()]
