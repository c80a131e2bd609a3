"""Concepts from document metadata: chosen metadata values, and a document's title with the shorter
names it gives (``title_aliases``)."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence
from typing import Any

from ..errors import ConfigurationError
from ..models import ConceptMention, SourceDocument
from .base import ALIAS_KIND, Collector
from .normalise import normalise_concept

logger = logging.getLogger(__name__)

#: Most concepts one document's metadata gives (``MetadataConceptExtractor``, ``IngestConfig``).
MAX_METADATA_CONCEPTS = 64


class MetadataConceptExtractor:
    """Concepts from a document's metadata: its title and chosen metadata fields.

    ``title`` comes from ``doc.title`` (falling back to ``metadata["title"]``); other fields come
    from ``doc.metadata``. Strings and numbers give one concept, lists/tuples/sets one per item;
    other values (dicts, booleans, None) are skipped. Strings are not split on commas. The kind is
    ``metadata:<field>``. No fields: no concepts.

    Each concept is linked to every chunk of the document, so a document gives at most
    ``max_concepts`` (the first, in that order; the rest are logged and left out, the metadata
    itself is stored whole): a list of 20,000 tags would otherwise be 20,000 edges a chunk.
    """

    def __init__(self, fields: Sequence[str] = ("title", "author", "tags", "keywords"), max_concepts: int = MAX_METADATA_CONCEPTS) -> None:
        if isinstance(fields, str):
            raise ConfigurationError(f"fields must be a sequence of field names, not the string {fields!r}")
        fields = tuple(fields)
        if not all(isinstance(f, str) and f for f in fields):
            raise ConfigurationError(f"fields must be non-empty strings, got {fields!r}")
        if isinstance(max_concepts, bool) or not isinstance(max_concepts, int) or max_concepts < 0:
            raise ConfigurationError(f"max_concepts must be an integer >= 0, got {max_concepts!r}")
        self.fields = fields
        self.max_concepts = max_concepts

    def extract_document(self, doc: SourceDocument) -> list[ConceptMention]:
        """Concepts of one document, in field order then value order (at most ``max_concepts``)."""
        collected = Collector()
        left_out = 0
        for field in self.fields:
            value = doc.metadata.get(field)
            if field == "title" and doc.title is not None:
                value = doc.title
            for item in _metadata_values(value):
                names = [(normalise_concept(item, keep_numeric=True), " ".join(item.split()), f"metadata:{field}")]
                if field == "title":
                    names += [(normalise_concept(alias, keep_numeric=True), alias, ALIAS_KIND) for alias in title_aliases(item)]
                for name, display, kind in names:
                    if name is None:
                        continue
                    if name in collected or len(collected) < self.max_concepts:
                        collected.add(name, display, kind)
                    else:
                        left_out += 1
        if left_out:
            logger.warning(
                "document %r: %d metadata values past the first %d were not made concepts (max_metadata_concepts); "
                "they are stored in its metadata",
                doc.key,
                left_out,
                self.max_concepts,
            )
        return collected.mentions()

    def extract_documents(self, docs: Iterable[SourceDocument]) -> list[list[ConceptMention]]:
        """:meth:`extract_document` for each document."""
        return [self.extract_document(doc) for doc in docs]

    def __repr__(self) -> str:
        return f"MetadataConceptExtractor(fields={self.fields!r}, max_concepts={self.max_concepts})"


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
