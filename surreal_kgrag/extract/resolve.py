"""``resolve_extractor``: an extractor from a setting (a pipeline name, a spaCy ``Language``, an object
with ``extract``, a function, or nothing)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, cast

from ..errors import ConfigurationError
from .base import ConceptExtractor, ConceptItem
from .functions import CallableConceptExtractor
from .spacy_extractor import SpacyConceptExtractor
from .spacy_pipeline import is_spacy_language

if TYPE_CHECKING:
    from spacy.language import Language


def resolve_extractor(spec: str | ConceptExtractor | Language | Callable[[str], Iterable[ConceptItem]] | None) -> ConceptExtractor:
    """Build an extractor from a setting.

    ``None``, ``"auto"``, ``"spacy"`` -> ``SpacyConceptExtractor()``; another string -> a spaCy
    pipeline of that name; a spaCy ``Language`` -> an extractor over it; an object with
    ``extract`` -> itself; any other callable -> :class:`CallableConceptExtractor`.
    """
    if spec is None or spec in ("auto", "spacy"):
        return SpacyConceptExtractor()
    if isinstance(spec, str):
        return SpacyConceptExtractor(spec)
    if is_spacy_language(spec):  # before the callable check: a Language is callable
        return SpacyConceptExtractor(cast("Language", spec))
    if isinstance(spec, ConceptExtractor):
        return spec
    if callable(spec):
        return CallableConceptExtractor(cast("Callable[[str], Iterable[ConceptItem]]", spec))
    raise ConfigurationError(
        f"cannot use {type(spec).__name__} as a concept extractor; pass None, a spaCy pipeline name, "
        "a spacy Language, an object with extract(texts), or a function text -> concepts"
    )
