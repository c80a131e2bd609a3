"""Phrase matching of stored concept names in a text: the question at query time, chunk texts at ingest.

Concept names are normalised phrases (:func:`surreal_kgrag.extract.normalise_concept`) and a
concept's record id is its name, so "which stored names does this text contain" is answered by
normalising every word n-gram of the text the same way and asking the store which of those names
exist (one lookup of record ids, always current, shared by every process using the store). No
tokenizer decides where a name starts: spaCy splits title-cased names in questions ("Who directed
The Piano?"), a phrase lookup does not.

:func:`spans` lists the candidate n-grams; :func:`longest_matches` keeps, among the ones the store
knows, the longest non-overlapping ones, better tiers first (titles before entities before noun
phrases), so "new york city" wins over "new york" and "york".
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache

from .extract import normalise_concept
from .extract.normalise import can_end_with

#: Longest name (in words) looked up.
MAX_WORDS = 8
#: Candidate n-grams a text yields at most (a bound on the lookup's size for a long text).
MAX_CANDIDATES = 4000

_WORD = re.compile(r"\S+")
# A word ending a sentence or clause ends a name ("Toto. The band" is not one name); a short
# abbreviation ("St.", "Jr.", "U.S.") does not.
_CLAUSE_END = re.compile(r"[;:!?]['\")\]]*$|(?<=\w{4})\.['\")\]]*$")
_CLAUSE_LAST = frozenset(";:!?.'\")]")
_OPENING = "\"'([{\u201c\u2018"
# Words that are capitalised in titles without making a phrase a name ("Who Directed The Piano").
_MINOR = frozenset("a an and at by for from in into of on or the to with".split())


@dataclass(frozen=True)
class Span:
    """Words ``start`` to ``end`` (exclusive) of a text, normalised to a concept ``name``."""

    start: int
    end: int
    name: str
    text: str
    capitalised: bool

    @property
    def length(self) -> int:
        return self.end - self.start


def _clean(text: str) -> str:
    return unicodedata.normalize("NFKC", text)


def _capital(word: str) -> bool:
    """The word starts with an upper-case letter or a digit (after any opening quote or bracket)."""
    first = word[:1]
    if first in _OPENING:
        first = word.lstrip(_OPENING)[:1]
    return first.isupper() or first.isdigit()


def _ends_clause(word: str) -> bool:
    # Only a word ending in one of these can match (the regular expression is the slow part).
    return word[-1:] in _CLAUSE_LAST and bool(_CLAUSE_END.search(word))


def spans(
    text: str, *, max_words: int = MAX_WORDS, capitalised_only: bool = False, plurals: bool = False, only: str | None = None
) -> list[Span]:
    """Every n-gram of up to ``max_words`` words that normalises to a usable name, within clauses.

    ``capitalised_only``: only n-grams whose first and last words are capitalised (or numbers), the
    way a name is written in running text; used at ingest, where a chunk yields hundreds of
    n-grams otherwise. ``plurals``: also the n-gram with a trailing "s" dropped from its last word
    (noun-phrase concepts are stored under their head noun's lemma: "rivers" -> "river").
    ``only``: just the n-grams that normalise to this name, without normalising those whose last
    word cannot end it (the ingest's search for a new title in stored chunks); not with ``plurals``.
    """
    if only is not None and plurals:
        raise ValueError("spans(): `only` and `plurals` do not go together")
    words = _WORD.findall(_clean(text))
    capitals = [_capital(word) for word in words]
    if only is not None:
        last = only.rsplit(" ", 1)[-1]
        can_end = [(capitals[k] or not capitalised_only) and can_end_with(word, last) for k, word in enumerate(words)]
        if not any(can_end):
            return []
    ends_clause = [_ends_clause(word) for word in words]
    # Capitalised as a name is: some word other than the text's first or a minor word. named[k]:
    # how many of words[:k] are.
    named = [0]
    for k, word in enumerate(words):
        named.append(named[-1] + (capitals[k] and k > 0 and word.lower() not in _MINOR))
    out: list[Span] = []
    for i in range(len(words)):
        if capitalised_only and not capitals[i]:
            continue
        for j in range(i, min(len(words), i + max_words)):
            if j > i and ends_clause[j - 1]:
                break
            if (capitalised_only and not capitals[j]) or (only is not None and not can_end[j]):
                continue
            phrase = " ".join(words[i : j + 1])
            name = _name(phrase)
            if name is None or (only is not None and name != only):
                continue
            capital = named[j + 1] > named[i]
            out.append(Span(i, j + 1, name, phrase, capital))
            if plurals and len(name) > 4 and name.endswith("s") and not name.endswith("ss"):
                out.append(Span(i, j + 1, name[:-1], phrase, capital))
            if len(out) >= MAX_CANDIDATES:
                return out
    return out


def names(found: Iterable[Span]) -> list[str]:
    """The distinct names of ``found``, in first-seen order."""
    return list(dict.fromkeys(span.name for span in found))


def longest_matches(candidates: Iterable[Span], tier: Mapping[str, int] | Callable[[str], int | None]) -> list[Span]:
    """The candidates whose name has a tier (0 best), non-overlapping: lower tiers first, within a
    tier the longest first, then leftmost. A name found twice is kept at each place."""
    lookup = tier.get if isinstance(tier, Mapping) else tier
    ranked = []
    for span in candidates:
        level = lookup(span.name)
        if level is not None:
            ranked.append((level, -span.length, span.start, span))
    ranked.sort(key=lambda item: item[:3])
    used: set[int] = set()
    kept: list[Span] = []
    for _, _, _, span in ranked:
        positions = range(span.start, span.end)
        if used.intersection(positions):
            continue
        used.update(positions)
        kept.append(span)
    return sorted(kept, key=lambda s: s.start)


#: Longest n-gram whose name is cached.
_CACHED_CHARS = 200


def _name(phrase: str) -> str | None:
    # N-grams repeat across chunks (names, sentence openings); a long one (a run of table cells or
    # code) is not kept, as in last_word_forms: the cache's memory stays bounded whatever a document holds.
    return _cached_name(phrase) if len(phrase) <= _CACHED_CHARS else _uncached_name(phrase)


def _uncached_name(phrase: str) -> str | None:
    return normalise_concept(phrase, keep_numeric=False)


_cached_name = lru_cache(maxsize=1 << 16)(_uncached_name)
