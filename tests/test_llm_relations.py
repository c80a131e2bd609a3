"""Typed relations at ingest, on the real embedded SurrealDB with MiniLM, an LLM extractor talking to
the scripted OpenAI-compatible server on 127.0.0.1 (tests/llm_support.py; not a model), and the
agent tools that read them: ``concept_relations`` and the opt-in ``run_surql``, through the
dispatcher and the MCP server over stdio, scoped like every other tool."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from llm_support import CORPUS, ONTOLOGY, extraction_responder
from test_ingest_safety import integrity

from surreal_kgrag import IngestConfig, Ingestor, SourceDocument, SurrealStore, delete_documents
from surreal_kgrag.chunking import SentenceChunker
from surreal_kgrag.llm import ExtractionCache, LLMExtractor, LLMSettings, ReadonlyLimits, load_ontology, run_readonly_query
from surreal_kgrag.llm.scripted import ScriptedChatServer
from surreal_kgrag.retrieval import Scope
from surreal_kgrag.tenancy import READER_ACCESS, add_reader, enable_tenancy
from surreal_kgrag.tools import ConceptRelations, NotFoundError, ToolDispatcher

ROOT = Path(__file__).resolve().parents[1]
STAFF_ONLY = {"nobel", "warsaw"}  # everything else is public
CONFIG = IngestConfig(chunker=SentenceChunker(max_tokens=12, overlap_tokens=0), metadata_concepts=())


def documents() -> list[SourceDocument]:
    return [
        SourceDocument(key=key, text=text, title=title, source=f"corpus/{key}", access=["staff"] if key in STAFF_ONLY else ["public"])
        for key, (title, text) in CORPUS.items()
    ]


@pytest.fixture(scope="module")
def server():
    with ScriptedChatServer(extraction_responder) as s:
        yield s


@pytest.fixture(scope="module")
def cache_path(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("llm-cache") / "extractions.sqlite3"


def extractor(server, cache_path) -> LLMExtractor:
    settings = LLMSettings(model="scripted", base_url=server.base_url, api_key="local", backoff=0.01, timeout=5.0)
    return LLMExtractor(settings, ontology=ONTOLOGY, cache=ExtractionCache(cache_path))


def ingest(store, server, cache_path, minilm):
    return Ingestor(store, embedder=minilm, extractor=extractor(server, cache_path), config=CONFIG).ingest(documents())


def rows(store, statement):
    return run_readonly_query(store, statement, limits=ReadonlyLimits(rows=10_000)).rows


@pytest.fixture(scope="module")
def graph(server, cache_path, minilm):
    """The corpus ingested once with the LLM extractor; the requests it took."""
    with SurrealStore("mem://") as store:
        before = len(server.requests)
        summary = ingest(store, server, cache_path, minilm)
        yield store, summary, server.requests[before:]


def relation_rows(store):
    return rows(store, "SELECT id, type, in, out, chunk, doc, access, in_ontology FROM RELATES_TO ORDER BY id")


def test_the_ingest_writes_relations_with_their_documents_and_reports_tokens(graph):
    store, summary, requests = graph
    assert summary.added == len(CORPUS) and summary.chunks >= 3 * len(CORPUS) and summary.failed == 0
    llm = summary.llm
    assert llm is not None
    assert llm.chunks == llm.requests == len(requests) == summary.chunks  # one request per chunk, none cached
    assert (llm.cache_hits, llm.fallbacks, llm.retries) == (0, 0, 0)
    # The scripted server counts 4 characters a token; the summary adds up what it reported.
    assert llm.prompt_tokens == sum(max(1, sum(len(m["content"]) for m in r["messages"]) // 4) for r in requests)
    assert llm.completion_tokens >= llm.requests
    stored = relation_rows(store)
    assert llm.relations == len(stored) > 0
    assert integrity(store) == {}

    # Every edge links two concepts its chunk mentions, in its chunk's document, under that document's labels.
    checks = rows(store, "SELECT type, in.kind AS subject, out.kind AS object, in IN chunk->MENTIONS_CONCEPT.out AS s_ok, "
                         "out IN chunk->MENTIONS_CONCEPT.out AS o_ok, chunk.doc = doc AS same_doc, access = doc.access AS same_access "
                         "FROM RELATES_TO")
    ontology = load_ontology(ONTOLOGY)
    for edge in checks:
        relation = ontology.relation(edge["type"])
        assert relation is not None and ontology.role_violation(relation, edge["subject"], edge["object"]) is None
        assert edge["s_ok"] and edge["o_ok"] and edge["same_doc"] and edge["same_access"]
    born = rows(store, "SELECT in.name AS person, out.name AS place FROM RELATES_TO WHERE type = 'born_in'")
    assert {(b["person"], b["place"]) for b in born} == {("marie curie", "warsaw"), ("pierre curie", "paris"), ("alfred nobel", "stockholm")}
    per_doc = {r["doc"]: r["n"] for r in rows(store, "SELECT doc, count() AS n FROM RELATES_TO GROUP BY doc")}
    assert set(per_doc) == {f"document:{key}" for key in CORPUS}


def test_ingesting_again_costs_no_tokens_and_writes_the_same_relations(graph, server, cache_path, minilm):
    store, _, _ = graph
    asked = len(server.requests)
    with SurrealStore("mem://") as again:
        summary = ingest(again, server, cache_path, minilm)
        assert len(server.requests) == asked
        assert summary.llm is not None
        assert (summary.llm.cache_hits, summary.llm.requests, summary.llm.prompt_tokens) == (summary.chunks, 0, 0)
        assert relation_rows(again) == relation_rows(store)
        assert summary.llm.relations == len(relation_rows(store))


def test_an_ingest_without_an_llm_reports_none(spacy_extractor, minilm):
    with SurrealStore("mem://") as store:
        summary = Ingestor(store, embedder=minilm, extractor=spacy_extractor).ingest_texts([CORPUS["warsaw"][1]], ids=["warsaw"])
        assert summary.llm is None and summary.added == 1
        assert rows(store, "SELECT VALUE id FROM RELATES_TO") == []


@pytest.fixture
def fresh(server, cache_path, minilm, graph):
    """A store of its own (ingested from the cache: no tokens)."""
    with SurrealStore("mem://") as store:
        ingest(store, server, cache_path, minilm)
        yield store


def test_relations_go_with_their_documents_on_delete_and_reingest(fresh, server, cache_path, minilm):
    per_doc = {r["doc"]: r["n"] for r in rows(fresh, "SELECT doc, count() AS n FROM RELATES_TO GROUP BY doc")}
    assert per_doc["document:warsaw"] >= 2 and per_doc["document:nobel"] >= 2
    assert delete_documents(fresh, ["warsaw"]) == 1
    after = {r["doc"]: r["n"] for r in rows(fresh, "SELECT doc, count() AS n FROM RELATES_TO GROUP BY doc")}
    assert after == {d: n for d, n in per_doc.items() if d != "document:warsaw"}
    assert integrity(fresh) == {}

    # A changed document is rewritten with the relations of its new text, in the same transaction.
    changed = SourceDocument(key="nobel", text="Alfred Nobel was born in Stockholm.", title="Alfred Nobel", source="corpus/nobel", access=["staff"])
    summary = Ingestor(fresh, embedder=minilm, extractor=extractor(server, cache_path), config=CONFIG).ingest([changed])
    assert summary.updated == 1 and summary.llm is not None and summary.llm.relations == 1
    nobel = rows(fresh, "SELECT type, in.name AS s, out.name AS o, chunk.content AS evidence FROM RELATES_TO WHERE doc = document:nobel")
    assert nobel == [{"type": "born_in", "s": "alfred nobel", "o": "stockholm", "evidence": "Alfred Nobel was born in Stockholm."}]
    assert integrity(fresh) == {}


def test_deleting_a_chunk_deletes_its_relations_by_the_schema_cascade(fresh):
    chunk = rows(fresh, "SELECT VALUE chunk FROM RELATES_TO WHERE type = 'capital_of' AND doc = document:warsaw")[0]
    table, key = chunk.split(":", 1)
    others = [r for r in relation_rows(fresh) if r["chunk"] != chunk]
    assert len(others) < len(relation_rows(fresh))
    fresh.query_text("test_delete_chunk", "DELETE type::record($table, $key);", {"table": table, "key": key})
    assert relation_rows(fresh) == others


# -- the concept_relations tool ---------------------------------------------------------------------


def relations_of(dispatcher: ToolDispatcher, concept: str) -> set[tuple[str, str, str, str]]:
    result = dispatcher.invoke("concept_relations", {"concept": concept})
    assert isinstance(result, ConceptRelations)
    return {(r.subject, r.type, r.object, r.document_id) for r in result.relations}


def test_concept_relations_follow_typed_edges_within_the_dispatchers_scope(graph, minilm):
    store, _, _ = graph
    everyone = ToolDispatcher(store, embedder=minilm)
    warsaw = relations_of(everyone, "The Warsaw")
    assert {("marie curie", "born_in", "warsaw", "marie"), ("marie curie", "born_in", "warsaw", "warsaw"),
            ("warsaw", "capital_of", "poland", "warsaw")} <= warsaw
    result = everyone.invoke("concept_relations", {"concept": "Warsaw"})
    capital = next(r for r in result.relations if r.type == "capital_of")
    assert capital.evidence.startswith("Warsaw is the capital of Poland") and capital.document_title == "Warsaw"
    assert result.concept.name == "warsaw" and result.concept.documents == 2

    # The Warsaw document is for staff: a public caller sees Marie Curie's birthplace from her own page only.
    public = ToolDispatcher(store, embedder=minilm, scope=Scope(access=["public"]))
    assert relations_of(public, "Warsaw") == {r for r in warsaw if r[3] not in STAFF_ONLY}
    assert public.invoke("concept_relations", {"concept": "Warsaw"}).concept.documents == 1
    staff = ToolDispatcher(store, embedder=minilm, scope=Scope(access=["staff"]))
    assert relations_of(staff, "Warsaw") == {r for r in warsaw if r[3] in STAFF_ONLY}
    # Alfred Nobel is mentioned only in a staff document: not found, like a missing concept.
    with pytest.raises(NotFoundError):
        public.invoke("concept_relations", {"concept": "Alfred Nobel"})
    assert json.loads(public.call("concept_relations", {"concept": "Alfred Nobel"}))["error"]["type"] == "not_found"
    # A filter narrows the same way.
    marie_only = ToolDispatcher(store, embedder=minilm, scope=Scope(filters={"source": "corpus/marie"}))
    assert relations_of(marie_only, "Warsaw") == {("marie curie", "born_in", "warsaw", "marie")}


async def test_concept_relations_async_equals_sync(graph, minilm):
    store, _, _ = graph
    tools = ToolDispatcher(store, embedder=minilm, scope=Scope(access=["public"]))
    assert await tools.acall("concept_relations", {"concept": "Marie Curie", "limit": 3}) == tools.call(
        "concept_relations", {"concept": "Marie Curie", "limit": 3}
    )
    assert len(json.loads(tools.call("concept_relations", {"concept": "Marie Curie", "limit": 3}))["relations"]) == 3


# -- run_surql --------------------------------------------------------------------------------------


def test_run_surql_is_offered_only_when_allowed(graph, minilm):
    store, _, _ = graph
    default = ToolDispatcher(store, embedder=minilm)
    assert "run_surql" not in [s["function"]["name"] for s in default.schemas()]
    assert json.loads(default.call("run_surql", {"query": "SELECT * FROM concept"}))["error"]["type"] == "unknown_tool"
    with pytest.raises(ValueError, match="run_surql needs allow_surql=True"):
        ToolDispatcher(store, embedder=minilm, tools=["run_surql"])

    tools = ToolDispatcher(store, embedder=minilm, allow_surql=True, surql_limits=ReadonlyLimits(rows=5))
    schema = next(s["function"] for s in tools.schemas() if s["function"]["name"] == "run_surql")
    assert "RELATES_TO" in schema["description"] and schema["parameters"]["required"] == ["query"]
    counted = json.loads(tools.call("run_surql", {"query": "SELECT type, count() AS n FROM RELATES_TO GROUP BY type ORDER BY type"}))
    assert {row["type"] for row in counted["rows"]} == {"born_in", "capital_of", "discovered", "married_to", "won"}
    assert sum(row["n"] for row in counted["rows"]) == len(relation_rows(store))
    cut = json.loads(tools.call("run_surql", {"query": "SELECT index FROM chunk", "max_rows": 50}))
    assert len(cut["rows"]) == 5 and cut["truncated"]  # the dispatcher's limit wins over max_rows
    for statement, code in [("DELETE RELATES_TO", "not_select"), ("SELECT * FROM concept; REMOVE TABLE chunk", "multiple_statements"),
                            ("SELECT * FROM (DELETE chunk)", "forbidden_word")]:
        refused = json.loads(tools.call("run_surql", {"query": statement}))["error"]
        assert refused["type"] == "query_refused" and refused["details"] == {"code": code}, refused
    assert len(relation_rows(store)) == sum(row["n"] for row in counted["rows"])  # nothing was deleted


def test_run_surql_answers_within_the_size_limit(graph, minilm):
    """A row that holds a whole table (every chunk with its vector) is cut, and the answer says so."""
    store, _, _ = graph
    query = {"query": "SELECT <-MENTIONS_CONCEPT<-chunk.* AS chunks FROM concept", "max_rows": 500}
    wide = ToolDispatcher(store, embedder=minilm, allow_surql=True, surql_limits=ReadonlyLimits(rows=500, max_bytes=64 * 1024 * 1024))
    assert len(wide.call("run_surql", query)) > 200_000
    tools = ToolDispatcher(store, embedder=minilm, allow_surql=True, surql_limits=ReadonlyLimits(rows=500, max_bytes=16 * 1024))
    answer = tools.call("run_surql", query)
    cut = json.loads(answer)
    assert len(answer) < 17 * 1024 and cut["truncated"] and "may hold 16,384 bytes of JSON" in cut["note"]


def test_run_surql_refuses_a_scoped_caller_on_a_root_connection(graph, minilm):
    store, _, _ = graph
    for scope in (Scope(access=["public"]), Scope(filters={"source": "corpus/marie"})):
        tools = ToolDispatcher(store, embedder=minilm, allow_surql=True, scope=scope)
        refused = json.loads(tools.call("run_surql", {"query": "SELECT VALUE doc FROM RELATES_TO"}))["error"]
        assert refused["type"] == "query_refused" and refused["details"] == {"code": "scope"}


@pytest.fixture(scope="module")
def tenancy_url(tmp_path_factory, server, cache_path, minilm, graph):
    """The corpus in a surrealkv:// store in the tenancy mode, with a public and a staff reader."""
    url = f"surrealkv://{tmp_path_factory.mktemp('relations')}/kg"
    with SurrealStore(url) as root:
        assert ingest(root, server, cache_path, minilm).llm.requests == 0
        enable_tenancy(root)
        add_reader(root, "pub", "p", ["public"])
        add_reader(root, "staffer", "s", ["staff"])
    return url


def test_a_reader_runs_surql_and_sees_only_the_relations_of_its_documents(tenancy_url, minilm):
    with SurrealStore(tenancy_url, access=READER_ACCESS, access_variables={"name": "pub", "secret": "p"}) as reader:
        tools = ToolDispatcher(reader, embedder=minilm, allow_surql=True)
        docs = json.loads(tools.call("run_surql", {"query": "SELECT VALUE doc FROM RELATES_TO", "max_rows": 500}))["rows"]
        assert docs and {d.removeprefix("document:") for d in docs} == set(CORPUS) - STAFF_ONLY
        assert {r[3] for r in relations_of(tools, "Warsaw")} == {"marie"}
        # The dispatcher's scope may be wider than the reader's labels (the database narrows it)...
        wider = ToolDispatcher(reader, embedder=minilm, allow_surql=True, scope=Scope(access=["public", "staff"]))
        assert json.loads(wider.call("run_surql", {"query": "SELECT VALUE doc FROM RELATES_TO", "max_rows": 500}))["rows"] == docs
        # ...but not narrower: the reader could read documents the caller may not.
        narrower = ToolDispatcher(reader, embedder=minilm, allow_surql=True, scope=Scope(access=["other"]))
        refused = json.loads(narrower.call("run_surql", {"query": "SELECT VALUE doc FROM RELATES_TO"}))["error"]
        assert refused["type"] == "query_refused" and "labelled ['public']" in refused["message"]


# -- the MCP server over stdio ----------------------------------------------------------------------


async def test_mcp_server_serves_the_relation_tools_in_its_scope(tenancy_url):
    mcp = pytest.importorskip("mcp", reason="the MCP server is the optional extra `mcp`")
    environment = {k: v for k, v in os.environ.items() if not k.startswith("SURREAL_KGRAG_")}
    environment["PYTHONPATH"] = str(ROOT)

    def server(*options: str):
        args = ["-m", "surreal_kgrag.mcp_server", "--db", tenancy_url, *options]
        return mcp.StdioServerParameters(command=sys.executable, args=args, env=environment)

    async with mcp.Client(server("--allow-surql")) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        assert "concept_relations" in names and names[-1] == "run_surql"
        result = await client.call_tool("concept_relations", {"concept": "Warsaw"})
        assert not result.is_error
        assert {r["document_id"] for r in result.structured_content["relations"]} == {"marie", "warsaw"}
        counted = await client.call_tool("run_surql", {"query": "SELECT count() AS n FROM RELATES_TO GROUP ALL"})
        assert not counted.is_error and counted.structured_content["rows"][0]["n"] > 0

    async with mcp.Client(server("--access", "public")) as client:
        assert "run_surql" not in [t.name for t in (await client.list_tools()).tools]  # not without --allow-surql
        result = await client.call_tool("concept_relations", {"concept": "Warsaw"})
        relations = result.structured_content["relations"]
        assert relations and {r["document_id"] for r in relations} == {"marie"}  # the staff document's relations are hidden
        assert "capital_of" not in {r["type"] for r in relations}

    async with mcp.Client(server("--access", "public", "--allow-surql")) as client:
        refused = await client.call_tool("run_surql", {"query": "SELECT VALUE doc FROM RELATES_TO"})
        assert refused.is_error and refused.structured_content["error"]["details"] == {"code": "scope"}
