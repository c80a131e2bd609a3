"""Sentence-aware chunking with token budgets and sentence overlap.

Every chunk is an exact slice of the input: ``text[chunk.start:chunk.end] == chunk.content``.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .models import TextChunk

__all__ = ["SentenceChunker", "count_tokens", "split_sentences"]

# Chinese and Japanese characters count one token each (MiniLM's tokenizer splits them so too), and
# a longer run of other word characters one token per _LONGEST_TOKEN: a chunk of max_tokens tokens
# then holds at most max_tokens * _LONGEST_TOKEN characters besides its spaces.
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f\U00020000-\U0003134f"
_LONGEST_TOKEN = 24
_TOKEN = re.compile(rf"[{_CJK}]|[^\W{_CJK}]{{1,{_LONGEST_TOKEN}}}|[^\w\s]")
_WORD = re.compile(r"\S+")

# Blocks: a blank line always ends one, and so does a newline that starts a list item, heading,
# quote or table row, or ends a heading. Other single newlines are hard-wrapped prose and do not.
_BLOCK_BREAK = re.compile(
    r"\n[^\S\n]*\n\s*"
    r"|\n(?=[^\S\n]*(?:[-*+•>|]|#{1,6}|\d{1,3}[.)])\s)"
    r"|^#{1,6}[^\S\n][^\n]*(\n)",  # a heading line; only its newline (group 1) is the break
    re.MULTILINE,
)
# Inside a block, a sentence ends at terminal punctuation (plus closing quotes or brackets) and space.
# The lookarounds take each run of punctuation and of closers whole: without them a long run not
# followed by space ("....x") was tried again from each of its characters, quadratic in its length.
# Chinese and Japanese full stops end a sentence without a space after them.
_TERMINAL = re.compile(
    r"""(?<![.!?…])([.!?…]+)(?![.!?…])["'”’»)\]]*(?!["'”’»)\]])\s+"""
    r"|(?<![。！？｡])[。！？｡]+(?![。！？｡])[」』”’）】｣]*(?![」』”’）】｣])\s*"
)
_ACRONYM = re.compile(r"(?:[A-Za-z]{1,2}\.)+[A-Za-z]{1,2}")  # U.S, e.g, i.e, Ph.D

# Words that end with a period without ending the sentence, mostly because a name or number
# follows. Sentence-final ones such as "etc." are left out on purpose.
_ABBREVIATIONS = frozenset(
    """
    mr mrs ms mx dr prof sr jr st mt ft rev fr hon gov gen col lt sgt capt cmdr adm maj pres sen rep
    messrs mme mlle vs v cf al approx ca no nos fig figs eq eqs vol vols pp ch sec art dept est
    jan feb aug sept oct nov dec
    """.split()
)


def count_tokens(text: str) -> int:
    """Count word and punctuation tokens: runs of word characters (a run longer than 24 counts once
    per 24), single Chinese or Japanese characters, and single other non-space characters."""
    return len(_TOKEN.findall(text))


class _Span(NamedTuple):
    start: int
    end: int
    tokens: int


def split_sentences(text: str) -> list[tuple[int, int]]:
    """Return ``(start, end)`` offsets of the sentences of ``text``, whitespace trimmed."""
    spans: list[tuple[int, int]] = []
    block_start = 0
    breaks = list(_BLOCK_BREAK.finditer(text)) if "\n" in text else []  # every break is at a newline
    for block_break in [*breaks, None]:
        block_end = block_break.start(block_break.lastindex or 0) if block_break else len(text)
        start = block_start
        for match in _TERMINAL.finditer(text, block_start, block_end):
            if _ends_sentence(text, match):
                spans.extend(_trimmed(text, start, match.end()))
                start = match.end()
        spans.extend(_trimmed(text, start, block_end))
        block_start = block_break.end() if block_break else len(text)
    return spans


def _ends_sentence(text: str, match: re.Match[str]) -> bool:
    if text[match.end() : match.end() + 1].islower():
        return False  # "e.g. the", "approx. five": a new sentence would start with a capital
    if match.group(1) != ".":
        return True  # "?", "!", "..." are not abbreviations
    before = text[max(0, match.start() - 40) : match.start()].rsplit(None, 1)
    if not before:
        return True
    word = before[-1].lstrip("([{\"'“‘«")
    if len(word) == 1 and word.isalpha() and word.isupper():
        return False  # an initial, as in "J. R. R. Tolkien"
    return word.lower() not in _ABBREVIATIONS and not _ACRONYM.fullmatch(word)


def _trimmed(text: str, start: int, end: int) -> list[tuple[int, int]]:
    piece = text[start:end]
    stripped = piece.lstrip()
    start += len(piece) - len(stripped)
    end = start + len(stripped.rstrip())
    return [(start, end)] if end > start else []


class SentenceChunker(BaseModel):
    """Pack whole sentences into chunks of at most ``max_tokens`` tokens.

    Each chunk after the first repeats the trailing sentences of the previous one, up to
    ``overlap_tokens`` tokens. A sentence longer than ``max_tokens`` is cut at spaces, and a single
    word longer than that between its tokens, so no chunk exceeds the budget; nor ``max_chars``
    characters, spaces included (a run of spaces, as in a padded table, ends a chunk too).
    """

    model_config = ConfigDict(frozen=True)

    max_tokens: int = Field(default=200, gt=0)
    overlap_tokens: int = Field(default=32, ge=0)

    @model_validator(mode="after")
    def _overlap_below_budget(self) -> SentenceChunker:
        if self.overlap_tokens >= self.max_tokens:
            raise ValueError(
                f"overlap_tokens ({self.overlap_tokens}) must be smaller than max_tokens ({self.max_tokens})"
            )
        return self

    @property
    def max_chars(self) -> int:
        """The longest chunk in characters: as many as ``max_tokens`` of the longest tokens."""
        return self.max_tokens * _LONGEST_TOKEN

    def split(self, text: str) -> list[TextChunk]:
        """Split ``text`` into chunks; empty or whitespace-only text gives ``[]``."""
        units: list[_Span] = []
        for start, end in split_sentences(text):
            tokens = count_tokens(text[start:end])
            if tokens <= self.max_tokens and end - start <= self.max_chars:
                units.append(_Span(start, end, tokens))
            else:
                units.extend(self._pieces(text, start, end))
        return [
            TextChunk(index=i, content=text[first.start : last.end], start=first.start, end=last.end)
            for i, (first, last) in enumerate(self._pack(units))
        ]

    def _pack(self, units: list[_Span]) -> list[tuple[_Span, _Span]]:
        """Group units greedily; return each chunk's first and last unit."""
        chunks: list[tuple[_Span, _Span]] = []
        current: list[_Span] = []
        used = 0
        for unit in units:
            if current and (used + unit.tokens > self.max_tokens or unit.end - current[0].start > self.max_chars):
                chunks.append((current[0], current[-1]))
                current = self._overlap(current, unit)
                used = sum(u.tokens for u in current)
            current.append(unit)
            used += unit.tokens
        if current:
            chunks.append((current[0], current[-1]))
        return chunks

    def _overlap(self, previous: list[_Span], incoming: _Span) -> list[_Span]:
        """Trailing units of ``previous`` to repeat: within the overlap, leaving room, never all."""
        budget = min(self.overlap_tokens, self.max_tokens - incoming.tokens)
        kept: list[_Span] = []
        total = 0
        for unit in reversed(previous[1:]):
            if total + unit.tokens > budget or incoming.end - unit.start > self.max_chars:
                break
            kept.append(unit)
            total += unit.tokens
        kept.reverse()
        return kept

    def _pieces(self, text: str, start: int, end: int) -> list[_Span]:
        """Cut an over-long sentence at spaces; cut a word that alone is too long between tokens."""
        pieces: list[_Span] = []
        piece_start = piece_end = start
        used = 0
        for word in _WORD.finditer(text, start, end):
            w_start, w_end = word.start(), word.end()
            tokens = count_tokens(word.group())
            if tokens > self.max_tokens:
                if used:
                    pieces.append(_Span(piece_start, piece_end, used))
                    used = 0
                pieces.extend(self._token_pieces(text, w_start, w_end))
                continue
            if used and (used + tokens > self.max_tokens or w_end - piece_start > self.max_chars):
                pieces.append(_Span(piece_start, piece_end, used))
                used = 0
            if not used:
                piece_start = w_start
            piece_end = w_end
            used += tokens
        if used:
            pieces.append(_Span(piece_start, piece_end, used))
        return pieces

    def _token_pieces(self, text: str, start: int, end: int) -> list[_Span]:
        matches = list(_TOKEN.finditer(text, start, end))
        step = self.max_tokens
        return [
            _Span(group[0].start(), group[-1].end(), len(group))
            for group in (matches[i : i + step] for i in range(0, len(matches), step))
        ]
