"""Text-to-SurrealQL on the real embedded SurrealDB: the scripted model gets the schema and live graph
statistics, its query runs read-only, and refusals and errors go back to it for another try."""

from __future__ import annotations

import json

import pytest
from llm_support import CORPUS, ONTOLOGY, extraction_responder

from surreal_kgrag import IngestConfig, Ingestor, SourceDocument, SurrealStore
from surreal_kgrag.chunking import SentenceChunker
from surreal_kgrag.llm import (
    LLMExtractor,
    LLMSettings,
    ReadonlyLimits,
    ReadonlyQueryError,
    TextToSurqlError,
    atext_to_surql,
    run_readonly_query,
    text_to_surql,
)
from surreal_kgrag.llm.scripted import ScriptedChatServer, last_user_message
from surreal_kgrag.llm.text2surql import statistics_plan, system_prompt
from surreal_kgrag.retrieval.plan import run
from surreal_kgrag.schema import ensure_schema

BORN_IN_WARSAW = "SELECT VALUE in.name FROM RELATES_TO WHERE type = 'born_in' AND out.name = 'warsaw'"


def settings(server) -> LLMSettings:
    return LLMSettings(model="scripted", base_url=server.base_url, api_key="local", backoff=0.01)


@pytest.fixture(scope="module")
def store(minilm):
    with ScriptedChatServer(extraction_responder) as extraction, SurrealStore("mem://") as store:
        llm = LLMExtractor(settings(extraction), ontology=ONTOLOGY, cache=None)
        documents = [SourceDocument(key=k, text=text, title=title, source=k, access=["public"]) for k, (title, text) in CORPUS.items()]
        config = IngestConfig(chunker=SentenceChunker(max_tokens=12, overlap_tokens=0))
        summary = Ingestor(store, embedder=minilm, extractor=llm, config=config).ingest(documents)
        assert summary.llm is not None and summary.llm.relations > 0
        yield store


@pytest.fixture
def server():
    with ScriptedChatServer(lambda request: json.dumps({"query": BORN_IN_WARSAW})) as s:
        yield s


def scripted(*replies: str):
    """A model that sends these replies in turn (the last one again once they run out)."""
    sent = []

    def respond(request):
        sent.append(request)
        return replies[min(len(sent), len(replies)) - 1]

    return respond


def counts(store) -> list:
    return store.query_text(
        "counts", "SELECT VALUE [count(SELECT 1 FROM document), count(SELECT 1 FROM chunk), count(SELECT 1 FROM concept), "
                  "count(SELECT 1 FROM RELATES_TO)] FROM ONLY {}")


def test_the_model_sees_schema_and_live_statistics_and_its_query_runs(store, server):
    result = text_to_surql("Which person was born in Warsaw?", store, settings(server))
    # One edge per chunk that says so: in the Marie Curie and in the Warsaw document.
    assert result.rows == ["marie curie", "marie curie"] and result.statement == BORN_IN_WARSAW + " LIMIT 101"
    assert [a.error for a in result.attempts] == [None] and result.usage.requests == 1
    prompt = server.requests[0]["messages"][0]["content"]
    assert "- RELATES_TO (relation concept -> concept" in prompt and "- MENTIONS_CONCEPT (relation chunk -> concept)" in prompt
    born_in = run_readonly_query(store, "SELECT count() AS n FROM RELATES_TO WHERE type = 'born_in' GROUP ALL").rows[0]["n"]
    assert f"born_in {born_in}" in prompt
    documents = run_readonly_query(store, "SELECT count() AS n FROM document GROUP ALL").rows[0]["n"]
    top = run_readonly_query(store, "SELECT name, kind, df FROM concept ORDER BY df DESC, name LIMIT 1").rows[0]
    assert f"document {documents}" in prompt and f"{top['name']} ({top['kind']}, {top['df']})" in prompt
    assert server.requests[0]["messages"][1]["content"] == "Which person was born in Warsaw?"


def test_a_write_is_refused_and_the_refusal_goes_back_to_the_model(store, server):
    server.responder = scripted(json.dumps({"query": "DELETE RELATES_TO"}), json.dumps({"query": BORN_IN_WARSAW}))
    before = counts(store)
    result = text_to_surql("Which person was born in Warsaw?", store, settings(server))
    assert set(result.rows) == {"marie curie"}
    assert [a.statement for a in result.attempts] == ["DELETE RELATES_TO", BORN_IN_WARSAW + " LIMIT 101"]
    assert "must be one SELECT statement; it starts with 'DELETE'" in result.attempts[0].error
    assert "it starts with 'DELETE'" in last_user_message(server.requests[1])
    assert counts(store) == before


def test_an_engine_error_goes_back_too(store, server):
    server.responder = scripted(json.dumps({"query": "SELECT name FROM document WHERE"}), json.dumps({"query": BORN_IN_WARSAW}))
    result = text_to_surql("Which person was born in Warsaw?", store, settings(server))
    assert "Parse error" in result.attempts[0].error
    assert "Parse error" in last_user_message(server.requests[1])
    assert set(result.rows) == {"marie curie"}


def test_a_malformed_reply_goes_back(store, server):
    server.responder = scripted("SELECT name FROM concept", json.dumps({"query": BORN_IN_WARSAW}))
    result = text_to_surql("Which person was born in Warsaw?", store, settings(server))
    assert "not a JSON object" in result.attempts[0].error and len(result.attempts) == 2


def test_after_the_last_attempt_every_error_is_reported(store, server):
    server.responder = scripted(
        json.dumps({"query": "SELECT * FROM concept; DELETE concept"}),
        json.dumps({"query": "SELECT * FROM (CREATE concept:evil)"}),
        json.dumps({"query": "SELECT http::get('http://127.0.0.1:9') FROM concept"}),
    )
    before = counts(store)
    with pytest.raises(TextToSurqlError, match="no query ran after 3 attempts") as failed:
        text_to_surql("Delete everything", store, settings(server))
    assert [a.error.split(":")[0] for a in failed.value.attempts] == [
        "only one statement is allowed", "'CREATE' is not allowed (character 16)", "the function http"]
    assert failed.value.usage.requests == 3 and len(server.requests) == 3
    assert counts(store) == before


def test_a_scoped_caller_on_a_root_connection_is_refused_before_any_token(store, server):
    with pytest.raises(ReadonlyQueryError, match="not signed in as a record user"):
        text_to_surql("Which person was born in Warsaw?", store, settings(server), access=["public"])
    assert server.requests == []


def test_a_cut_answer_says_so_and_why(store, server):
    """The size note of the read-only run reaches the caller, as the row-limit note does."""
    server.responder = scripted(json.dumps({"query": "SELECT id, content FROM chunk"}))
    cut = text_to_surql("Show me every passage", store, settings(server), limits=ReadonlyLimits(max_bytes=1024))
    assert cut.truncated and cut.note is not None and cut.note.startswith("the rows were cut: the answer may hold 1,024 bytes")
    assert cut.rows and len(json.dumps(cut.rows, ensure_ascii=False, separators=(",", ":")).encode()) <= 1024
    few = text_to_surql("Show me two passages", store, settings(server), limits=ReadonlyLimits(rows=2))
    assert few.truncated and len(few.rows) == 2 and few.note is not None and "row limit 2" in few.note
    server.responder = scripted(json.dumps({"query": BORN_IN_WARSAW}))
    whole = text_to_surql("Who was born in Warsaw?", store, settings(server))
    assert not whole.truncated and whole.note is None


async def test_async_twin(store, server):
    result = await atext_to_surql("Which person was born in Warsaw?", store, settings(server))
    assert set(result.rows) == {"marie curie"}


def test_a_store_without_relations_describes_no_relation_table():
    with SurrealStore("mem://") as empty:
        ensure_schema(empty, dimension=8, embedder="test")
        stats = run(empty, statistics_plan(empty))
        assert stats.relation_types == [] and stats.tables == {"document": 0, "chunk": 0, "concept": 0, "MENTIONS_CONCEPT": 0}
        assert "RELATES_TO" not in system_prompt(stats)
