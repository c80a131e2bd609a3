"""SentenceChunker: exact offsets, token budgets, sentence overlap, abbreviations, speed."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from surreal_kgrag.chunking import SentenceChunker, count_tokens, split_sentences
from surreal_kgrag.models import TextChunk

BENCH_CORPUS = Path(__file__).resolve().parents[2] / "shared" / "bench" / "hotpotqa" / "corpus.jsonl"


def sentences(text: str) -> list[str]:
    return [text[start:end] for start, end in split_sentences(text)]


# --- properties -------------------------------------------------------------------------------

WORDS = st.sampled_from(
    [
        *'the graph Dr. U.S. e.g. J. etc. Smith 3.14 naïve 漢字 🦄 well-known x_y (see it) "quoted" '
        "supercalifragilistic-expialidocious-words-here a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p 北京是首都。 "
        "Pneumonoultramicroscopicsilicovolcanoconiosis".split(),
        "x" * 90,
    ]
)
SEPARATORS = st.sampled_from(
    [" ", " ", " ", ". ", "? ", "! ", "... ", "\n", "\n\n", "\n- ", "\n# ", "\t", "  \n  ", " " * 70, ". " + " " * 70]
)


@st.composite
def prose(draw: st.DrawFn) -> str:
    parts = draw(st.lists(st.tuples(WORDS, SEPARATORS), max_size=80))
    lead = draw(st.sampled_from(["", " ", "\n\n", "\t "]))
    return lead + "".join(word + sep for word, sep in parts)


TEXTS = st.one_of(prose(), st.text(max_size=300))


@st.composite
def chunkers(draw: st.DrawFn) -> SentenceChunker:
    max_tokens = draw(st.integers(min_value=1, max_value=60))
    overlap = draw(st.integers(min_value=0, max_value=max_tokens - 1))
    return SentenceChunker(max_tokens=max_tokens, overlap_tokens=overlap)


def check_invariants(chunker: SentenceChunker, text: str, chunks: list[TextChunk]) -> None:
    if not text.strip():
        assert chunks == []
        return
    assert chunks, "non-blank text must give at least one chunk"
    assert [c.index for c in chunks] == list(range(len(chunks)))
    for chunk in chunks:
        assert chunk.content == text[chunk.start : chunk.end]
        assert chunk.content and chunk.content == chunk.content.strip()
        assert count_tokens(chunk.content) <= chunker.max_tokens
        assert len(chunk.content) <= chunker.max_chars
    # Coverage: nothing but whitespace lies before, after or between chunks.
    assert not text[: chunks[0].start].strip() and not text[chunks[-1].end :].strip()
    for previous, current in itertools.pairwise(chunks):
        assert current.start > previous.start, "every chunk must make progress"
        assert current.end > previous.end
        if current.start >= previous.end:
            assert not text[previous.end : current.start].strip()
        else:
            overlap = text[current.start : previous.end]
            assert count_tokens(overlap) <= chunker.overlap_tokens
            assert chunker.overlap_tokens > 0


@settings(max_examples=300, deadline=None)
@given(chunker=chunkers(), text=TEXTS)
def test_chunk_invariants(chunker: SentenceChunker, text: str) -> None:
    chunks = chunker.split(text)
    check_invariants(chunker, text, chunks)
    assert chunker.split(text) == chunks  # deterministic


@settings(max_examples=150, deadline=None)
@given(text=TEXTS)
def test_short_text_is_one_stripped_chunk(text: str) -> None:
    chunker = SentenceChunker(max_tokens=10_000, overlap_tokens=0)
    chunks = chunker.split(text)
    if text.strip():
        assert [c.content for c in chunks] == [text.strip()]
    else:
        assert chunks == []


@settings(max_examples=150, deadline=None)
@given(text=TEXTS)
def test_sentence_spans_are_trimmed_ordered_and_cover_the_text(text: str) -> None:
    spans = split_sentences(text)
    previous_end = 0
    for start, end in spans:
        assert previous_end <= start < end
        assert not text[previous_end:start].strip()
        assert text[start:end] == text[start:end].strip()
        previous_end = end
    assert not text[previous_end:].strip()


# --- sentence splitting -----------------------------------------------------------------------


def test_abbreviations_and_initials_do_not_end_sentences() -> None:
    text = (
        "Dr. Smith moved to the U.S. in 1999. She read J. R. R. Tolkien, e.g. The Hobbit, i.e. a novel. "
        "Prof. Jones and Mr. Brown met at St. Paul's. See Fig. 3 and No. 7. Is it done? Yes! It is... Done."
    )
    assert sentences(text) == [
        "Dr. Smith moved to the U.S. in 1999.",
        "She read J. R. R. Tolkien, e.g. The Hobbit, i.e. a novel.",
        "Prof. Jones and Mr. Brown met at St. Paul's.",
        "See Fig. 3 and No. 7.",
        "Is it done?",
        "Yes!",
        "It is...",
        "Done.",
    ]


def test_sentence_end_inside_quotes_and_brackets() -> None:
    assert sentences('He said "Stop." Then he left. (It rained.) Later "why?" she asked.') == [
        'He said "Stop."',
        "Then he left.",
        "(It rained.)",
        'Later "why?" she asked.',
    ]


def test_a_long_run_of_punctuation_is_split_in_linear_time() -> None:
    """Runs of terminal punctuation or closers not followed by space were tried again from each of
    their characters: 200,000 dots took minutes, holding the interpreter. Split in a child process,
    so that a regression fails here instead of hanging the run."""
    program = textwrap.dedent("""
        import json
        from surreal_kgrag.chunking import split_sentences
        text = "Start " + "." * 200_000 + "x end. " + "(" + ")" * 50_000 + "y. Last one."
        print(json.dumps([text[start:end] for start, end in split_sentences(text)]))
    """)
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(done.stdout) == ["Start " + "." * 200_000 + "x end.", "(" + ")" * 50_000 + "y.", "Last one."]


def test_numbers_and_urls_are_not_sentence_ends() -> None:
    assert sentences("Pi is 3.14 roughly. Visit example.com/a.b today.") == [
        "Pi is 3.14 roughly.",
        "Visit example.com/a.b today.",
    ]


def test_paragraphs_lists_and_headings_break_but_wrapped_lines_do_not() -> None:
    text = (
        "# Title\n"
        "First paragraph runs\n"
        "over two lines\n"
        "\n"
        "second paragraph starts lowercase\n"
        "- item one\n"
        "* item two\n"
        "1. numbered item\n"
        "## Section\n"
        "> a quote"
    )
    assert sentences(text) == [
        "# Title",
        "First paragraph runs\nover two lines",
        "second paragraph starts lowercase",
        "- item one",
        "* item two",
        "1. numbered item",
        "## Section",
        "> a quote",
    ]


# --- packing, overlap, long sentences ---------------------------------------------------------

FIVE = "Alpha beta gamma delta. "  # five tokens: four words and a period


def test_whole_sentences_are_packed_up_to_the_budget() -> None:
    text = (FIVE * 5).strip()
    chunks = SentenceChunker(max_tokens=10, overlap_tokens=0).split(text)
    assert [c.content for c in chunks] == [(FIVE * 2).strip(), (FIVE * 2).strip(), FIVE.strip()]
    assert all(c.content.endswith(".") for c in chunks)


def test_overlap_repeats_trailing_whole_sentences() -> None:
    text = "One two three four. Five six seven eight. Nine ten eleven twelve. Thirteen fourteen fifteen."
    chunks = SentenceChunker(max_tokens=10, overlap_tokens=5).split(text)
    assert [c.content for c in chunks] == [
        "One two three four. Five six seven eight.",
        "Five six seven eight. Nine ten eleven twelve.",
        "Nine ten eleven twelve. Thirteen fourteen fifteen.",
    ]
    # An overlap smaller than the last sentence repeats nothing.
    no_room = SentenceChunker(max_tokens=10, overlap_tokens=4).split(text)
    assert [c.content for c in no_room] == [
        "One two three four. Five six seven eight.",
        "Nine ten eleven twelve. Thirteen fourteen fifteen.",
    ]


def test_overlap_is_never_the_whole_previous_chunk() -> None:
    text = "Short one. Another short. Third short."  # three tokens each
    chunks = SentenceChunker(max_tokens=3, overlap_tokens=2).split(text)
    assert [c.content for c in chunks] == ["Short one.", "Another short.", "Third short."]


def test_long_sentence_is_split_at_spaces() -> None:
    words = [f"w{i}" for i in range(25)]
    text = " ".join(words) + "."
    chunks = SentenceChunker(max_tokens=10, overlap_tokens=0).split(text)
    assert [c.content for c in chunks] == [
        " ".join(words[:10]),
        " ".join(words[10:20]),
        " ".join(words[20:]) + ".",
    ]


def test_word_longer_than_the_budget_is_cut_between_tokens() -> None:
    word = "-".join(["ab"] * 6)  # 11 tokens, no spaces
    chunks = SentenceChunker(max_tokens=4, overlap_tokens=0).split(f"Start {word} end")
    assert [c.content for c in chunks] == ["Start", "ab-ab-", "ab-ab-", "ab-ab end"]


def test_no_chunk_is_longer_than_max_chars_whatever_its_spacing() -> None:
    """A word of a million letters, and runs of spaces inside a sentence and between sentences (a
    padded table, a hostile file): spaCy refuses a text over a million characters, and a model
    reads only a chunk's first few hundred tokens."""
    chunker = SentenceChunker(max_tokens=20, overlap_tokens=4)
    word = "x" * 1_000_000
    text = f"Start here. {word} then{' ' * 3000}a gap in one sentence. Next one.{' ' * 2000}After the gap."
    chunks = chunker.split(text)
    check_invariants(chunker, text, chunks)
    assert chunker.max_chars == 480 and max(len(c.content) for c in chunks) == 480
    assert len(chunks) == 1 + -(-1_000_000 // 480) + 2
    last_piece = "x" * (1_000_000 % 480) + " then"
    assert [c.content for c in chunks[-3:]] == [last_piece, "a gap in one sentence. Next one.", "After the gap."]


def test_chinese_and_japanese_sentences_end_at_their_full_stops() -> None:
    text = "北京是中国的首都。上海是最大的城市！你去过吗？「東京は日本の首都です。」次の文です。"
    assert sentences(text) == ["北京是中国的首都。", "上海是最大的城市！", "你去过吗？", "「東京は日本の首都です。」", "次の文です。"]
    assert sentences("値は３．５です｡次の文｡ｶﾀｶﾅ｡") == ["値は３．５です｡", "次の文｡", "ｶﾀｶﾅ｡"]  # ． is a decimal point too
    chunks = SentenceChunker(max_tokens=12, overlap_tokens=0).split(text * 20)
    assert all(count_tokens(c.content) <= 12 for c in chunks) and chunks[0].content == "北京是中国的首都。"


def test_empty_and_whitespace_text() -> None:
    chunker = SentenceChunker()
    assert chunker.split("") == []
    assert chunker.split(" \n\t\u00a0\u2028 ") == []


def test_offsets_for_padded_text() -> None:
    text = "\n\n   Hello there.  \n"
    (chunk,) = SentenceChunker().split(text)
    assert (chunk.index, chunk.start, chunk.end, chunk.content) == (0, 5, 17, "Hello there.")


# --- configuration ----------------------------------------------------------------------------


def test_defaults() -> None:
    chunker = SentenceChunker()
    assert (chunker.max_tokens, chunker.overlap_tokens) == (200, 32)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_tokens": 0}, "greater than 0"),
        ({"overlap_tokens": -1}, "greater than or equal to 0"),
        ({"max_tokens": 10, "overlap_tokens": 10}, r"overlap_tokens \(10\) must be smaller than max_tokens \(10\)"),
        ({"max_tokens": 16}, r"overlap_tokens \(32\) must be smaller than max_tokens \(16\)"),
    ],
)
def test_invalid_settings(options: dict[str, int], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        SentenceChunker(**options)


def test_chunker_is_frozen() -> None:
    with pytest.raises(ValidationError):
        SentenceChunker().max_tokens = 5  # type: ignore[misc]


def test_count_tokens() -> None:
    assert count_tokens("") == 0
    assert count_tokens("Hello, world!") == 4
    assert count_tokens("U.S.-based naïve_word 漢字 🦄") == 10  # U . S . - based, naïve_word, 漢, 字, 🦄
    assert count_tokens("x" * 49) == 3  # a word character run counts once per 24 characters
    assert count_tokens("東京は日本の首都") == 8
    assert count_tokens("𠀋𠂉ｶﾀｶﾅ") == 6  # CJK beyond the first plane, half-width katakana


# --- the bench corpus ------------------------------------------------------------------------


def test_bench_corpus_chunks_within_the_invariants() -> None:
    if not BENCH_CORPUS.exists():
        pytest.skip(f"bench corpus not found at {BENCH_CORPUS}")
    with BENCH_CORPUS.open(encoding="utf-8") as handle:
        texts = [json.loads(line)["text"] for line in handle if line.strip()]
    chunker = SentenceChunker()
    chunks = [chunker.split(text) for text in texts]
    assert len(texts) == 1971 and all(chunks)
    sample = SentenceChunker(max_tokens=40, overlap_tokens=8)
    for text in texts[:200]:
        check_invariants(sample, text, sample.split(text))
