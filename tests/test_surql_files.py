"""The SurrealQL files: each says what it does, no block is written twice (shared blocks are
fragments, ``{{> name}}``), and every file loads with its fragments expanded."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from surreal_kgrag import surql

FOLDER = Path(__file__).resolve().parents[1] / "surql"
FILES = sorted(FOLDER.rglob("*.surql"))
BLOCK = 4  # consecutive statement lines that count as a repeated block (3 catch idioms such as
# `WHERE true {{filter}} / ORDER BY score DESC / LIMIT {{candidates}}`)


def _code_lines(path: Path) -> list[str]:
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        code = line.split("-- ")[0].strip() if not line.lstrip().startswith("--") else ""
        if code and code not in {")", ");", ") END;", "END;", "}", "};"} and not code.startswith("{{>"):
            lines.append(" ".join(code.split()))
    return lines


def test_every_file_starts_with_a_comment_saying_what_it_does():
    assert len(FILES) > 60
    bare = [p.name for p in FILES if not p.read_text(encoding="utf-8").startswith("-- ")]
    assert bare == []


def test_no_block_of_statements_is_written_in_two_files():
    where: dict[tuple[str, ...], set[str]] = defaultdict(set)
    for path in FILES:
        lines = _code_lines(path)
        for i in range(len(lines) - BLOCK + 1):
            where[tuple(lines[i : i + BLOCK])].add(str(path.relative_to(FOLDER)))
    repeated = {block: sorted(files) for block, files in where.items() if len(files) > 1}
    assert repeated == {}


@pytest.mark.parametrize("major", [2, 3])
def test_every_file_loads_with_its_fragments_expanded(major):
    for path in FOLDER.glob("*.surql"):
        name = path.name.split(".")[0]
        text = surql.load(name, major)
        assert "{{>" not in text, name
    assert "vector::distance::knn()" in surql.load("search_chunks")
    assert "TYPE object FLEXIBLE" in surql.load("schema", 3) and "FLEXIBLE TYPE object" in surql.load("schema", 2)
