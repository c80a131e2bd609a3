"""Concept names: ``normalise_concept`` turns a surface form into the name that is a concept's identity
in the store, so the same thing written in different ways ("The Rivers", "river") meets in one record."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Collection

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
