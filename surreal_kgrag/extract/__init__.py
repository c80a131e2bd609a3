"""Concept extraction: named entities and noun phrases (spaCy), metadata values, or your own function.

A concept's ``name`` (see :func:`normalise_concept`) is its identity in the store: chunks whose
concepts share a name are linked through one ``concept`` record, so the same thing written in
different ways ("The Rivers", "river") should normalise to the same name.

One module per job: ``normalise`` (names), ``spacy_pipeline`` (loading spaCy), ``spacy_extractor``,
``metadata`` (metadata and title concepts), ``functions`` (your own function), ``resolve``; the
protocol and the concept kinds in ``base``.
"""

from .base import ALIAS_KIND, NOUN_PHRASE, TITLE_KIND, ConceptExtractor, ConceptItem
from .functions import CallableConceptExtractor
from .metadata import MetadataConceptExtractor, title_aliases
from .normalise import normalise_concept
from .resolve import resolve_extractor
from .spacy_extractor import NUMERIC_ENTITY_LABELS, SpacyConceptExtractor, SpacyExtractorConfig
from .spacy_pipeline import AUTO_SPACY_PIPELINES, load_spacy

__all__ = [
    "ALIAS_KIND",
    "AUTO_SPACY_PIPELINES",
    "NOUN_PHRASE",
    "NUMERIC_ENTITY_LABELS",
    "TITLE_KIND",
    "CallableConceptExtractor",
    "ConceptExtractor",
    "ConceptItem",
    "MetadataConceptExtractor",
    "SpacyConceptExtractor",
    "SpacyExtractorConfig",
    "load_spacy",
    "normalise_concept",
    "resolve_extractor",
    "title_aliases",
]
