"""Fuzz the read-only query tool's bounds: at least 10,000 generated statements per run go through
the guard (check_bounded); those it accepts run against a real embedded store in a child process,
which must survive them all within the stated memory ceiling (docs/security.md). The statements
that aborted the process before (ORDER BY rand() with a huge LIMIT) are among them, and refused."""

from __future__ import annotations

import json
import os
import random
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from surreal_kgrag.llm.bounds import check_bounded
from surreal_kgrag.llm.guard import ReadonlyQueryError

GENERATED = 20_000
ROWS = 100
#: Peak resident memory the child may reach above its baseline while running what the guard accepts.
CEILING_MIB = 512
#: The child's address-space limit: a runaway allocation fails there instead of on the machine.
ADDRESS_SPACE_GIB = 16

# From the issue: each of these passed the guard before; the first two aborted the process.
ISSUE_STATEMENTS = [
    "SELECT title FROM document ORDER BY rand() LIMIT 1000000000",
    "SELECT title FROM document ORDER BY rand() LIMIT 9223372036854775807",
    "SELECT * FROM chunk SPLIT index",
    "SELECT id FROM chunk WHERE embedding <|100000,100000|> [0.1, 0.2, 0.3, 0.4]",
    "SELECT *, (SELECT * FROM chunk) AS every FROM document",
    "SELECT * FROM document VERSION d'2020-01-01T00:00:00Z'",
    "SELECT $auth, $session, $token FROM document",
    "SELECT secret FROM kg_reader",
]
# Unbounded scans and cross-table FROM: accepted, bounded by the LIMIT the guard adds.
ACCEPTED_ISSUE_STATEMENTS = ["SELECT * FROM chunk", "SELECT * FROM document, chunk, concept, MENTIONS_CONCEPT"]

NUMBERS = ["0", "1", "10", "100", "101", "1000", "100000", "1000000000", "9223372036854775807"]
FIELDS = [
    "*", "id", "title", "VALUE title", "count()", "string::len(title)", "array::len(->MENTIONS_CONCEPT)",
    "->MENTIONS_CONCEPT->concept.name AS names", "string::repeat(title, {n})", "array::range(0, {n})",
    "rand::string({n})", "array::len(array::range(0, {n}).map(|$v| array::range(0, {n})))", "$auth", "$session.ip",
    "(SELECT * FROM chunk)", "<record> 'kg_reader:alice'", "type::record('kg_reader', 'alice').secret",
    "kg_reader:alice.secret", "r'kg_reader:alice'.secret", "array::group(content)", "{{a: title, b: {n}}}", "1..{n}",
    "array::flatten(<-MENTIONS_CONCEPT<-chunk.content)", "string::concat(title, title)", "rand()", "math::sum([1, {n}])",
    "array::len(array::fill(array::range(0, 100), {n}))", "object::entries(metadata)", "kg_meta:indexes.*",
    "string::join(',', array::range(0, {n}))", "array::len(array::combinations(array::range(0, 64), 3))",
]
FROMS = [
    "document", "chunk", "chunk_text", "concept", "MENTIONS_CONCEPT", "RELATES_TO", "document, chunk, concept",
    "kg_reader", "kg_meta", "term", "concept_chunks", "$auth", "(SELECT * FROM chunk)", "array::range(0, {n})",
    "[1, 2, 3]", "document:d1", "ONLY document:d1", "chunk:⟨d1::h::00000⟩", "type::table('kg_reader')", "person", "1..{n}",
]
WHERES = [
    "", "WHERE title = 't1'", "WHERE embedding <|{n},{n}|> [0.1, 0.2, 0.3, 0.4]", "WHERE embedding <|{n},COSINE|> [0.1, 0.2, 0.3, 0.4]",
    "WHERE index > {n}", "WHERE (SELECT 1 FROM chunk)", "WHERE doc = document:d{n}", "WHERE string::len(content) < {n}",
]
TAILS = [
    ["", "SPLIT index"],
    ["", "GROUP ALL", "GROUP BY title"],
    ["", "ORDER BY title", "ORDER BY rand()", "ORDER BY RAND() DESC", "ORDER BY title, rand()", "ORDER BY id DESC"],
    ["", "LIMIT {n}", "LIMIT BY {n}", "LIMIT $x", "LIMIT 10 * 10", "LIMIT {n}"],
    ["", "START {n}", "START AT {n}"],
    ["", "VERSION d'2020-01-01T00:00:00Z'"],
    ["", "FETCH metadata"],
]


def generate(rng: random.Random, count: int) -> list[str]:
    def fill(fragment: str) -> str:
        while "{n}" in fragment:
            fragment = fragment.replace("{n}", rng.choice(NUMBERS), 1)
        return fragment

    statements = list(ISSUE_STATEMENTS + ACCEPTED_ISSUE_STATEMENTS)
    while len(statements) < count:
        fields = ", ".join(fill(rng.choice(FIELDS)) for _ in range(rng.choice([1, 1, 2, 3])))
        parts = [f"SELECT {fields} FROM {fill(rng.choice(FROMS))}", fill(rng.choice(WHERES))]
        parts += [fill(rng.choice(options)) if rng.random() < 0.5 else "" for options in TAILS]
        statements.append(" ".join(p for p in parts if p))
    return statements


def _limit_address_space() -> None:
    limit = ADDRESS_SPACE_GIB << 30
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def test_no_statement_the_guard_accepts_takes_the_process_down(tmp_path: Path):
    seed = int(os.environ.get("FUZZ_SEED", random.SystemRandom().randrange(2**32)))
    statements = generate(random.Random(seed), GENERATED)
    accepted: dict[str, str] = {}  # the statement as the runner sends it -> as generated
    for statement in statements:
        try:
            accepted.setdefault(check_bounded(statement, max_rows=ROWS).text, statement)
        except ReadonlyQueryError:
            continue
    for statement in ISSUE_STATEMENTS:
        with pytest.raises(ReadonlyQueryError):
            check_bounded(statement, max_rows=ROWS)
    assert all(check_bounded(s, max_rows=ROWS).text.endswith(f"LIMIT {ROWS + 1}") for s in ACCEPTED_ISSUE_STATEMENTS)
    distinct = list(accepted.values())
    assert len(statements) >= 10_000 and len(distinct) >= 300, (len(statements), len(distinct))
    path = tmp_path / "accepted.json"
    path.write_text(json.dumps(distinct), encoding="utf-8")
    child = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("readonly_fuzz_child.py")), str(path)],
        capture_output=True, text=True, timeout=600, preexec_fn=_limit_address_space,
        cwd=Path(__file__).parent,
    )
    assert child.returncode == 0, f"seed {seed}: the child died ({child.returncode}): {child.stderr[-3000:]}"
    summary = json.loads(child.stdout.strip().splitlines()[-1])
    assert summary["ran"] + summary["failed"] == len(distinct) and summary["ran"] > len(distinct) // 4, summary
    grown_mib = (summary["peak_kib"] - summary["baseline_kib"]) / 1024
    assert grown_mib <= CEILING_MIB, f"seed {seed}: {summary}"
    print(f"seed {seed}: {len(statements)} generated, {len(distinct)} distinct accepted, {summary}")
