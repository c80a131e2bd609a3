"""Agent tools and their dispatcher on the real embedded SurrealDB with the real spaCy and MiniLM models.

The expected answers of the concept tools come from an oracle computed in Python: the same extractor
run over every stored chunk's text, counted with ``collections.Counter``. The tools get the same
numbers from the graph with SurrealQL.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from collections import Counter, defaultdict
from pathlib import Path

import jsonschema
import pytest
from json_server import JsonServer, chat_payload
from surrealdb import RecordID

from surreal_kgrag import IngestConfig, Ingestor, SurrealStore, get_stats
from surreal_kgrag.chunking import SentenceChunker
from surreal_kgrag.retrieval import ChunkRetriever
from surreal_kgrag.tools import (
    TOOLS,
    ChunkSearchResult,
    ConceptSearchResult,
    GetDocumentArgs,
    NotFoundError,
    SearchChunksArgs,
    SearchConceptsArgs,
    ToolDispatcher,
)

ROOT = Path(__file__).resolve().parents[1]

TEXTS = {
    "curie": "Marie Curie was a physicist born in Warsaw. She moved to Paris to study physics. "
    "Marie Curie and Pierre Curie discovered polonium in Paris. Polonium is named after Poland.",
    "pierre": "Pierre Curie was a French physicist. Pierre Curie married Marie Curie in Paris in 1895. He studied magnetism.",
    "warsaw": "Warsaw is the capital of Poland. The Vistula river flows through Warsaw. Marie Curie was born in Warsaw.",
    "nobel": "Alfred Nobel invented dynamite. The Nobel Prize is awarded in Stockholm every year.",
}
TITLES = {"curie": "Marie Curie", "pierre": "Pierre Curie", "warsaw": "Warsaw", "nobel": "Alfred Nobel"}
HOSTILE = "x'); REMOVE TABLE chunk; --"


@pytest.fixture(scope="module")
def store(minilm, spacy_extractor):
    with SurrealStore("mem://") as s:
        # Small chunks so documents have several; no metadata concepts, so the oracle is the extractor alone.
        config = IngestConfig(chunker=SentenceChunker(max_tokens=16, overlap_tokens=0), metadata_concepts=())
        summary = Ingestor(s, embedder=minilm, extractor=spacy_extractor, config=config).ingest_texts(
            list(TEXTS.values()),
            ids=list(TEXTS),
            titles=[TITLES[k] for k in TEXTS],
            metadatas=[{"topic": k} for k in TEXTS],
        )
        assert summary.added == len(TEXTS) and summary.chunks > len(TEXTS)
        yield s


@pytest.fixture(scope="module")
def tools(store, minilm):
    return ToolDispatcher(store, embedder=minilm)


@pytest.fixture(scope="module")
def oracle(store, spacy_extractor):
    """chunk id -> (document key, set of concept names), from the stored chunk texts."""
    rows = store.query("get_document", {"ids": [RecordID("document", key) for key in TEXTS]})[-1]
    chunks = [(row["id"].id, c) for row in rows for c in row["chunks"]]
    mentions = spacy_extractor.extract([c["content"] for _, c in chunks])
    return {c["id"].id: (doc, {m.name for m in found}) for (doc, c), found in zip(chunks, mentions)}


def _chunks_mentioning(oracle, name):
    return {chunk for chunk, (_, names) in oracle.items() if name in names}


def _error(answer: str) -> dict:
    payload = json.loads(answer)
    assert set(payload) == {"error"}, payload
    assert set(payload["error"]) == {"type", "message", "details"}
    assert payload["error"]["message"]
    return payload["error"]


# -- schemas ---------------------------------------------------------------------------------------


def _all_keys(node, parent=None):
    if isinstance(node, dict):
        for key, value in node.items():
            yield key, parent
            yield from _all_keys(value, key)
    elif isinstance(node, list):
        for item in node:
            yield from _all_keys(item, parent)


def test_schemas_are_openai_functions_and_valid_json_schema(tools):
    schemas = tools.schemas()
    assert [s["function"]["name"] for s in schemas] == [
        "search_chunks", "search_concepts", "chunks_for_concept", "documents_for_concept", "related_concepts",
        "concept_relations", "get_document",
    ]
    # run_surql only when asked for; its schema obeys the same rules.
    schemas = ToolDispatcher(tools.store, embedder=tools.embedder, allow_surql=True).schemas()
    assert [s["function"]["name"] for s in schemas] == [s["function"]["name"] for s in tools.schemas()] + ["run_surql"]
    for schema in schemas:
        assert set(schema) == {"type", "function"} and schema["type"] == "function"
        function = schema["function"]
        assert set(function) == {"name", "description", "parameters"} and len(function["description"]) > 30
        parameters = function["parameters"]
        jsonschema.Draft202012Validator.check_schema(parameters)
        assert parameters["type"] == "object" and parameters["additionalProperties"] is False
        # pydantic's generated titles are gone; every argument is described for the model
        assert not [key for key, parent in _all_keys(parameters) if key == "title" and parent != "properties"]
        assert all(prop.get("description") for prop in parameters["properties"].values())
        json.dumps(schema)  # plain JSON, ready for an API request

    by_name = {s["function"]["name"]: s["function"]["parameters"] for s in schemas}
    assert by_name["search_chunks"]["required"] == ["query"]
    assert by_name["search_chunks"]["properties"]["k"] == {
        "default": 5, "description": "how many documents to return, best first", "maximum": 50, "minimum": 1, "type": "integer",
    }
    assert by_name["related_concepts"]["required"] == ["concept"] == by_name["concept_relations"]["required"]
    assert by_name["run_surql"]["required"] == ["query"]
    assert by_name["get_document"]["required"] == ["document_id"]
    assert by_name["get_document"]["properties"]["max_chunks"]["maximum"] == 100


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("search_chunks", SearchChunksArgs(query="Where was Marie Curie born?", k=3).model_dump(mode="json")),
        ("search_chunks", {"query": "polonium", "k": 2, "chunks_per_document": 1, "filters": {"metadata.topic": "curie"}}),
        ("search_concepts", SearchConceptsArgs(query="physicist").model_dump(mode="json")),
        ("chunks_for_concept", {"concept": "Marie Curie", "limit": 3}),
        ("documents_for_concept", {"concept": "warsaw"}),
        ("related_concepts", {"concept": "pierre curie", "limit": 5}),
        ("get_document", GetDocumentArgs(document_id="curie", first_chunk=1).model_dump(mode="json")),
    ],
)
def test_arguments_from_the_models_validate_against_the_schemas(tools, name, arguments):
    schema = next(s["function"]["parameters"] for s in tools.schemas() if s["function"]["name"] == name)
    jsonschema.validate(arguments, schema, cls=jsonschema.Draft202012Validator)


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("search_chunks", {"query": "x", "k": 0}),
        ("search_chunks", {"query": "x", "k": 51}),
        ("search_chunks", {"query": "x", "k": "3"}),
        ("search_chunks", {"query": "x", "k": 2.5}),
        ("search_chunks", {"query": ""}),
        ("search_chunks", {"k": 3}),
        ("search_chunks", {"query": "x", "filters": "year > 2000"}),
        ("search_concepts", {"query": 7}),
        ("search_concepts", {"query": "x", "top": 3}),
        ("chunks_for_concept", {"concept": "x", "limit": 0}),
        ("related_concepts", {"concept": "x" * 301}),
        ("get_document", {"document_id": "curie", "first_chunk": -1}),
        ("get_document", {"document_id": "curie", "max_chunks": 101}),
    ],
)
def test_schema_and_dispatcher_reject_the_same_bad_arguments(tools, name, arguments):
    schema = next(s["function"]["parameters"] for s in tools.schemas() if s["function"]["name"] == name)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(arguments, schema, cls=jsonschema.Draft202012Validator)
    error = _error(tools.call(name, arguments))
    assert error["type"] == "invalid_arguments"
    assert error["details"]["errors"] and all(e["field"] and e["problem"] for e in error["details"]["errors"])


# -- the tools -------------------------------------------------------------------------------------


def test_search_chunks_returns_the_core_retrievers_documents(tools, store, minilm):
    result = tools.invoke("search_chunks", {"query": "Where was Marie Curie born?", "k": 2, "chunks_per_document": 1})
    assert isinstance(result, ChunkSearchResult) and result.mode == "chunk"
    core = ChunkRetriever(store, embedder=minilm).search("Where was Marie Curie born?", k=2)
    assert [d.id for d in result.documents] == [d.id for d in core.documents]
    assert [d.score for d in result.documents] == [d.score for d in core.documents]
    assert all(len(d.chunks) == 1 for d in result.documents)
    assert result.documents[0].chunks[0].content == core.documents[0].chunks[0].content
    assert {d.id for d in result.documents} <= {"curie", "warsaw", "pierre"}
    assert result.documents[0].title == TITLES[result.documents[0].id]
    assert result.documents[0].metadata == {"topic": result.documents[0].id}


def test_search_chunks_filters_reach_the_retriever(tools):
    answer = json.loads(tools.call("search_chunks", {"query": "physicist", "filters": {"metadata.topic": "nobel"}}))
    assert [d["id"] for d in answer["documents"]] == ["nobel"]
    hostile = json.loads(tools.call("search_chunks", {"query": "physicist", "filters": {"x; REMOVE TABLE chunk": 1}}))
    assert hostile["documents"] == []  # a metadata key like any other, bound as a value: nothing has it
    mistyped = json.loads(tools.call("search_chunks", {"query": "physicist", "filters": {"title": {"$gt": 5}}}))
    assert mistyped["error"]["type"] == "invalid_arguments" and "takes a string" in mistyped["error"]["message"]
    huge = json.loads(tools.call("search_chunks", {"query": "physicist", "filters": {"year": {"$gt": 2**70}}}))
    assert huge["error"]["type"] == "invalid_arguments" and "64 bits" in huge["error"]["message"]


def test_search_concepts_ranks_by_similarity_with_mention_counts(tools, oracle):
    result = tools.invoke("search_concepts", {"query": "Marie Curie", "k": 4})
    assert isinstance(result, ConceptSearchResult) and len(result.concepts) == 4
    top = result.concepts[0]
    assert (top.id, top.name, top.display, top.kind) == ("marie curie", "marie curie", "Marie Curie", "PERSON")
    assert top.score > 0.99
    scores = [c.score for c in result.concepts]
    assert scores == sorted(scores, reverse=True)
    for concept in result.concepts:
        chunks = _chunks_mentioning(oracle, concept.id)
        assert concept.chunks == len(chunks)
        assert concept.documents == len({oracle[c][0] for c in chunks})


def test_search_concepts_finds_a_concept_without_a_vector_by_its_name(tools, store, oracle):
    """A concept one chunk mentions gets no vector (IngestConfig.concept_vector_min_chunks); naming it finds it."""
    vectors = {row["name"]: row.get("embedding") for row in store.query("concept_vectors")[-1]}
    titled = set(store.query_text("test: titled", "SELECT VALUE name FROM concept WHERE titled;")[-1])
    lonely = sorted(n for n in vectors if len(_chunks_mentioning(oracle, n)) == 1 and n not in titled and len(n.split()) > 1)
    assert lonely and all(vectors[n] is None for n in lonely)
    for name in lonely[:3]:
        display = store.query_text("test: display", "RETURN type::record('concept', $n).display;", {"n": name})[-1]
        result = tools.invoke("search_concepts", {"query": display, "k": 3})
        assert result.concepts[0].id == name and result.concepts[0].score == 1.0 and result.concepts[0].chunks == 1
        assert len(result.concepts) == 3 and all(vectors[c.id] is not None for c in result.concepts[1:])
    # A query that names no stored concept is answered by the nearest vectors alone.
    fuzzy = tools.invoke("search_concepts", {"query": "a famous chemist", "k": 3})
    assert len(fuzzy.concepts) == 3 and all(vectors[c.id] is not None and c.score < 1.0 for c in fuzzy.concepts)


def test_chunks_for_concept_normalises_the_name_like_ingestion(tools, oracle):
    expected = _chunks_mentioning(oracle, "marie curie")
    assert len(expected) == 4
    result = tools.invoke("chunks_for_concept", {"concept": "  The MARIE  Curie's", "limit": 10})
    assert result.concept.id == "marie curie" and result.concept.chunks == len(expected)
    assert {c.id for c in result.chunks} == expected
    for chunk in result.chunks:
        assert chunk.document_id == oracle[chunk.id][0] and chunk.document_title == TITLES[chunk.document_id]
        assert "Marie Curie" in chunk.content and chunk.mentions >= 1
    limited = tools.invoke("chunks_for_concept", {"concept": "marie curie", "limit": 2})
    assert len(limited.chunks) == 2 and limited.concept.chunks == 4


def test_documents_for_concept_counts_mentioning_chunks_per_document(tools, oracle):
    chunks = _chunks_mentioning(oracle, "paris")
    expected = Counter(oracle[c][0] for c in chunks)
    result = tools.invoke("documents_for_concept", {"concept": "Paris"})
    assert {d.id: d.chunks for d in result.documents} == dict(expected)
    assert result.concept.documents == len(expected)
    assert [d.chunks for d in result.documents] == sorted(expected.values(), reverse=True)
    assert all(d.title == TITLES[d.id] and d.metadata == {"topic": d.id} and d.source for d in result.documents)


def test_related_concepts_rank_by_shared_chunks(tools, oracle):
    shared: Counter[str] = Counter()
    documents: dict[str, set[str]] = defaultdict(set)
    for chunk in _chunks_mentioning(oracle, "marie curie"):
        doc, names = oracle[chunk]
        for name in names - {"marie curie"}:
            shared[name] += 1
            documents[name].add(doc)
    result = tools.invoke("related_concepts", {"concept": "marie curie", "limit": 50})
    assert {r.id: r.shared_chunks for r in result.related} == dict(shared)
    assert {r.id: r.shared_documents for r in result.related} == {n: len(d) for n, d in documents.items()}
    ranked = [(r.shared_chunks, r.shared_documents) for r in result.related]
    assert ranked == sorted(ranked, reverse=True)
    assert result.related[0].id in {"paris", "warsaw", "pierre curie"} and result.related[0].shared_chunks == 2
    assert "marie curie" not in {r.id for r in result.related}
    assert len(tools.invoke("related_concepts", {"concept": "marie curie", "limit": 2}).related) == 2


def test_get_document_pages_through_chunks_in_order(tools):
    whole = tools.invoke("get_document", {"document_id": "curie", "max_chunks": 100})
    assert (whole.id, whole.title, whole.source, whole.metadata) == ("curie", "Marie Curie", "text[0]", {"topic": "curie"})
    assert whole.chunk_count == len(whole.chunks) == 3
    assert [c.index for c in whole.chunks] == [0, 1, 2]
    assert " ".join(c.content for c in whole.chunks) == TEXTS["curie"]
    page = tools.invoke("get_document", {"document_id": "curie", "first_chunk": 1, "max_chunks": 1})
    assert [c.id for c in page.chunks] == [whole.chunks[1].id] and page.chunk_count == 3
    past_the_end = tools.invoke("get_document", {"document_id": "curie", "first_chunk": 7})
    assert past_the_end.chunks == [] and past_the_end.chunk_count == 3


def test_unknown_concept_and_document_are_not_found_with_suggestions(tools):
    with pytest.raises(NotFoundError):
        tools.invoke("related_concepts", {"concept": "marie curies"})
    error = _error(tools.call("related_concepts", {"concept": "Marie Curies"}))
    assert error["type"] == "not_found"
    assert error["details"]["normalised"] == "marie curies" and error["details"]["suggestions"][0] == "marie curie"
    assert "search_concepts" in error["message"]
    error = _error(tools.call("get_document", {"document_id": "no-such-doc"}))
    assert error["type"] == "not_found" and error["details"] == {"document_id": "no-such-doc"}
    error = _error(tools.call("documents_for_concept", {"concept": "the"}))
    assert error["type"] == "invalid_arguments" and "not a concept name" in error["message"]


# -- the dispatcher's bad calls ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "arguments", "kind", "fragment"),
    [
        ("delete_everything", {}, "unknown_tool", "no tool named 'delete_everything'"),
        (None, {}, "unknown_tool", "no tool named None"),
        ("search_chunks", '{"query": "x", "k": 3', "invalid_arguments", "not valid JSON"),
        ("search_chunks", "[1, 2]", "invalid_arguments", "must be a JSON object, got list"),
        ("search_chunks", '{"query": "x", "k": ' + "9" * 5000 + "}", "invalid_arguments", "cannot be read as JSON"),
        ("search_chunks", b'{"query": "\xff"}', "invalid_arguments", "cannot be read as JSON"),
        ("search_chunks", '"just a string"', "invalid_arguments", "must be a JSON object, got str"),
        ("search_chunks", None, "invalid_arguments", "query: Field required"),
        ("search_chunks", '{"query": "x", "k": true}', "invalid_arguments", "k: Input should be a valid integer"),
        ("search_chunks", '{"query": "x", "k": 1000}', "invalid_arguments", "k: Input should be less than or equal to 50"),
        ("search_chunks", {"query": "x", "limit": 3}, "invalid_arguments", "limit: Extra inputs are not permitted"),
        ("get_document", {"document_id": ["curie"]}, "invalid_arguments", "document_id: Input should be a valid string"),
        ("search_concepts", {"query": "   "}, "invalid_arguments", "query: String should have at least 1 character"),
    ],
)
def test_bad_calls_answer_with_a_structured_error(tools, name, arguments, kind, fragment):
    error = _error(tools.call(name, arguments))
    assert error["type"] == kind
    assert fragment in error["message"]
    if kind == "unknown_tool":
        assert error["details"]["available"] == [tool.name for tool in TOOLS]


async def test_bad_calls_answer_the_same_async(tools):
    for name, arguments in [("nope", {}), ("search_chunks", "{"), ("search_chunks", {"query": "x", "k": 0}), ("get_document", {"document_id": "zz"})]:
        assert await tools.acall(name, arguments) == tools.call(name, arguments)


def test_hostile_strings_are_only_ever_bound_values(tools, store):
    before = get_stats(store)
    hostile_calls = [
        ("chunks_for_concept", {"concept": HOSTILE}),
        ("related_concepts", {"concept": "concept:x; DELETE concept; --"}),
        ("documents_for_concept", {"concept": "⟨x⟩`; REMOVE TABLE document; --"}),
        ("get_document", {"document_id": "curie'; DELETE document; --"}),
        ("get_document", {"document_id": "document:curie"}),
        ("search_concepts", {"query": "'); REMOVE TABLE concept; --"}),
        ("search_chunks", {"query": "}); REMOVE TABLE MENTIONS_CONCEPT; --"}),
    ]
    for name, arguments in hostile_calls:
        answer = json.loads(tools.call(name, arguments))
        assert "error" not in answer or answer["error"]["type"] == "not_found", answer
    after = get_stats(store)
    assert after.model_dump(exclude={"indexes"}) == before.model_dump(exclude={"indexes"})
    tables = store.query("schema_info")[0]["tables"]
    assert {"document", "chunk", "concept", "MENTIONS_CONCEPT"} <= set(tables)
    assert len(tools.invoke("chunks_for_concept", {"concept": "marie curie"}).chunks) == 4


def test_a_failing_store_is_an_error_answer_not_an_exception(minilm):
    with SurrealStore("mem://") as empty:  # never ingested: SurrealDB 3.x rejects reads of missing tables
        answer = ToolDispatcher(empty, embedder=minilm).call("chunks_for_concept", {"concept": "marie curie"})
    error = _error(answer)
    assert error["type"] == "query_failed" and "tool_concept.surql" in error["message"]


ONE_CALL_PER_TOOL = [
    ("search_chunks", {"query": "Who discovered polonium?", "k": 3}),
    ("search_concepts", '{"query": "capital city", "k": 5}'),
    ("chunks_for_concept", {"concept": "warsaw"}),
    ("documents_for_concept", {"concept": "pierre curie"}),
    ("related_concepts", {"concept": "poland"}),
    ("get_document", {"document_id": "warsaw"}),
]


def test_each_tool_returns_its_declared_result_model(tools):
    results = {tool.name: tool.result for tool in TOOLS}
    for name, arguments in ONE_CALL_PER_TOOL:
        result = tools.invoke(name, arguments)
        assert type(result) is results[name]
        assert json.loads(tools.call(name, arguments)) == result.model_dump(mode="json")


async def test_async_calls_equal_sync_calls(tools):
    for name, arguments in [*ONE_CALL_PER_TOOL, ("related_concepts", {"concept": "unknown thing"})]:
        assert await tools.acall(name, arguments) == tools.call(name, arguments)
    assert await tools.ainvoke("chunks_for_concept", {"concept": "warsaw"}) == tools.invoke("chunks_for_concept", {"concept": "warsaw"})


def test_dispatcher_can_offer_a_subset_of_tools(store, minilm):
    subset = ToolDispatcher(store, embedder=minilm, tools=["search_concepts", "get_document"])
    assert [s["function"]["name"] for s in subset.schemas()] == ["search_concepts", "get_document"]
    assert _error(subset.call("search_chunks", {"query": "x"}))["details"]["available"] == ["search_concepts", "get_document"]
    with pytest.raises(ValueError, match="unknown tools"):
        ToolDispatcher(store, embedder=minilm, tools=["search_everything"])


# -- the MCP server ---------------------------------------------------------------------------------


async def test_mcp_server_lists_and_runs_the_same_tools_in_process(tools):
    mcp = pytest.importorskip("mcp", reason="the MCP server is the optional extra `mcp`")
    from surreal_kgrag.mcp_server import build_server

    async with mcp.Client(build_server(tools)) as client:
        listed = (await client.list_tools()).tools
        assert [(t.name, t.description, t.input_schema) for t in listed] == [
            (s["function"]["name"], s["function"]["description"], s["function"]["parameters"]) for s in tools.schemas()
        ]
        result = await client.call_tool("related_concepts", {"concept": "Marie Curie", "limit": 3})
        assert not result.is_error
        assert result.content[0].text == tools.call("related_concepts", {"concept": "Marie Curie", "limit": 3})
        assert result.structured_content == json.loads(result.content[0].text)
        bad = await client.call_tool("search_chunks", {"query": "x", "k": 0})
        assert bad.is_error and json.loads(bad.content[0].text)["error"]["type"] == "invalid_arguments"
        hostile = await client.call_tool("chunks_for_concept", {"concept": HOSTILE})
        assert hostile.is_error and hostile.structured_content["error"]["type"] == "not_found"


async def test_mcp_server_module_serves_over_stdio(tmp_path, minilm, spacy_extractor):
    mcp = pytest.importorskip("mcp", reason="the MCP server is the optional extra `mcp`")
    url = f"surrealkv://{tmp_path}/kg"
    with SurrealStore(url) as store:
        Ingestor(store, embedder=minilm, extractor=spacy_extractor).ingest_texts([TEXTS["warsaw"]], ids=["warsaw"], titles=["Warsaw"])
    environment = {k: v for k, v in os.environ.items() if not k.startswith("SURREAL_KGRAG_")}
    environment["PYTHONPATH"] = str(ROOT)
    server = mcp.StdioServerParameters(command=sys.executable, args=["-m", "surreal_kgrag.mcp_server", "--db", url], env=environment)
    async with mcp.Client(server) as client:
        assert len((await client.list_tools()).tools) == len(TOOLS)
        result = await client.call_tool("get_document", {"document_id": "warsaw"})
        assert not result.is_error
        document = json.loads(result.content[0].text)
        assert document["title"] == "Warsaw" and " ".join(c["content"] for c in document["chunks"]) == TEXTS["warsaw"]
    # The same document is outside a scope with a label it does not carry.
    scoped = mcp.StdioServerParameters(
        command=sys.executable, args=["-m", "surreal_kgrag.mcp_server", "--db", url, "--access", "staff"], env=environment
    )
    async with mcp.Client(scoped) as client:
        hidden = await client.call_tool("get_document", {"document_id": "warsaw"})
        assert hidden.is_error and json.loads(hidden.content[0].text)["error"]["type"] == "not_found"
    # With --embedding-process a child embeds the graph mode's questions, and the searches answer as before.
    searched = {}
    for extra in ([], ["--embedding-process"]):
        arguments = ["-m", "surreal_kgrag.mcp_server", "--db", url, "--mode", "graph", *extra]
        served = mcp.StdioServerParameters(command=sys.executable, args=arguments, env=environment)
        async with mcp.Client(served) as client:
            result = await client.call_tool("search_chunks", {"query": "Which river flows through Warsaw?"})
            assert not result.is_error
            searched[bool(extra)] = [hit["id"] for hit in json.loads(result.content[0].text)["documents"]]
            assert _embedding_children(url) == (1 if extra else 0)
    assert searched[True] == searched[False] == ["warsaw"]


def _embedding_children(url: str) -> int:
    """Processes running the embedding child's program (surreal_kgrag.embed.child) for a server of the store at ``url``."""
    count = 0
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if b"surreal_kgrag.embed.child import serve" not in (proc / "cmdline").read_bytes():
                continue
            parent = (proc / "stat").read_text().rsplit(") ", 1)[1].split()[1]
            count += url.encode() in Path(f"/proc/{parent}/cmdline").read_bytes()
        except (OSError, IndexError):  # the process ended while we looked
            continue
    return count


class RawStdioServer:
    """``python -m surreal_kgrag.mcp_server`` driven line by line over its stdin and stdout, so a test
    can send what no MCP client sends; an answer not read within ``timeout`` seconds fails the test."""

    def __init__(self, url: str, log: Path) -> None:
        environment = {k: v for k, v in os.environ.items() if not k.startswith("SURREAL_KGRAG_")}
        environment["PYTHONPATH"] = str(ROOT)
        self.log = log
        self.process = subprocess.Popen(
            [sys.executable, "-m", "surreal_kgrag.mcp_server", "--db", url],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log.open("wb"), env=environment,
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)

    def send(self, line: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + b"\n")
        self.process.stdin.flush()

    def answer(self, timeout: float = 60) -> dict:
        try:
            return json.loads(self.lines.get(timeout=timeout))
        except queue.Empty:
            pytest.fail(f"no answer in {timeout} s; the server's stderr ends: {self.log.read_text()[-2000:]}")

    def request(self, request_id: int, method: str, params: dict | None = None) -> bytes:
        message = {"jsonrpc": "2.0", "id": request_id, "method": method}
        return json.dumps(message if params is None else {**message, "params": params}).encode()

    def peak_memory(self) -> int:
        """The server's peak resident memory (VmHWM) in bytes."""
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        return int(status.split("VmHWM:")[1].split()[0]) * 1024


@pytest.fixture(scope="module")
def raw_mcp(tmp_path_factory, minilm, spacy_extractor):
    pytest.importorskip("mcp", reason="the MCP server is the optional extra `mcp`")
    folder = tmp_path_factory.mktemp("raw-mcp")
    url = f"surrealkv://{folder}/kg"
    with SurrealStore(url) as store:
        Ingestor(store, embedder=minilm, extractor=spacy_extractor).ingest_texts([TEXTS["warsaw"]], ids=["warsaw"], titles=["Warsaw"])
    server = RawStdioServer(url, folder / "stderr.log")
    client = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}
    server.send(server.request(0, "initialize", client))
    assert server.answer(timeout=300)["result"]["serverInfo"]["name"] == "surreal-kgrag"
    server.send(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')
    yield server
    server.process.stdin.close()  # the end of its stdin ends the server
    assert server.process.wait(timeout=60) == 0, server.log.read_text()[-2000:]


def _bad_line_then_tools_list(server: RawStdioServer, line: bytes, code: int, request_id: int | str | None) -> dict:
    """Send ``line`` and a tools/list request behind it: the first answer is the line's JSON-RPC
    error (returned), the second the tools (an old server, dropping the line, answered only that)."""
    server.send(line)
    server.send(server.request(99, "tools/list"))
    error = server.answer()
    assert set(error) == {"jsonrpc", "id", "error"} and error["jsonrpc"] == "2.0", error
    assert (error["id"], error["error"]["code"]) == (request_id, code), error
    assert error["error"]["message"] == {-32700: "Parse error", -32600: "Invalid Request"}[code]
    assert 0 < len(error["error"]["data"]) <= 500  # says what was wrong, without echoing the line
    listed = server.answer()
    assert listed["id"] == 99 and len(listed["result"]["tools"]) == len(TOOLS), listed
    return error["error"]


@pytest.mark.parametrize(
    "line",
    [
        b"{not json",
        b"9" * 5000,
        b'{"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "search_chunks", "arguments": {"k": '
        + b"9" * 5000 + b"}}}",
        b'{"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "search_chunks", "arguments": '
        b'{"query": "\\ud800"}}}',
        b'{"jsonrpc": "2.0", "id": 5, "method": "tools/list", "params": {"a": ' + b"[" * 200 + b"]" * 200 + b"}}",
        b"\xff\xfe not UTF-8",
    ],
    ids=["garbage", "5000-digit-integer", "5000-digit-integer-in-a-request", "lone-surrogate", "nested-200-deep", "not-utf8"],
)
def test_mcp_stdio_answers_a_line_that_is_not_json_with_a_parse_error(raw_mcp, line):
    """JSON-RPC 2.0: invalid JSON is answered with -32700 and id null (no id can be read from it);
    the SDK's stdio transport dropped such a line and the client waited for ever."""
    data = _bad_line_then_tools_list(raw_mcp, line, -32700, None)["data"]
    assert data.startswith("Invalid JSON: ")


@pytest.mark.parametrize(
    ("line", "request_id", "data"),
    [
        (b"[]", None, "a JSON-RPC message is a JSON object, not an array"),
        (b"42", None, "a JSON-RPC message is a JSON object, not a number"),
        (b'"tools/list"', None, "a JSON-RPC message is a JSON object, not a string"),
        (b'{"jsonrpc": "2.0", "id": 7, "method": 3}', 7, "JSONRPCRequest.method: Input should be a valid string"),
        (b'{"jsonrpc": "1.0", "id": "a", "method": "tools/list"}', "a", "JSONRPCRequest.jsonrpc: Input should be '2.0'"),
        (b'{"id": 3, "method": "tools/list"}', 3, "JSONRPCRequest.jsonrpc: Field required"),
    ],
    ids=["array", "number", "string", "method-not-a-string", "jsonrpc-1.0", "no-jsonrpc"],
)
def test_mcp_stdio_answers_json_that_is_no_message_with_invalid_request(raw_mcp, line, request_id, data):
    """Valid JSON that is no JSON-RPC request, notification or response: -32600, with the id the
    line carries when it is a valid one (a string or integer), else null."""
    assert _bad_line_then_tools_list(raw_mcp, line, -32600, request_id)["data"] == data


def test_mcp_stdio_skips_an_overlong_line_unread(raw_mcp):
    """A line of 100 MB is read through in pieces, not kept: a -32700 saying how long it was, and
    the server's peak memory grows by less than the line (it serves on)."""
    clear_refs = Path(f"/proc/{raw_mcp.process.pid}/clear_refs")
    clear_refs.write_text("5")  # reset the peak (VmHWM) to the memory in use now
    before = raw_mcp.peak_memory()
    piece = b"9" * (1 << 20)
    for _ in range(100):
        raw_mcp.process.stdin.write(piece)
    raw_mcp.send(b"")
    raw_mcp.send(raw_mcp.request(98, "tools/call", {"name": "get_document", "arguments": {"document_id": "warsaw"}}))
    error = raw_mcp.answer()
    assert set(error) == {"jsonrpc", "id", "error"}, error  # an old server answered only the call behind the line
    assert (error["id"], error["error"]["code"], error["error"]["message"]) == (None, -32700, "Parse error")
    # MAX_LINE_BYTES (16 MiB); the newline counts
    assert error["error"]["data"] == "a line of 104,857,601 bytes, more than the 16,777,216 this server reads"
    document = raw_mcp.answer()
    assert document["id"] == 98 and not document["result"]["isError"], document
    assert json.loads(document["result"]["content"][0]["text"])["title"] == "Warsaw"
    assert raw_mcp.peak_memory() - before < 64 << 20


# -- the example -------------------------------------------------------------------------------------


def _run_example(tmp_path, **env):
    environment = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    environment.update(PYTHONPATH=str(ROOT), **env)
    run = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "tool_calling.py")],
        cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=600,
    )
    assert run.returncode == 0, run.stderr
    return run.stdout


def test_tool_calling_example_runs_offline_with_a_labelled_stand_in(tmp_path):
    out = _run_example(tmp_path)
    assert "OPENAI_API_KEY is not set" in out and "[scripted stand-in, not a model]" in out
    assert "ingested 6 documents" in out
    for name in ("search_chunks", "search_concepts", "documents_for_concept", "related_concepts", "get_document"):
        assert f"-> {name}(" in out
    # the misspelt concept comes back as a readable error and the next call uses its suggestion
    assert '"type": "not_found"' in out and '-> related_concepts({"concept": "marie curie", "limit": 5})' in out
    answer = out.split("answer: ", 1)[1]
    assert "(scripted, not generated)" in answer and "born in Warsaw" in answer and "Pierre Curie" in answer


def one_tool_call(path: str, body: dict) -> tuple[int, dict]:
    """An OpenAI-compatible chat model that asks for one tool call, then answers with the tool
    result it was sent."""
    tool_messages = [m for m in body["messages"] if m["role"] == "tool"]
    if tool_messages:
        concept = json.loads(tool_messages[-1]["content"])["concepts"][0]["display"]
        return 200, chat_payload({"role": "assistant", "content": f"The top concept is {concept}."}, body["model"])
    call = {"name": "search_concepts", "arguments": json.dumps({"query": "radioactive element", "k": 2})}
    message = {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": call}]}
    return 200, chat_payload(message, body["model"], finish_reason="tool_calls")


def test_tool_calling_example_drives_openai_chat_completions(tmp_path):
    with JsonServer(one_tool_call) as server:
        out = _run_example(tmp_path, OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=server.base_url, OPENAI_MODEL="local-test")
    assert "[OpenAI]" in out and "scripted" not in out
    assert '-> search_concepts({"query": "radioactive element", "k": 2})' in out
    first, second = server.requests
    assert first["model"] == "local-test" and first["tools"] == [tool.schema() for tool in TOOLS]
    tool_message = second["messages"][-1]
    assert tool_message["role"] == "tool" and tool_message["tool_call_id"] == "call_1"
    top = json.loads(tool_message["content"])["concepts"][0]["display"]
    assert f"answer: The top concept is {top}." in out
