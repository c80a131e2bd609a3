"""Hostile strings and values for the property-based tests (tests/test_hostile_input.py), and the
tally of what each entry point did with them."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from hypothesis import strategies as st
from surrealdb import Null

# Pieces an attacker (or a confused model) puts into strings: quoting and record-id syntax, statement
# separators and comments, parameter and placeholder lookalikes, NUL, lone surrogates, bidi marks.
PIECES = [
    "'", '"', "`", "\\", "⟨", "⟩", "; REMOVE TABLE chunk;", "'; REMOVE TABLE chunk; --", '"); DELETE document; --',
    "--", "/*", "*/", "#", "// ", "\x00", "\udc80", "\ud800", "\udfff", "\u202e", "\u200f", "\u200e", "\u2066",
    "\ufeff", "\u2028", "\u0301", "chunk:⟨x⟩", "document:`a`", "concept:⟨marie curie⟩", "type::thing('chunk', 'x')",
    "type::record('document', $id)", "$auth", "$auth.access", "$scope_access", "$filter_0", "$scope0_0",
    "$embedding", "$parent", "$this", "{{filter}}", "{{chunk_index}}", "{{scope}}", ")", "}", "]", "(", "{", "[",
    "\n", "\r\n", "\t", " ", "::", ":", "NONE", "NULL", "DELETE document;", "RETURN 1;", "SLEEP 10s;",
    "<|3,40|>", "@@", "🙂", "é", "ﬁ", "İ", "ß", "Marie Curie", "Warsaw", "polonium",
]

LONE_SURROGATES = ("\udc80", "\ud800", "\udfff")


def hostile(min_size: int = 0, max_size: int = 8) -> st.SearchStrategy[str]:
    """A string built from hostile pieces and arbitrary text (any code point, surrogates included)."""
    joined = st.lists(st.sampled_from(PIECES) | st.text(max_size=4), min_size=min_size, max_size=max_size).map("".join)
    anything = st.text(st.characters(exclude_categories=()), min_size=min_size, max_size=24)
    strategy = st.one_of(joined, joined, anything)
    return strategy.filter(lambda s: len(s) >= min_size) if min_size else strategy


def non_empty() -> st.SearchStrategy[str]:
    return hostile(min_size=1).filter(bool)


SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), hostile())
JSON_VALUES = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(hostile(), inner, max_size=3), max_leaves=6
)

# Megabyte strings: a few per entry point that takes free text.
MEGABYTE = [
    "'; REMOVE TABLE chunk; -- " * 40_000,
    "⟨x⟩`$auth` /* # -- \x00 " * 50_000,
    "Marie Curie lived in Warsaw. " * 36_000 + "\udc80",
]


def storable(value: Any) -> bool:
    """Whether SurrealDB can hold ``value`` as it is (valid Unicode, 64-bit integers)."""
    if isinstance(value, str):
        return not any(0xD800 <= ord(c) <= 0xDFFF for c in value)
    if isinstance(value, bool) or value is None or isinstance(value, float):
        return True
    if isinstance(value, int):
        return -(2**63) <= value < 2**63
    if isinstance(value, dict):
        return all(storable(k) and storable(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return all(storable(v) for v in value)
    return True


def same(stored: Any, given: Any) -> bool:
    """Equal as values, NaN equal to NaN (a stored null reads as ``None``, or as ``Null`` over the SDK's public path)."""
    if stored is Null:
        stored = None
    if isinstance(given, float) and isinstance(stored, (int, float)) and not isinstance(stored, bool):
        return (math.isnan(given) and math.isnan(stored)) or stored == given
    if isinstance(given, dict):
        return isinstance(stored, dict) and stored.keys() == given.keys() and all(same(stored[k], v) for k, v in given.items())
    if isinstance(given, (list, tuple)):
        return isinstance(stored, list) and len(stored) == len(given) and all(same(a, b) for a, b in zip(stored, given))
    return type(stored) is type(given) and stored == given


class Tally:
    """Per entry point: inputs tried, rejected with a clear error, and accepted (stored and read
    back verbatim, or run without effect)."""

    def __init__(self) -> None:
        self.counts: dict[str, Counter[str]] = {}

    def add(self, entry: str, outcome: str, n: int = 1) -> None:
        assert outcome in ("rejected", "verbatim", "ran")
        counter = self.counts.setdefault(entry, Counter())
        counter["tried"] += n
        counter[outcome] += n

    def lines(self) -> list[str]:
        total: Counter[str] = Counter()
        rows = []
        for entry, counter in sorted(self.counts.items()):
            total.update(counter)
            rows.append(
                f"  {entry:<28} tried {counter['tried']:>6}  rejected {counter['rejected']:>6}  "
                f"stored verbatim {counter['verbatim']:>6}  ran, nothing changed {counter['ran']:>6}"
            )
        rows.append(
            f"  {'TOTAL':<28} tried {total['tried']:>6}  rejected {total['rejected']:>6}  "
            f"stored verbatim {total['verbatim']:>6}  ran, nothing changed {total['ran']:>6}"
        )
        return rows
