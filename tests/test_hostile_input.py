"""Hostile input through every entry point, property-based (hypothesis), on the real embedded SurrealDB
with spaCy and MiniLM.

Strings built from quotes, backticks, ``⟨⟩``, ``; REMOVE TABLE chunk;``, SurrealQL comments, NUL, lone
surrogates, bidi marks, record-id syntax, ``$param`` and ``{{placeholder}}`` lookalikes (tests/hostile.py),
and a few megabyte strings, go through document text, titles, keys, sources, metadata keys and values,
access labels, JSONL files, filters (field names, operators, values), questions in every mode, the
agent tools as the JSON a model sends, one MCP stdio session, the CLI and the read-only SurrealQL
runner. Each input is stored and read back verbatim, or rejected with a clear error of the
project's types (a ``KGRagError``, a reported ``LoadFailure``, the tool error envelope, a CLI exit
code with a message), never an internal error; and the database is otherwise unchanged: rows per
table and ``INFO FOR DB`` are compared before and after each batch. The counts per entry point are
printed at the end of the module.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import sys
import threading
from collections.abc import Iterator
from itertools import count
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hostile import JSON_VALUES, MEGABYTE, Tally, hostile, non_empty, same, storable
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from surrealdb import RecordID
from test_ingest import CountingEmbedder

from surreal_kgrag import (
    ConfigurationError,
    FilterError,
    IngestConfig,
    Ingestor,
    KGRagError,
    Scope,
    SourceDocument,
    SurrealStore,
    make_retriever,
)
from surreal_kgrag.chunking import SentenceChunker
from surreal_kgrag.cli import main as cli_main
from surreal_kgrag.ingest import delete_documents
from surreal_kgrag.llm import ReadonlyQueryError, run_readonly_query
from surreal_kgrag.schema import IndexSettings
from surreal_kgrag.tools import TOOLS, ToolDispatcher

ROOT = Path(__file__).resolve().parents[1]
MODES = ["chunk", "concept", "hybrid", "graph"]
TALLY = Tally()
QUESTION = "Where was Marie Curie born and what did she discover?"
def fuzz(examples: int, *, shrink: bool = True) -> settings:
    """Hypothesis settings for these tests: no deadline (the models and the database are real); the
    ingest tests report a failing example as found (shrinking it would take many minutes)."""
    phases = [p for p in Phase if shrink or p not in (Phase.shrink, Phase.explain)]
    return settings(max_examples=examples, deadline=None, database=None, phases=phases, suppress_health_check=list(HealthCheck))

# The store every test shares: documents whose keys, titles, sources, metadata and labels are hostile
# themselves, so a filter, a label or a tool argument can hit them verbatim.
BASELINE = [
    SourceDocument(
        key="base·curie'; REMOVE TABLE chunk; --", title="Marie Curie ⟨x⟩`", source="base/curie",
        text="Marie Curie was born in Warsaw. She discovered polonium and radium in Paris with Pierre Curie.",
        metadata={"note": "x'; DELETE document; --", "my key ⟨⟩": "$auth", "year": 1867, "nested": {"a.b": [1, "/* */"]}},
        access=["public", "⟨staff⟩'; --"],
    ),
    SourceDocument(
        key="base·warsaw:", title="Warsaw", source="base/warsaw",
        text="Warsaw is the capital of Poland. The Vistula river flows through Warsaw. Marie Curie grew up there.",
        metadata={"note": "\u202eevil", "year": 1596, "tags": ["city", "chunk:⟨x⟩"]},
        access=["public"],
    ),
    SourceDocument(
        key="base·warsaw", title="type::thing('document', 'x')", source="base/warsaw2",
        text="Pierre Curie was a French physicist. He married Marie Curie in Paris and studied magnetism.",
        metadata={"note": None, "$filter_0": "$scope_access"},
        access=["staff"],
    ),
    SourceDocument(
        key="base·nobel\x00", title="Nobel -- prize", source="base/nobel",
        text="Alfred Nobel invented dynamite in Sweden. The Nobel Prize is awarded in Stockholm.",
        metadata={"note": "# comment", "year": 1895},
        access=[],
    ),
]
BASELINE_LABELS = {doc.key: set(doc.access) for doc in BASELINE}
BASELINE_KEYS = {"note", "my key ⟨⟩", "year", "nested", "tags", "$filter_0", "file_name"}


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    return f"surrealkv://{tmp_path_factory.mktemp('hostile')}/kg"


def _config() -> IngestConfig:
    # No index rebuild during the tests: a rebuild is a new index generation, which INFO FOR DB shows.
    return IngestConfig(
        chunker=SentenceChunker(max_tokens=24, overlap_tokens=0), index=IndexSettings(auto_rebuild=False), show_progress=False
    )


@pytest.fixture(scope="module")
def store(url, minilm, spacy_extractor):
    with SurrealStore(url) as s:
        summary = Ingestor(s, embedder=minilm, extractor=spacy_extractor, config=_config()).ingest(BASELINE)
        assert summary.added == len(BASELINE) and not summary.failures
        yield s


@pytest.fixture(scope="module")
def ingestor(store, minilm, spacy_extractor):
    return Ingestor(store, embedder=minilm, extractor=spacy_extractor, config=_config())


@pytest.fixture(scope="module")
def retrievers(store, minilm, spacy_extractor):
    return {
        mode: make_retriever(mode, store, embedder=minilm, **({"extractor": spacy_extractor} if mode == "hybrid" else {}))
        for mode in MODES
    }


@pytest.fixture(scope="module")
def vector(minilm):
    return minilm.embed_query(QUESTION).tolist()


@pytest.fixture(scope="module")
def tools(retrievers, minilm):
    return ToolDispatcher(retrievers["chunk"].store, embedder=minilm, retriever=retrievers["chunk"])


@pytest.fixture(scope="module", autouse=True)
def report(request):
    yield
    lines = ["hostile inputs per entry point (tests/test_hostile_input.py):", *TALLY.lines()]
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is None or capture is None:
        print("\n".join(lines))
        return
    with capture.global_and_fixture_disabled():  # to the terminal, even when the tests pass
        reporter.write_line("")
        for line in lines:
            reporter.write_line(line)


def snapshot(store: SurrealStore) -> tuple[dict[str, Any], str]:
    """Rows per table (and the sums of the document counts kept on terms and concepts) and every
    definition (INFO FOR DB and for each table)."""
    return store.query("table_counts")[-1], repr(store.query("schema_info"))


class Unchanged:
    """``with Unchanged(store):`` asserts that the block left every table and definition as it was."""

    def __init__(self, store: SurrealStore) -> None:
        self.store = store

    def __enter__(self) -> None:
        self.before = snapshot(self.store)

    def __exit__(self, kind: Any, *rest: Any) -> None:
        if kind is None:
            after = snapshot(self.store)
            assert after[0] == self.before[0], f"rows changed: {self.before[0]} -> {after[0]}"
            assert after[1] == self.before[1], "definitions changed (INFO FOR DB)"


def stored_documents(store: SurrealStore, keys: list[str]) -> dict[str, dict[str, Any]]:
    rows = store.query("get_document", {"ids": [RecordID("document", key) for key in keys]})[-1]
    return {row["id"].id: row for row in rows}


def check_verbatim(row: dict[str, Any], doc: SourceDocument) -> None:
    """The stored document is the given one: every field as given, and the chunks are the text's
    own characters at their offsets, covering all of its words."""
    assert row["title"] == doc.title and row["source"] == doc.source
    assert same(row["metadata"], doc.metadata), (row["metadata"], doc.metadata)
    assert row["access"] == doc.access
    chunks = row["chunks"]
    assert row["chunk_count"] == len(chunks) >= 1
    for chunk in chunks:
        assert doc.text[chunk["char_start"] : chunk["char_end"]] == chunk["content"]
    assert "".join("".join(c["content"] for c in chunks).split()) == "".join(doc.text.split())


# -- documents through the ingest: text, titles, keys, sources, metadata, access labels -------------

_serial = count()


@st.composite
def documents(draw: st.DrawFn) -> dict[str, Any]:
    """The fields of a SourceDocument."""
    text = draw(st.one_of(hostile(), hostile().map(lambda s: f"Marie Curie {s} lived in Warsaw.")))
    return {
        "key": draw(non_empty()),
        "text": text,
        "title": draw(st.none() | hostile()),
        "source": f"fuzz/{next(_serial)}/" + draw(hostile(max_size=3)),
        "metadata": draw(st.dictionaries(hostile(), JSON_VALUES, max_size=4)),
        "access": draw(st.lists(hostile(), max_size=3)),
    }


def _fields(doc: dict[str, Any]) -> int:
    return 4 + len(doc["metadata"]) * 2 + len(doc["access"])  # key, text, title, source, each key and value, labels


@fuzz(25, shrink=False)
@given(fields=st.lists(documents(), min_size=1, max_size=12, unique_by=lambda d: d["key"]))
def test_documents_are_stored_verbatim_or_reported(store, ingestor, fields):
    docs = []
    for values in fields:
        try:
            docs.append(SourceDocument(**values))
        except ValidationError as error:  # the model refuses a key that is not valid Unicode
            assert not storable(values["key"]) and "key" in str(error)
            TALLY.add("ingest: documents", "rejected", _fields(values))
    before = snapshot(store)
    summary = ingestor.ingest(docs)
    failed = {failure.source: failure for failure in summary.failures}
    assert len(failed) == len(summary.failures)
    stored = stored_documents(store, [d.key for d in docs if storable(d.key)])
    try:
        for doc in docs:
            good = storable(doc.model_dump())
            if doc.source in failed:
                assert doc.key not in stored or not storable(doc.key)
                assert failed[doc.source].reason
                assert good is False or not "".join(doc.text.split()), (doc, failed[doc.source])
                TALLY.add("ingest: documents", "rejected", _fields(doc.model_dump()))
            else:
                assert good, f"an unstorable document was not reported: {doc!r}"
                check_verbatim(stored[doc.key], doc)
                TALLY.add("ingest: documents", "verbatim", _fields(doc.model_dump()))
        assert summary.added == len(stored)
    finally:
        assert delete_documents(store, list(stored)) == len(stored)
    assert snapshot(store) == before


# -- JSON Lines records through the loader, from a file ----------------------------------------------

RECORD_IDS = st.one_of(non_empty(), st.integers(), st.floats(allow_nan=False, allow_infinity=False))


@st.composite
def jsonl_lines(draw: st.DrawFn) -> list[tuple[str, dict[str, Any] | None]]:
    """Lines of a JSONL file: records with hostile fields, and some lines that are not records."""
    lines: list[tuple[str, dict[str, Any] | None]] = []
    for _ in range(draw(st.integers(1, 10))):
        if draw(st.integers(0, 5)) == 0:
            garbage = draw(hostile(min_size=1)).replace("\n", " ")
            if garbage.strip():
                lines.append((garbage, None))
            continue
        record: dict[str, Any] = {"id": draw(RECORD_IDS), "text": draw(non_empty().map(lambda s: f"Marie Curie {s}"))}
        if draw(st.booleans()):
            record["title"] = draw(hostile())
        if draw(st.booleans()):
            record["access"] = draw(st.lists(hostile(), max_size=3))
        record.update(draw(st.dictionaries(hostile(), JSON_VALUES, max_size=3)))
        text = json.dumps(record, ensure_ascii=draw(st.booleans()) or not storable(record))
        # What the line says: an escaped high and low surrogate in a row are one character (RFC 8259),
        # so "\\ud800\\udfff" is read back as U+103FF, not as the two lone surrogates it was made from.
        lines.append((text, json.loads(text)))
    return lines


@fuzz(15, shrink=False)
@given(lines=jsonl_lines())
def test_jsonl_records_are_stored_verbatim_or_reported_with_their_line(store, ingestor, tmp_path_factory, lines):
    before = snapshot(store)
    path = tmp_path_factory.mktemp("jsonl") / "records.jsonl"
    path.write_bytes(b"".join(text.encode("utf-8", "surrogatepass") + b"\n" for text, _ in lines))
    summary = ingestor.ingest([path])
    failed = {failure.line: failure for failure in summary.failures}
    written: list[str] = []
    try:
        seen: set[str] = set()
        for number, (text, record) in enumerate(lines, start=1):
            fields = 1 if record is None else 1 + 2 * len(record)
            key = None
            if record is not None and isinstance(record.get("text"), str):
                key = str(record["id"]) if record["id"] != "" else f"{path}#L{number}"
            if number in failed:
                assert failed[number].source == str(path) and failed[number].reason
                TALLY.add("loader: JSONL lines", "rejected", fields)
                continue
            assert record is not None and key is not None and key not in seen, (text, summary.failures)
            seen.add(key)
            written.append(key)  # removed afterwards even if the check below fails
            row = stored_documents(store, [key])[key]
            known = {"id", "text", "title", "access"}
            title = record.get("title")
            expected = SourceDocument(
                key=key, text=record["text"], title=None if title in (None, "") else str(title), source=f"{path}:{number}",
                metadata={k: v for k, v in record.items() if k not in known}, access=record.get("access") or [],
            )
            check_verbatim(row, expected)
            TALLY.add("loader: JSONL lines", "verbatim", fields)
    finally:
        delete_documents(store, written)
    assert snapshot(store) == before


# -- filters: field names, operators, values ---------------------------------------------------------

OPERATORS = ["$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$contains", "$between", "$exists"]
FIELDS = st.one_of(
    non_empty(),
    non_empty().map(lambda s: f"metadata.{s}"),
    st.sampled_from(["title", "source", "id", "content_type", "created_at", "note", "year", "metadata.nested.a.b"]),
)
OPERATOR_NAMES = st.one_of(st.sampled_from(OPERATORS), hostile().map(lambda s: "$" + s), hostile())
FILTER_VALUES = st.one_of(JSON_VALUES, st.lists(JSON_VALUES, max_size=3), st.sampled_from(["x'; DELETE document; --", "$auth", 1867]))


@st.composite
def filters(draw: st.DrawFn) -> dict[str, Any]:
    spec = {draw(FIELDS): {draw(OPERATOR_NAMES): draw(FILTER_VALUES)} if draw(st.booleans()) else draw(FILTER_VALUES)}
    if draw(st.integers(0, 4)) == 0:
        spec = {draw(st.sampled_from(["$and", "$or", "$not", "$nor", "$" + draw(hostile())])): [spec]}
    return spec


def _documents_matching(spec: dict[str, Any]) -> set[str] | None:
    """The documents an equality on a metadata key can match, when the filter is one: a key that
    no stored document has matches nothing."""
    [(field, condition)] = spec.items()
    if not isinstance(field, str) or field.startswith("$") or field in ("title", "source", "id", "content_type", "created_at"):
        return None
    key = field.removeprefix("metadata.")
    op = next(iter(condition)) if isinstance(condition, dict) and len(condition) == 1 else "$eq"
    if key.split(".")[0] in BASELINE_KEYS or op not in ("$eq", "$in", "$gt", "$gte", "$lt", "$lte", "$contains", "$between"):
        return None
    return set()


@fuzz(400)
@given(specs=st.lists(filters(), min_size=1, max_size=8), mode=st.sampled_from(MODES))
def test_filters_run_as_bound_values_or_are_rejected(store, retrievers, vector, specs, mode):
    with Unchanged(store):
        for spec in specs:
            try:
                result = retrievers[mode].search(QUESTION, k=3, filters=spec, embedding=vector)
            except KGRagError as error:
                assert str(error)
                TALLY.add("filters", "rejected", 3)
                continue
            expected = _documents_matching(spec)
            if expected is not None:
                assert {d.id for d in result.documents} == expected, spec
            TALLY.add("filters", "ran", 3)


@pytest.mark.parametrize("mode", MODES)
def test_hostile_metadata_keys_and_values_filter_verbatim(retrievers, vector, mode):
    """Round trip: each stored hostile key and value finds exactly its documents."""
    for spec, expected in [
        ({"note": "x'; DELETE document; --"}, {BASELINE[0].key}),
        ({"my key ⟨⟩": "$auth"}, {BASELINE[0].key}),
        ({"metadata.$filter_0": {"$eq": "$scope_access"}}, {BASELINE[2].key}),  # a key starting with $ needs its prefix
        ({"metadata.nested": {"$exists": True}}, {BASELINE[0].key}),
        ({"note": None}, {BASELINE[2].key}),
        ({"note": {"$in": ["\u202eevil", "# comment"]}}, {BASELINE[1].key, BASELINE[3].key}),
        ({"title": "type::thing('document', 'x')"}, {BASELINE[2].key}),
        ({"id": "base·warsaw:"}, {BASELINE[1].key}),
    ]:
        found = {d.id for d in retrievers[mode].search(QUESTION, k=10, filters=spec, embedding=vector).documents}
        assert found == expected, (spec, found)
        TALLY.add("filters", "verbatim")


# -- questions, every retrieval mode ---------------------------------------------------------------


@fuzz(20)
@given(questions=st.lists(hostile(), min_size=1, max_size=4))
def test_questions_in_every_mode_answer_or_are_rejected(store, retrievers, questions):
    with Unchanged(store):
        for question in questions:
            for mode in MODES:
                try:
                    result = retrievers[mode].search(question, k=3)
                except KGRagError as error:
                    assert str(error)
                    assert not question.strip() or not storable(question), (mode, question, error)
                    TALLY.add("questions", "rejected")
                    continue
                assert result.query == question and len(result.documents) <= 3
                TALLY.add("questions", "ran")


# -- access labels ---------------------------------------------------------------------------------


@fuzz(60)
@given(
    labels=st.lists(st.one_of(hostile(), st.sampled_from(["public", "staff", "⟨staff⟩'; --"])), max_size=4),
    mode=st.sampled_from(MODES),
)
def test_access_labels_are_matched_verbatim(store, minilm, spacy_extractor, vector, labels, mode):
    with Unchanged(store):
        try:
            extra = {"extractor": spacy_extractor} if mode == "hybrid" else {}
            retriever = make_retriever(mode, store, embedder=minilm, access=labels, **extra)
            documents = retriever.search(QUESTION, k=10, embedding=vector).documents
        except KGRagError as error:
            assert str(error) and not storable(labels)
            TALLY.add("access labels", "rejected", max(len(labels), 1))
            return
        expected = {key for key, carried in BASELINE_LABELS.items() if carried & set(labels)}
        found = {d.id for d in documents}
        assert found <= expected
        if mode != "concept":  # concept mode finds documents through matching concepts only
            assert found == expected
        TALLY.add("access labels", "ran", max(len(labels), 1))


# -- agent tools: the JSON a model sends -------------------------------------------------------------

TOOL_NAMES = st.one_of(st.sampled_from([tool.name for tool in TOOLS]), hostile())
FIELD_NAMES = ["query", "k", "filters", "concept", "limit", "document_id", "first_chunk", "max_chunks", "chunks_per_document"]


@st.composite
def tool_calls(draw: st.DrawFn) -> tuple[str, Any]:
    name = draw(TOOL_NAMES)
    tool = next((tool for tool in TOOLS if tool.name == name), None)
    own = list(tool.arguments.model_fields) if tool is not None and draw(st.booleans()) else FIELD_NAMES
    arguments: dict[str, Any] = {}
    for field in draw(st.lists(st.sampled_from(own) | hostile(), max_size=4)):
        arguments[field] = draw(
            st.one_of(
                hostile(), JSON_VALUES, filters(), st.sampled_from([doc.key for doc in BASELINE]), st.integers(-3, 60)
            )
        )
    kind = draw(st.integers(0, 9))
    if kind == 0:
        return name, draw(hostile())  # not JSON at all
    if kind == 1:
        return name, json.dumps(draw(JSON_VALUES))  # JSON, not an object
    return name, json.dumps(arguments, ensure_ascii=draw(st.booleans()) or not storable(arguments))


def _check_answer(answer: str, name: str, arguments: Any) -> str:
    payload = json.loads(answer)
    if set(payload) == {"error"}:
        error = payload["error"]
        assert error["type"] not in ("internal_error", "tool_failed"), (name, arguments, error)
        assert error["message"]
        return "rejected"
    if name == "get_document":
        wanted = json.loads(arguments)["document_id"]
        doc = next(d for d in BASELINE if d.key == wanted)
        assert payload["id"] == doc.key and payload["title"] == doc.title and same(payload["metadata"], doc.metadata)
        return "verbatim"
    return "ran"


@fuzz(250)
@given(calls=st.lists(tool_calls(), min_size=1, max_size=8))
def test_tool_calls_answer_or_return_the_error_envelope(store, tools, calls):
    with Unchanged(store):
        for name, arguments in calls:
            TALLY.add("agent tools (JSON)", _check_answer(tools.call(name, arguments), name, arguments))


@fuzz(40)
@given(document_id=non_empty(), labels=st.lists(st.one_of(hostile(), st.sampled_from(["public", "staff"])), max_size=3))
def test_tools_read_only_inside_a_hostile_scope(store, tools, document_id, labels):
    with Unchanged(store):
        try:
            scoped = ToolDispatcher(store, retriever=tools.retriever, scope=Scope(access=labels))
        except KGRagError:
            assert not storable(labels)
            TALLY.add("agent tools (scope)", "rejected", len(labels) + 1)
            return
        for key in (document_id, *BASELINE_LABELS):
            payload = json.loads(scoped.call("get_document", {"document_id": key}))
            visible = key in BASELINE_LABELS and bool(BASELINE_LABELS[key] & set(labels))
            assert ("error" not in payload) == visible, (key, labels, payload)
            if "error" in payload:
                assert payload["error"]["type"] in ("not_found", "invalid_arguments"), payload
        TALLY.add("agent tools (scope)", "ran", len(labels) + 1)


# -- one MCP stdio session, many calls ------------------------------------------------------------


class McpSession:
    """An MCP client session over stdio to ``python -m surreal_kgrag.mcp_server``, driven from
    synchronous test code through an event loop in a thread."""

    def __init__(self, url: str) -> None:
        import mcp

        environment = {k: v for k, v in os.environ.items() if not k.startswith("SURREAL_KGRAG_")}
        environment["PYTHONPATH"] = str(ROOT)
        self.params = mcp.StdioServerParameters(
            command=sys.executable, args=["-m", "surreal_kgrag.mcp_server", "--db", url], env=environment
        )
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.ready = asyncio.Event()
        self.thread.start()

    async def _serve(self, started: asyncio.Future[Any], stop: asyncio.Event) -> None:
        import mcp

        try:
            async with mcp.Client(self.params) as client:
                started.set_result(client)
                await stop.wait()
        except BaseException as error:
            if not started.done():
                started.set_exception(error)
            raise

    def __enter__(self) -> McpSession:
        async def start() -> Any:
            self.stop = asyncio.Event()
            started: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            self.task = asyncio.ensure_future(self._serve(started, self.stop))
            return await started

        self.client = asyncio.run_coroutine_threadsafe(start(), self.loop).result(timeout=300)
        return self

    def call(self, name: str, arguments: dict[str, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(self.client.call_tool(name, arguments), self.loop).result(timeout=300)

    def __exit__(self, *exc: Any) -> None:
        async def stop() -> None:
            self.stop.set()
            await self.task

        asyncio.run_coroutine_threadsafe(stop(), self.loop).result(timeout=120)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=30)
        self.loop.close()


@pytest.fixture(scope="module")
def mcp_session(tmp_path_factory, minilm, spacy_extractor) -> Iterator[tuple[McpSession, str]]:
    pytest.importorskip("mcp", reason="the MCP server is the optional extra `mcp`")
    url = f"surrealkv://{tmp_path_factory.mktemp('mcp')}/kg"
    with SurrealStore(url) as store:
        Ingestor(store, embedder=minilm, extractor=spacy_extractor, config=_config()).ingest(BASELINE)
        before = snapshot(store)
    with McpSession(url) as session:  # the store is closed here: the server process holds the file
        yield session, url
    with SurrealStore(url) as store:
        assert snapshot(store) == before


@fuzz(30)
@given(calls=st.lists(tool_calls(), min_size=1, max_size=5))
def test_one_mcp_session_answers_every_generated_call(mcp_session, calls):
    session, _ = mcp_session
    for name, arguments in calls:
        try:
            parsed = json.loads(arguments)
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict) or not storable(parsed):
            # MCP carries a tool name and a JSON object of arguments, valid Unicode (the client refuses anything else)
            parsed = {"query": arguments} if storable(arguments) else {}
        if not storable(name):
            name = name.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
        result = session.call(name, parsed)
        [content] = result.content
        outcome = _check_answer(content.text, name, json.dumps(parsed))
        assert result.is_error == (outcome == "rejected")
        TALLY.add("MCP stdio session", outcome)


# -- the CLI, in process -----------------------------------------------------------------------------


@st.composite
def cli_arguments(draw: st.DrawFn) -> list[str]:
    command = draw(st.sampled_from(["query", "query", "query", "delete", "stats"]))
    argv = [command]
    if command == "query":
        argv.append(draw(hostile()))
        argv += ["--mode", draw(st.sampled_from(MODES) | hostile()), "-k", draw(st.sampled_from(["3", "0", "-1", "x"]) | hostile())]
        if draw(st.booleans()):
            argv += ["--filter", draw(st.one_of(filters().map(json.dumps), hostile()))]
        if draw(st.booleans()):
            argv += ["--access", ",".join(draw(st.lists(hostile(), max_size=3)))]
    elif command == "delete":
        argv += draw(st.lists(non_empty().filter(lambda s: not s.startswith("-")), min_size=1, max_size=3))
    argv += draw(st.sampled_from([[], ["--json"]]))
    if draw(st.integers(0, 5)) == 0:
        argv.insert(draw(st.integers(0, len(argv))), draw(hostile()))  # a stray argument anywhere
    return argv


@fuzz(40)
@given(commands=st.lists(cli_arguments(), min_size=1, max_size=3))
def test_cli_arguments_give_an_exit_code_and_a_message(store, url, capsys, commands):
    with Unchanged(store):
        for argv in commands:
            code = cli_main([*argv, "--db", url])
            out, err = capsys.readouterr()
            assert code in (0, 1, 2), (argv, code, err)
            if code:
                assert err.strip() and "Traceback" not in err, (argv, err)
                TALLY.add("CLI arguments", "rejected", len(argv))
            else:
                if "--json" in argv and argv[0] != "delete":
                    json.loads(out)
                if argv[0] == "delete":
                    assert "deleted 0" in out or '"deleted": 0' in out
                TALLY.add("CLI arguments", "ran", len(argv))


# -- the read-only SurrealQL runner (its own tests generate 10,000 statements; these add hostile strings)


@fuzz(300)
@given(texts=st.lists(hostile(), min_size=1, max_size=6))
def test_readonly_runner_refuses_or_only_reads(store, texts):
    with Unchanged(store):
        for text in texts:
            literal = json.dumps(text, ensure_ascii=False) if storable(text) else json.dumps(text)
            for statement in (text, f"SELECT id FROM document WHERE title = {literal}"):
                try:
                    run_readonly_query(store, statement)
                except ReadonlyQueryError as error:
                    assert str(error)
                    TALLY.add("read-only SurrealQL", "rejected")
                    continue
                TALLY.add("read-only SurrealQL", "ran")


# -- megabyte strings, a few per entry point ---------------------------------------------------------


@pytest.mark.parametrize("text", MEGABYTE, ids=["injection", "syntax", "prose-surrogate"])
def test_megabyte_strings(store, ingestor, retrievers, tools, vector, url, capsys, text):
    with Unchanged(store):
        for mode in ("chunk", "hybrid"):
            try:
                retrievers[mode].search(text, k=3)
                TALLY.add("megabyte strings", "ran")
            except KGRagError as error:
                assert str(error)
                TALLY.add("megabyte strings", "rejected")
        try:
            retrievers["chunk"].search(QUESTION, k=3, filters={"note": text, text[:200]: {"$ne": text}}, embedding=vector)
            TALLY.add("megabyte strings", "ran")
        except KGRagError as error:  # a lone surrogate, or more text than a filter may hold
            assert not storable(text) or "more than 1,000,000 characters of text" in str(error)
            TALLY.add("megabyte strings", "rejected")
        answer = json.loads(tools.call("get_document", json.dumps({"document_id": text})))
        assert answer["error"]["type"] == "invalid_arguments"
        TALLY.add("megabyte strings", "rejected")
        code = cli_main(["query", text[:200_000], "--db", url, "--mode", "chunk"])
        assert code in (0, 1) and "Traceback" not in capsys.readouterr().err
        TALLY.add("megabyte strings", "ran" if code == 0 else "rejected")
    # Metadata of a megabyte and the longest title, on a short document; a longer title is refused.
    too_long = SourceDocument(key="mega", text="Marie Curie lived in Warsaw.", title=text[:5000], source="mega")
    summary = ingestor.ingest([too_long])
    assert summary.failed == 1 and "title has 5,000 characters, more than 1,000" in summary.failures[0].reason
    TALLY.add("megabyte strings", "rejected")
    doc = SourceDocument(key="mega", text="Marie Curie lived in Warsaw.", title=text[:1000], source="mega", metadata={"blob": text})
    summary = ingestor.ingest([doc])
    try:
        if storable(text):
            assert summary.added == 1
            check_verbatim(stored_documents(store, ["mega"])["mega"], doc)
            TALLY.add("megabyte strings", "verbatim")
        else:
            assert summary.failed == 1 and "surrogate" in summary.failures[0].reason
            TALLY.add("megabyte strings", "rejected")
    finally:
        delete_documents(store, ["mega"])


# -- what the fuzzing found, each fixed at its source ----------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_a_query_that_is_empty_not_unicode_or_too_long_is_a_configuration_error(retrievers, mode):
    """These were a bare ValueError, a UnicodeEncodeError from the SDK's encoder, and spaCy's E088
    ValueError for a query over a million characters (hybrid and graph)."""
    for query, problem in [("  ", "non-empty"), ("polonium \udc80", "lone surrogate"), ("Warsaw " * 1500, "max_query_chars")]:
        with pytest.raises(ConfigurationError, match=problem):
            retrievers[mode].search(query, k=3)
    short = make_retriever(mode, retrievers[mode].store, embedder=retrievers[mode].embedder, max_query_chars=20)
    with pytest.raises(ConfigurationError, match="20"):
        short.search("Where was Marie Curie born, and when?", k=3)


@pytest.mark.parametrize("mode", MODES)
def test_a_callers_query_embedding_is_checked_before_any_query(retrievers, vector, mode):
    """Strings gave 384 pydantic errors; a short vector the engine's cosine error; 3 million values
    that error after seconds and half a gigabyte; NaN returned documents scored NaN."""
    bad = [
        (["a"] * 384, "list of numbers"),
        ([0.1] * 3, "384 numbers"),
        ([0.1] * 3_000_000, "got 3,000,000 values"),
        ([], "384 numbers"),
        ([float("nan")] * 384, "finite"),
        ([float("inf"), *vector[1:]], "finite"),
        ([[0.1] * 384], "384 numbers"),
        ("0.1 0.2", "384 numbers"),
    ]
    for embedding, problem in bad:
        with pytest.raises(ConfigurationError, match=problem):
            retrievers[mode].search(QUESTION, k=3, embedding=embedding)
    given = retrievers[mode].search("anything at all", k=3, embedding=np.asarray(vector, dtype=np.float32))
    assert [d.id for d in given.documents] == [d.id for d in retrievers[mode].search("anything at all", k=3, embedding=vector).documents]
    assert given.documents and all(math.isfinite(d.score) for d in given.documents)


def test_an_access_label_that_is_not_unicode_is_a_filter_error(store, minilm):
    """It reached the SDK's encoder (UnicodeEncodeError) on the first search."""
    with pytest.raises(FilterError, match="access label"):
        make_retriever("chunk", store, embedder=minilm, access=["public", "\udc80"])
    with pytest.raises(FilterError, match="access label"):
        ToolDispatcher(store, embedder=minilm, scope=Scope(access=["\ud800"]))
    with pytest.raises(FilterError, match="list of strings"):
        Scope(access="public")


def test_a_source_that_is_not_unicode_is_reported_before_any_model_work(store, minilm, spacy_extractor):
    """It failed in the write transaction, after the models had run, as "write failed: 'utf-8' codec..."."""
    embedder = CountingEmbedder(minilm)
    summary = Ingestor(store, embedder=embedder, extractor=spacy_extractor, config=_config()).ingest(
        [SourceDocument(key="surrogate-source", text="Marie Curie lived in Warsaw.", source="notes\udc80.txt")]
    )
    assert summary.failed == 1 and "lone surrogate" in summary.failures[0].reason
    assert embedder.texts == []
