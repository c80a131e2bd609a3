"""Named entities and noun phrases from a spaCy pipeline (the default extractor)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError, model_validator

from ..blas import one_blas_thread
from ..checks import check_texts
from ..errors import ConfigurationError
from ..models import ConceptMention
from .base import NOUN_PHRASE, Found
from .normalise import normalise_concept
from .spacy_pipeline import load_spacy, require_language, resolve_pipeline_name

if TYPE_CHECKING:
    from spacy.language import Language
    from spacy.tokens import Doc, Span, Token


NUMERIC_ENTITY_LABELS = frozenset({"DATE", "TIME", "PERCENT", "MONEY", "QUANTITY", "ORDINAL", "CARDINAL"})
"""Entity labels skipped by default: values rather than things. Dates are left out too: a year is
shared by many unrelated passages (a noisy link), a full date is almost never shared (a stored row
that links nothing), and a question's embedding rarely lands near a bare date. Pass
``entity_labels`` to keep them."""
_NP_LEADING_POS = frozenset({"DET", "PRON", "NUM", "PUNCT", "SYM", "CCONJ", "ADP", "PART", "SPACE", "X"})
_TRAILING_POS = frozenset({"PUNCT", "PART", "SYM", "SPACE"})


class SpacyExtractorConfig(BaseModel):
    """Settings of :class:`SpacyConceptExtractor` (documented defaults)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    entities: StrictBool = Field(True, description="named entities become concepts (kind = entity label)")
    noun_chunks: StrictBool = Field(True, description="noun chunks become concepts (kind NOUN_PHRASE)")
    entity_labels: frozenset[str] | None = Field(
        None, description="entity labels to keep; None keeps every label except NUMERIC_ENTITY_LABELS"
    )
    min_chars: int = Field(3, ge=1, description="shortest noun-phrase name kept (entities need 2: UK, EU)")
    max_words: int = Field(6, ge=1, description="longest name kept, in words")
    batch_size: int = Field(64, ge=1, description="texts per nlp.pipe batch")
    single_nouns: StrictBool = Field(
        False,
        description=(
            "keep noun phrases that are one common noun ('drummer', 'album'); off by default: they are "
            "generic hubs that link unrelated chunks (one-word proper nouns are kept either way)"
        ),
    )

    @model_validator(mode="after")
    def _something_to_extract(self) -> SpacyExtractorConfig:
        if not (self.entities or self.noun_chunks):
            raise ValueError("entities and noun_chunks are both off: nothing would be extracted")
        return self


class SpacyConceptExtractor:
    """Named entities and noun phrases found by a spaCy pipeline.

    Entities keep their label as ``kind`` and are not lemmatised ("United States" -> "united
    states"); noun phrases get kind ``NOUN_PHRASE``, lose leading determiners, possessors, numbers
    and stop words, and have their head noun lemmatised ("the rivers" -> "river"); a phrase that is
    one common noun is dropped unless ``single_nouns``, one inside an entity is left to the entity.
    A name found both
    as an entity and as a noun phrase yields one mention with the entity's kind. ``count`` is the
    number of occurrences in the text; mentions are ordered by first occurrence.

    The pipeline is checked when the extractor is built and loaded on first use (or via ``.nlp``).
    """

    def __init__(
        self,
        spacy_model: str | Language = "auto",
        *,
        entities: bool = True,
        noun_chunks: bool = True,
        entity_labels: Collection[str] | None = None,
        min_chars: int = 3,
        max_words: int = 6,
        batch_size: int = 64,
        single_nouns: bool = False,
    ) -> None:
        if isinstance(entity_labels, str):
            raise ConfigurationError(f"entity_labels must be a collection of labels, not the string {entity_labels!r}")
        try:
            self.config = SpacyExtractorConfig(
                entities=entities,
                noun_chunks=noun_chunks,
                entity_labels=None if entity_labels is None else frozenset(entity_labels),
                min_chars=min_chars,
                max_words=max_words,
                batch_size=batch_size,
                single_nouns=single_nouns,
            )
        except ValidationError as exc:
            raise ConfigurationError(f"invalid SpacyConceptExtractor settings: {exc}") from exc
        self._nlp: Language | None = None
        self._pipeline_name: str | None = None
        if isinstance(spacy_model, str):
            self._pipeline_name = resolve_pipeline_name(spacy_model)
        else:
            self._nlp = require_language(spacy_model)

    @property
    def nlp(self) -> Language:
        """The spaCy pipeline (loaded on first access)."""
        if self._nlp is None:
            assert self._pipeline_name is not None
            self._nlp = load_spacy(self._pipeline_name)
        return self._nlp

    def extract(self, texts: Sequence[str]) -> list[list[ConceptMention]]:
        """Concepts of each text, one list per text, in input order."""
        texts = check_texts(texts, call="extract()", single="wrap a single text in a list")
        if not texts:
            return []
        nlp = self.nlp
        lemmatize = _head_lemmatizer(nlp)
        disable = _with_idle_embedders(nlp, self._unused_pipes(lemmatize is not None))
        stop_words = nlp.Defaults.stop_words
        with one_blas_thread():
            return [
                self._concepts(doc, stop_words, lemmatize)
                for doc in nlp.pipe(texts, batch_size=self.config.batch_size, disable=disable)
            ]

    def _unused_pipes(self, own_lemmatizer: bool) -> list[str]:
        unused = ["lemmatizer"] if own_lemmatizer else []  # only head nouns are lemmatised, by us
        if not self.config.entities:
            unused.append("ner")
        if not self.config.noun_chunks:
            # entities need none of these (NER has its own features); noun chunks need all three
            unused.extend(("parser", "tagger", "attribute_ruler"))
        return unused

    def _wants_label(self, label: str) -> bool:
        labels = self.config.entity_labels
        return label not in NUMERIC_ENTITY_LABELS if labels is None else label in labels

    def _concepts(
        self, doc: Doc, stop_words: Collection[str], lemmatize: Callable[[Token], str] | None
    ) -> list[ConceptMention]:
        cfg = self.config
        found: dict[str, Found] = {}
        entity_spans: dict[str, list[tuple[int, int]]] = {}

        def add(name: str, kind: str, span: Span) -> None:
            item = found.get(name)
            display = " ".join(span.text.split())
            if item is None:
                found[name] = Found(display, kind, 1, span.start_char)
                return
            item.count += 1
            if span.start_char < item.first:
                item.display, item.first = display, span.start_char

        if cfg.entities:
            for ent in doc.ents:
                if not self._wants_label(ent.label_):
                    continue
                span = _trim_entity(ent)
                if span is None:
                    continue
                name = normalise_concept(span.text, stop_words=stop_words, keep_numeric=True)
                if name is None or len(name) < 2 or len(name.split()) > cfg.max_words:
                    continue
                add(name, ent.label_, span)
                entity_spans.setdefault(name, []).append((ent.start_char, ent.end_char))

        if cfg.noun_chunks and len(doc):
            if not doc.has_annotation("DEP"):
                raise ConfigurationError(
                    f"spaCy pipeline {self._describe()} has no dependency parser, which noun chunks "
                    "need; use a pipeline with a parser or noun_chunks=False"
                )
            for chunk in doc.noun_chunks:
                span = _trim_noun_phrase(chunk)
                if span is None:
                    continue
                head = span[-1]
                if len(span) == 1 and head.pos_ != "PROPN" and not cfg.single_nouns:
                    continue
                if cfg.entities and all(token.ent_type_ and self._wants_label(token.ent_type_) for token in span):
                    continue  # part of an entity ("the University" of "the University of Oxford")
                lemma = None
                # only a head that is a whole word ("south-east" must not become "east")
                if head.pos_ == "NOUN" and (len(span) == 1 or span[-2].whitespace_):
                    lemma = lemmatize(head) if lemmatize is not None else head.lemma_
                name = normalise_concept(span.text, lemma, stop_words=stop_words)
                if name is None or len(name) < cfg.min_chars or len(name.split()) > cfg.max_words:
                    continue
                spans = entity_spans.get(name, ())
                if any(start < chunk.end_char and chunk.start_char < end for start, end in spans):
                    continue  # the same words, already counted as the entity
                add(name, NOUN_PHRASE, span)

        ordered = sorted(found.items(), key=lambda item: item[1].first)
        return [ConceptMention(name=name, display=f.display, kind=f.kind, count=f.count) for name, f in ordered]

    def _describe(self) -> str:
        if self._pipeline_name is not None:
            return repr(self._pipeline_name)
        meta = self.nlp.meta
        return repr(f"{meta.get('lang', '')}_{meta.get('name', '')}" if meta.get("name") else "(unnamed pipeline)")

    def __repr__(self) -> str:
        return f"SpacyConceptExtractor({self._describe()}, {self.config!r})"


def _with_idle_embedders(nlp: Language, unused: list[str]) -> list[str]:
    """``unused`` (those the pipeline has) plus shared tok2vec/transformer components whose
    listeners are all unused: en_core_web_sm's NER has its own, so entities alone skip tok2vec."""
    disable = [name for name in unused if name in nlp.pipe_names]
    for name, component in nlp.pipeline:
        listeners = getattr(component, "listening_components", None)
        if listeners and all(listener in disable for listener in listeners):
            disable.append(name)
    return disable


def _head_lemmatizer(nlp: Language) -> Callable[[Token], str] | None:
    """The pipeline's rule/lookup lemmatizer as a per-token function, so it can run on head nouns
    only (running it on every token costs ~20% of pipeline time). ``None`` when there is no such
    component: tokens then keep whatever ``lemma_`` the pipeline set."""
    if "lemmatizer" not in nlp.component_names:
        return None
    component = nlp.get_pipe("lemmatizer")
    lemmatize = getattr(component, "lemmatize", None)
    if not callable(lemmatize):
        return None

    def head_lemma(token: Token) -> str:
        lemmas = lemmatize(token)
        return lemmas[0] if lemmas else token.text

    return head_lemma


def _trim_entity(ent: Span) -> Span | None:
    start, end = ent.start, ent.end
    doc = ent.doc
    while start < end and doc[start].lower_ in ("the", "a", "an"):
        start += 1
    while end > start and (_is_possessive(doc[end - 1]) or doc[end - 1].is_punct or doc[end - 1].is_space):
        end -= 1
    return doc[start:end] if end > start else None


def _is_possessive(token: Token) -> bool:
    return token.tag_ == "POS" or token.norm_ in ("'s", "'")


def _trim_noun_phrase(chunk: Span) -> Span | None:
    doc = chunk.doc
    start, end = chunk.start, chunk.end
    # "Obama's dogs" -> "dogs": the possessor is a determiner here (and usually an entity of its own)
    for i in range(end - 2, start - 1, -1):
        if doc[i].tag_ == "POS":
            start = i + 1
            break
    while start < end and _is_np_filler(doc[start]):
        start += 1
    while end > start and (doc[end - 1].tag_ == "POS" or doc[end - 1].pos_ in _TRAILING_POS):
        end -= 1
    return doc[start:end] if end > start else None


def _is_np_filler(token: Token) -> bool:
    return (
        token.is_stop
        or token.like_num
        or token.pos_ in _NP_LEADING_POS
        or token.ent_type_ in NUMERIC_ENTITY_LABELS
    )
