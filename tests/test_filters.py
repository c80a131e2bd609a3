"""Filters that cannot silently mean something else: typed comparisons, dates, nulls and any key,
checked against the real embedded SurrealDB (the filter runs inside the search query)."""

from __future__ import annotations

import datetime as dt

import pytest

from surreal_kgrag import Ingestor, Scope, SourceDocument, SurrealStore, make_retriever
from surreal_kgrag.retrieval.filters import FilterError, compile_filter

LATER = dt.datetime(2021, 3, 1, tzinfo=dt.timezone.utc)
DOCS = {
    "a": {"year": 2001, "my key": "x", "a-b": 1, "größe": 5, "note": None, "published": "2020-05-01", "nested": {"k": 3}},
    "b": {"year": "2001", "published": "2019-12-31"},
    "c": {"year": 1999, "note": "text", "published": LATER},
    "d": {},
}
QUESTION = "notes about the archive"


@pytest.fixture(scope="module")
def search(minilm, spacy_extractor):
    with SurrealStore("mem://") as store:
        documents = [
            SourceDocument(key=key, title=f"Archive {key}", text=f"Archive note {key}. The archive keeps notes.",
                           source=f"{key}.txt", metadata=metadata, access=["hidden" if key == "d" else "shelf"])
            for key, metadata in DOCS.items()
        ]
        Ingestor(store, embedder=minilm, extractor=spacy_extractor).ingest(documents)
        retriever = make_retriever("chunk", store, embedder=minilm, candidates=40)

        def run(spec):
            return {d.id for d in retriever.search(QUESTION, k=10, filters=spec).documents}

        run.retriever = retriever
        run.store = store
        yield run


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"year": {"$gt": 2000}}, {"a"}),
        ({"year": {"$gt": "2000"}}, {"b"}),
        ({"year": {"$lt": 3000}}, {"a", "c"}),
        ({"year": {"$between": [1990, 2005]}}, {"a", "c"}),
        ({"year": 2001}, {"a"}),
        ({"year": "2001"}, {"b"}),
        ({"note": None}, {"a"}),
        ({"note": {"$ne": None}}, {"b", "c", "d"}),
        ({"note": {"$exists": True}}, {"a", "c"}),
        ({"note": {"$in": [None, "text"]}}, {"a", "c"}),
        ({"published": {"$gte": "2020-01-01"}}, {"a", "c"}),
        ({"published": {"$lt": "2020-01-01"}}, {"b"}),
        ({"published": {"$gte": LATER}}, {"c"}),
        ({"my key": "x"}, {"a"}),
        ({"metadata.my key": "x"}, {"a"}),
        ({"a-b": 1}, {"a"}),
        ({"größe": {"$gte": 5}}, {"a"}),
        ({"nested.k": 3}, {"a"}),
        ({"created_at": {"$gte": "2000-01-01"}}, {"a", "b", "c", "d"}),
        ({"created_at": {"$lt": "2000-01-01T00:00:00Z"}}, set()),
        ({"updated_at": {"$gte": dt.date(2000, 1, 1)}}, {"a", "b", "c", "d"}),
        ({"title": {"$gte": "Archive c"}}, {"c", "d"}),
        ({"$not": {"year": {"$gt": 2000}}}, {"b", "c", "d"}),
        ({"$or": [{"id": "a"}, {"source": "c.txt"}]}, {"a", "c"}),
    ],
)
def test_comparisons_match_only_values_of_their_type(search, spec, expected):
    assert search(spec) == expected
    # a filtered search first counts the documents inside the filter, on document rows: same answer
    condition = Scope(access=["shelf", "other"]).restrict(spec)
    documents, chunks = search.store.query("documents_inside", condition.params, filter=condition, document_filter=condition.on_documents())
    assert set(documents) == set(chunks) == expected - {"d"}  # d carries another label


def test_null_metadata_is_stored_and_read_back(search):
    found = search.retriever.search(QUESTION, k=10, filters={"note": None}).documents
    assert found and found[0].metadata["note"] is None and found[0].metadata["my key"] == "x"


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ({"title": {"$gt": 5}}, "takes a string"),
        ({"title": 5}, "takes a string"),
        ({"id": {"$in": ["a", 1]}}, "takes a string"),
        ({"created_at": {"$gt": "yesterday"}}, "ISO 8601"),
        ({"created_at": {"$gt": 2020}}, "ISO 8601"),
        ({"year": {"$gt": 2**63}}, "64 bits"),
        ({"year": -(2**63) - 1}, "64 bits"),
        ({"year": {"$lt": float("nan")}}, "finite"),
        ({"year": {"$gt": True}}, "number, string or datetime"),
        ({"year": {"$gt": None}}, "number, string or datetime"),
        ({"year": {"$between": [1, "2"]}}, "one type"),
        ({"note": "\udc80"}, "not valid Unicode"),
        ({"bad\udc80": 1}, "not valid Unicode"),
        ({"year": {"$in": [[1]]}}, "takes a string, number"),
    ],
)
def test_mistyped_filters_are_errors_that_name_the_problem(search, spec, problem):
    with pytest.raises(FilterError, match=problem):
        compile_filter(spec)
    with pytest.raises(FilterError, match=problem):
        search(spec)


def test_keys_and_values_never_become_query_text():
    compiled = compile_filter({"x`) OR true; --": {"$gt": "'; REMOVE TABLE chunk"}, "größe": None})
    assert "REMOVE" not in compiled.condition and "x`" not in compiled.condition and "größe" not in compiled.condition
    assert "x`) OR true; --" in compiled.params.values() and "größe" in compiled.params.values()


def _nested(depth: int) -> dict:
    spec: dict = {"year": 2001}
    for _ in range(depth):
        spec = {"$not": spec}
    return spec


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        (_nested(1000), "nested more than 12 levels"),
        ({"$or": [{f"key{i}": i} for i in range(10_000)]}, "more than 1,000 keys and list items"),
        ({"year": {"$in": list(range(5_000))}}, "more than 1,000 keys and list items"),
        ({"team": "y" * 1_000_001}, "more than 1,000,000 characters of text"),
        ({"$or": [{"k" * 2_000: "v" * 3_000}] * 250}, "more than 1,000,000 characters of text"),
    ],
)
def test_filter_depth_and_size_are_filter_errors(search, spec, problem):
    from surreal_kgrag.retrieval import Scope
    from surreal_kgrag.vectors import metadata_filter

    for attempt in (compile_filter, metadata_filter, lambda s: Scope(filters=s), lambda s: search(s)):
        with pytest.raises(FilterError, match=problem):
            attempt(spec)
    assert search(_nested(11)) == {"b", "c", "d"}  # 11 $not around one condition: 12 levels, the most allowed
    assert search({"$or": [{"year": 1999}, *({f"k{i}": i} for i in range(498))]}) == {"c"}  # 997 items: allowed
    assert search({"$or": [{"year": 1999}, {"team": "y" * 999_000}]}) == {"c"}  # within the characters allowed


def test_a_deep_filter_is_a_clear_error_for_the_cli_and_the_tools(search, capsys, minilm):
    import json

    from surreal_kgrag.cli import main
    from surreal_kgrag.tools import ToolDispatcher

    deep = '{"$not": ' * 5_000 + '{"year": 2001}' + "}" * 5_000
    assert main(["query", "archive", "--db", "mem://", "--filter", deep]) != 0
    captured = capsys.readouterr()
    assert "nested too deeply" in captured.err and "Traceback" not in captured.err
    assert main(["query", "archive", "--db", "mem://", "--filter", '{"year": ' + "9" * 5_000 + "}"]) != 0
    captured = capsys.readouterr()
    assert "--filter cannot be read as JSON: Exceeds the limit (4300 digits)" in captured.err and "Traceback" not in captured.err
    tools = ToolDispatcher(search.retriever.store, embedder=minilm)
    error = json.loads(tools.call("search_chunks", '{"query": "archive", "filters": ' + deep + "}"))["error"]
    assert error["type"] == "invalid_arguments" and "nested too deeply" in error["message"]
    error = json.loads(tools.call("search_chunks", {"query": "archive", "filters": _nested(200)}))["error"]
    assert error["type"] == "invalid_arguments" and "nested more than 12 levels" in error["message"], error


def test_a_compiled_condition_cannot_be_passed_as_a_filter(minilm):
    """A CompiledFilter is SurrealQL text: ANDed after a scope, ``x) OR (true`` would undo it."""
    from surreal_kgrag.surql import CompiledFilter

    scope = Scope(access=["public"])
    with pytest.raises(FilterError, match="not a CompiledFilter"):
        scope.restrict(CompiledFilter("false) OR (true"))  # type: ignore[arg-type]
    with SurrealStore("mem://") as store, pytest.raises(FilterError, match="not a CompiledFilter"):
        make_retriever("chunk", store, embedder=minilm).search("q", filters=CompiledFilter("true"))  # type: ignore[arg-type]
