"""Concepts from document metadata: chosen metadata values, and a document's title with the shorter
names it gives (``title_aliases``)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from ..errors import ConfigurationError
from ..models import ConceptMention, SourceDocument
from .base import ALIAS_KIND, Collector
from .normalise import normalise_concept


class MetadataConceptExtractor:
    """Concepts from a document's metadata: its title and chosen metadata fields.

    ``title`` comes from ``doc.title`` (falling back to ``metadata["title"]``); other fields come
    from ``doc.metadata``. Strings and numbers give one concept, lists/tuples/sets one per item;
    other values (dicts, booleans, None) are skipped. Strings are not split on commas. The kind is
    ``metadata:<field>``. No fields: no concepts.
    """

    def __init__(self, fields: Sequence[str] = ("title", "author", "tags", "keywords")) -> None:
        if isinstance(fields, str):
            raise ConfigurationError(f"fields must be a sequence of field names, not the string {fields!r}")
        fields = tuple(fields)
        if not all(isinstance(f, str) and f for f in fields):
            raise ConfigurationError(f"fields must be non-empty strings, got {fields!r}")
        self.fields = fields

    def extract_document(self, doc: SourceDocument) -> list[ConceptMention]:
        """Concepts of one document, in field order then value order."""
        collected = Collector()
        for field in self.fields:
            value = doc.metadata.get(field)
            if field == "title" and doc.title is not None:
                value = doc.title
            for item in _metadata_values(value):
                name = normalise_concept(item, keep_numeric=True)
                if name is not None:
                    collected.add(name, " ".join(item.split()), f"metadata:{field}")
                if field == "title":
                    for alias in title_aliases(item):
                        alias_name = normalise_concept(alias, keep_numeric=True)
                        if alias_name is not None and alias_name != name:
                            collected.add(alias_name, alias, ALIAS_KIND)
        return collected.mentions()

    def extract_documents(self, docs: Iterable[SourceDocument]) -> list[list[ConceptMention]]:
        """:meth:`extract_document` for each document."""
        return [self.extract_document(doc) for doc in docs]

    def __repr__(self) -> str:
        return f"MetadataConceptExtractor(fields={self.fields!r})"


_QUALIFIER = re.compile(r"\s*\([^()]*\)\s*$")


def title_aliases(title: str) -> list[str]:
    """Shorter names a document's title gives it, by generic title conventions: without a trailing
    parenthetical qualifier ("Toto (band)" -> "Toto") and without a comma-separated qualifier
    ("Paris, Texas" -> "Paris", not "Installation, configuration and usage" -> "Installation").
    Text elsewhere refers to the document by these names."""
    title = " ".join(title.split())
    aliases = []
    base = _QUALIFIER.sub("", title)
    if base and base != title:
        aliases.append(base)
    head, _, qualifier = base.partition(",")
    head = head.strip()
    if head and qualifier and _names_a_place(qualifier):
        aliases.append(head)
    return aliases


def _names_a_place(qualifier: str) -> bool:
    """A comma qualifier as in "Paris, Texas": a few capitalised words. "Installation, configuration
    and usage" lists topics; its first part is not another name of the title."""
    words = qualifier.split()
    return 0 < len(words) <= 3 and all(w[0].isupper() or w[0].isdigit() for w in words)


def _metadata_values(value: Any) -> list[str]:
    if isinstance(value, (set, frozenset)):
        value = sorted(value, key=str)
    items = value if isinstance(value, (list, tuple)) else [value]
    values = []
    for item in items:
        if isinstance(item, str):
            values.append(item)
        elif isinstance(item, (int, float)) and not isinstance(item, bool):
            values.append(str(item))
    return values
