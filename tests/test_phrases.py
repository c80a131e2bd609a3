"""Phrase matching (surreal_kgrag.phrases): the ingest's search for one name in a stored chunk
(``spans(..., only=name)``) finds exactly the n-grams the full candidate list has under that name,
whatever the text's punctuation, apostrophes, determiners and capitals."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from surreal_kgrag import phrases
from surreal_kgrag.extract import normalise, normalise_concept
from surreal_kgrag.extract.normalise import can_end_with, last_word_forms

# Pieces that exercise every step of normalise_concept: opening and closing punctuation, typographic
# and TeX quotes, possessives, leading determiners, numbers, abbreviations, case folding (ß, İ, Σ).
PIECES = [
    "The", "the", "A", "of", "Beatles", "Beatles'", "Beatles's", "Beatles’s", "(Abbey", "Road)", "Road,", "Road.",
    "``Hungry", "Eyes''", "U.S.", "St.", "Jr.", "1970s", "21st", "1,000", "ΟΔΟΣ", "Straße", "İstanbul", "New", "York",
    "York;", "City", "—", "''", "'", "\"Quoted\"", "x", "river", "Rivers", "Who", "his", "All", "[Note]",
]
texts = st.lists(st.sampled_from(PIECES), min_size=1, max_size=16).map(" ".join)


@settings(max_examples=400, deadline=None)
@given(text=texts, capitalised_only=st.booleans(), extra=st.sampled_from(["beatles", "road", "new york city", "zzz", "s"]))
def test_only_finds_exactly_the_full_lists_spans_of_that_name(text: str, capitalised_only: bool, extra: str) -> None:
    full = phrases.spans(text, capitalised_only=capitalised_only)
    for name in {span.name for span in full} | {extra}:
        assert phrases.spans(text, capitalised_only=capitalised_only, only=name) == [s for s in full if s.name == name]


@settings(max_examples=400, deadline=None)
@given(words=st.lists(st.sampled_from(PIECES), min_size=1, max_size=5))
def test_a_name_ends_with_a_form_of_its_phrases_last_word(words: list[str]) -> None:
    name = normalise_concept(" ".join(words))
    forms = last_word_forms(words[-1])
    if name is not None:
        assert "" in forms or name.rsplit(" ", 1)[-1] in forms, (words, name, forms)


def test_the_reverse_bridge_check_on_a_real_passage() -> None:
    text = (
        "Paul McCartney recorded at Abbey Road Studios with the Beatles' producer. The Beatles's "
        "last album, (Abbey Road), was named after the street; Abbey Road."
    )
    found = phrases.spans(text, capitalised_only=True, only="abbey road")
    assert [(s.start, s.end, s.text) for s in found] == [(4, 6, "Abbey Road"), (15, 17, "(Abbey Road),"), (22, 24, "Abbey Road.")]
    # Every n-gram that normalises to the name, nested ones too: longest_matches then keeps the longest.
    beatles = phrases.spans(text, capitalised_only=True, only="beatles")
    assert [s.text for s in beatles] == ["Beatles'", "The Beatles's", "Beatles's"]
    assert [s.text for s in phrases.longest_matches(beatles, {"beatles": 0})] == ["Beatles'", "The Beatles's"]
    assert phrases.spans(text, capitalised_only=True, only="abbey road studios")[0].text == "Abbey Road Studios"


def test_only_and_plurals_are_refused_together() -> None:
    with pytest.raises(ValueError, match="only"):
        phrases.spans("The Rivers", plurals=True, only="river")


# Words of any script, with punctuation, symbols, digits and combining marks at either end.
odd_words = st.text(
    alphabet=st.sampled_from("aZé1٣ßİΣ'’`\".,;:!?()[]—$%©\u0301_-"), min_size=1, max_size=6
).filter(lambda w: not any(c.isspace() for c in w))


@settings(max_examples=600, deadline=None)
@given(words=st.lists(st.one_of(st.sampled_from(PIECES), odd_words), min_size=1, max_size=4))
def test_the_shortcut_for_clean_ends_agrees_with_taking_them_off(words: list[str]) -> None:
    folded = [normalise._fold(word) for word in words]
    assert normalise._clean_ends(list(folded)) == normalise._take_off_ends(list(folded))


@settings(max_examples=600, deadline=None)
@given(word=st.one_of(st.sampled_from(PIECES), odd_words), other=st.one_of(st.sampled_from(PIECES), odd_words))
def test_can_end_with_agrees_with_the_words_forms(word: str, other: str) -> None:
    for last in {*last_word_forms(other), *last_word_forms(word)} - {""}:
        assert can_end_with(word, last) == (last in last_word_forms(word) or "" in last_word_forms(word)), (word, last)


def test_long_n_grams_are_not_kept_in_the_name_cache() -> None:
    long_word = "Alpha" + "x" * 240  # longer than the cache keeps, short enough to be a name
    phrases._cached_name.cache_clear()
    assert [span.text for span in phrases.spans(long_word, capitalised_only=True)] == [long_word]
    assert phrases._cached_name.cache_info().currsize == 0
    assert [span.name for span in phrases.spans("Alpha", capitalised_only=True)] == ["alpha"]
    assert phrases._cached_name.cache_info().currsize == 1
