"""Concept names: ``normalise_concept`` turns a surface form into the name that is a concept's identity
in the store, so the same thing written in different ways ("The Rivers", "river") meets in one record."""

from __future__ import annotations

import functools
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


#: The longest concept name: a longer phrase (a title of thousands of characters, a run-on table
#: cell) names nothing a question would, and its record id and title search grow with it.
MAX_NAME_CHARS = 300

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
    Rejected: empty results, phrases made only of pronouns, determiners or ``stop_words``, names
    longer than ``MAX_NAME_CHARS``, and (unless ``keep_numeric``) strings with no letters besides
    numbers ("1954", "the 1970s", "21st").
    """
    words = _clean_ends(_fold(text).split())
    while len(words) > 1 and words[0] in _LEADING_WORDS:
        words.pop(0)
    if lemma_last and words:
        lemma = unicodedata.normalize("NFKC", lemma_last).casefold().strip()
        if lemma and not lemma.isspace():
            words[-1] = lemma
    if not words:
        return None
    name = " ".join(words)
    if len(name) > MAX_NAME_CHARS:
        return None
    # A name starting with a letter has one no number swallows.
    if not keep_numeric and not name[0].isalpha() and not any(ch.isalpha() for ch in _NUMBER.sub("", name)):
        return None
    if all(word in _FUNCTION_WORDS or word in stop_words for word in words):
        return None
    return name


def last_word_forms(word: str) -> frozenset[str]:
    """What one word of a text becomes as the last word of a name :func:`normalise_concept` makes of
    a phrase ending with it: its end stripped (the last of several words), or both ends (alone).
    ``""`` among them: the word can vanish, and the name end with an earlier one."""
    # Words repeat from text to text; a long one (a token of a table or a code listing) is not cached.
    return _cached_forms(word) if len(word) <= 48 else _forms(word)


def can_end_with(word: str, last: str) -> bool:
    """Whether a name :func:`normalise_concept` makes of a phrase ending with ``word`` can end with the
    word ``last``: ``word`` becomes ``last`` there, or vanishes (see :func:`last_word_forms`)."""
    # Every form is a piece of the folded word, and only a word without letters or digits can
    # vanish: most words are ruled out without computing their forms.
    if last not in _fold(word) and any(char.isalnum() for char in word):
        return False
    forms = last_word_forms(word)
    return last in forms or "" in forms


def _forms(word: str) -> frozenset[str]:
    folded = _fold(word).split()
    if len(folded) != 1:
        return frozenset({""})
    forms = set()
    for words in (["x", folded[0]], folded):
        cleaned = _clean_ends(words)
        forms.add(cleaned[-1] if len(cleaned) == len(words) else "")
    return frozenset(forms)


_cached_forms = functools.lru_cache(maxsize=1 << 14)(_forms)


def _fold(text: str) -> str:
    return unicodedata.normalize("NFKC", text).translate(_APOSTROPHES).casefold()


def _clean_ends(words: list[str]) -> list[str]:
    """Punctuation off both ends of the phrase and a possessive off its last word."""
    if words and words[0][:1].isalnum() and words[-1][-1:].isalnum() and not words[-1].endswith("'s"):
        return words  # the common case: nothing to take off
    return _take_off_ends(words)


def _take_off_ends(words: list[str]) -> list[str]:
    words = _strip_end_punctuation(words)
    if words and words[-1].endswith("'s") and len(words[-1]) > 2:
        words[-1] = words[-1][:-2]
    elif words and words[-1].endswith("'") and len(words[-1]) > 1:
        words[-1] = words[-1][:-1]
    return _strip_end_punctuation(words)


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
    # Most words end in a letter or digit: no category lookup for them (phrase matching at ingest
    # normalises hundreds of n-grams a chunk).
    if word and word[0 if leading else -1].isalnum():
        return word
    if leading:
        start = 0
        while start < len(word) and _is_punct(word[start]):
            start += 1
        return word[start:]
    end = len(word)
    while end and _is_punct(word[end - 1]):
        end -= 1
    return word[:end]


def _is_punct(char: str) -> bool:
    return unicodedata.category(char).startswith("P") or char in _QUOTE_SYMBOLS
