"""The SurrealQL files: each says what it does, no block is written twice (shared blocks are
fragments, ``{{> name}}``), and every file loads with its fragments expanded."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from surreal_kgrag import surql
from surreal_kgrag.db.retry import retryable
from surreal_kgrag.errors import QueryExecutionError

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


def test_shared_figures_are_filled_from_the_python_constant(monkeypatch):
    """The chunk-list limit is written once, in ``surql.CONSTANTS``, and read by the Python (the schema's
    ``CHUNK_LIST_MAX``) and by every file that keeps or checks the lists: none writes the figure itself."""
    from surreal_kgrag.schema import CHUNK_LIST_MAX

    assert surql.CONSTANTS["chunk_list_max"] == CHUNK_LIST_MAX
    users = sorted(p.name for p in FILES if "{{chunk_list_max}}" in p.read_text(encoding="utf-8"))
    assert {"concept_chunks_delta.surql", "adjacency_checks.surql", "migrate_v6_adjacency.surql"} <= set(users)
    monkeypatch.setitem(surql.CONSTANTS, "chunk_list_max", 7)
    surql.load.cache_clear()
    try:
        for name in ("write_documents", "delete_documents", "check_adjacency", "migrate_v6_adjacency"):
            text = surql.load(name)
            assert "{{chunk_list_max}}" not in text and "n <= 7" in text and "<= 32" not in text, name
    finally:
        surql.load.cache_clear()


@pytest.mark.parametrize("name", ["graph_subgraph", "write_documents", "search_fulltext"])
def test_lines_that_are_only_a_comment_are_not_sent(name):
    # The engine parses a query's text on every request: a whole-line comment is left out when the
    # text is rendered, every line of code is kept as written (a comment after code stays with its line).
    template = surql.load(name)
    values = {key: surql.Identifier("x") for key in surql.placeholders(template)}
    sent = surql.render(template, **values).splitlines()
    assert sent and not any(line.lstrip().startswith("--") for line in sent)
    code = [surql.render(line, **values) for line in template.splitlines() if line.strip() and not line.lstrip().startswith("--")]
    kept = iter(sent)
    assert all(any(line == other for other in kept) for line in code)  # all kept, in their order


@pytest.mark.parametrize("name", ["index_remove", "index_vector", "schema", "store_meta_write"])
def test_the_retry_rule_still_reads_a_files_idempotent_declaration(name):
    # A file that declares itself idempotent (a `-- idempotent:` comment) runs again after losing a
    # race: the declaration is read from the loaded file, so loading keeps comments.
    lost = QueryExecutionError(f"SurrealDB rejected {name}.surql: Transaction write conflict. This transaction can be retried")
    assert "-- idempotent:" in surql.load(name)
    assert retryable(lost, surql.load(name), attempt=0)
    assert not retryable(lost, surql.load("graph_names"), attempt=0)  # a read that declares nothing
