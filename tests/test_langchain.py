"""The LangChain integration on the real embedded SurrealDB with the real spaCy and MiniLM models:
the langchain-tests standard suites (retriever and tool, no overrides) and the behaviour they do not cover."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("langchain_surreal_kgrag", reason="install integrations/langchain (scripts/setup.sh does)")

from langchain_core.documents import Document
from langchain_core.messages import ToolCall
from langchain_core.tools import ToolException, create_retriever_tool
from langchain_tests.integration_tests import RetrieversIntegrationTests, ToolsIntegrationTests
from langchain_tests.unit_tests import ToolsUnitTests
from pydantic import ValidationError

from langchain_surreal_kgrag import SurrealKGRetriever, create_kg_search_tool
from surreal_kgrag import ConfigurationError, Ingestor, StoreConnectionError, SurrealStore, get_stats
from surreal_kgrag.retrieval import RETRIEVERS, make_retriever

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "data"
QUESTION = "Where was Marie Curie born?"


@pytest.fixture(scope="module")
def kg_url(tmp_path_factory, minilm, spacy_extractor):
    """An embedded file store of examples/data (six documents). A file store, not mem://, because the
    standard suite builds several retrievers from the same URL and they must see the same data."""
    url = f"surrealkv://{tmp_path_factory.mktemp('langchain') / 'kg'}"
    with SurrealStore(url) as store:
        summary = Ingestor(store, embedder=minilm, extractor=spacy_extractor).ingest(EXAMPLES)
    assert summary.added == 6
    return url


@pytest.fixture
def retriever(kg_url):
    retriever = SurrealKGRetriever(db_url=kg_url, mode="chunk", k=4)
    yield retriever
    retriever.close()


# -- langchain-tests standard suites -------------------------------------------------------------


class _StoreURL:
    url: str

    @pytest.fixture(autouse=True, scope="class")
    @classmethod
    def _url(cls, kg_url):
        cls.url = kg_url


class _RetrieverSuite(_StoreURL, RetrieversIntegrationTests):
    mode: str
    query: str

    @property
    def retriever_constructor(self):
        return SurrealKGRetriever

    @property
    def retriever_constructor_params(self):
        return {"db_url": self.url, "mode": self.mode}

    @property
    def retriever_query_example(self):
        return self.query


class TestChunkModeStandard(_RetrieverSuite):
    mode, query = "chunk", QUESTION


class TestConceptModeStandard(_RetrieverSuite):
    mode, query = "concept", "Which prize did the Curies win?"


def _needs_mode(mode: str) -> pytest.MarkDecorator:
    return pytest.mark.skipif(mode not in RETRIEVERS, reason=f"this core has no {mode!r} retriever yet")


@_needs_mode("hybrid")
class TestHybridModeStandard(_RetrieverSuite):
    mode, query = "hybrid", QUESTION


@_needs_mode("graph")
class TestGraphModeStandard(_RetrieverSuite):
    mode, query = "graph", "Which prize did Marie Curie's husband share?"


class _ToolSetup(_StoreURL):
    @property
    def tool_constructor(self):
        return create_kg_search_tool(SurrealKGRetriever(db_url=self.url, mode="chunk", k=2))

    @property
    def tool_invoke_params_example(self):
        return {"query": QUESTION, "k": 2}


class TestToolUnit(_ToolSetup, ToolsUnitTests):
    pass


class TestToolIntegration(_ToolSetup, ToolsIntegrationTests):
    pass


# -- behaviour -----------------------------------------------------------------------------------


def test_documents_carry_id_metadata_and_best_chunks(retriever):
    docs = retriever.invoke(QUESTION)
    assert len(docs) == 4
    top = docs[0]
    assert top.metadata["title"] and "marie-curie" in top.metadata["source"]
    assert top.id == top.metadata["document_id"]
    assert "Warsaw" in top.page_content
    scores = [d.metadata["score"] for d in docs]
    assert scores == sorted(scores, reverse=True)
    for doc in docs:
        assert doc.metadata["mode"] == "chunk"
        assert doc.metadata["chunk_ids"] and all(c.startswith(f"{doc.id}::") for c in doc.metadata["chunk_ids"])
        assert isinstance(doc.metadata["concepts"], list)


def test_k_per_call_and_async_match_sync(retriever):
    sync = retriever.invoke(QUESTION, k=2)
    assert len(sync) == 2
    assert [d.id for d in retriever.invoke(QUESTION, k=5)][:2] == [d.id for d in sync]
    with pytest.raises(ConfigurationError, match="k must be an integer between 1 and 1000"):
        retriever.invoke(QUESTION, k=0)


async def test_async_returns_the_same_documents(retriever):
    sync = retriever.invoke(QUESTION, k=3)
    async_docs = await retriever.ainvoke(QUESTION, k=3)
    assert [(d.id, d.page_content) for d in async_docs] == [(d.id, d.page_content) for d in sync]


def test_concept_mode_reports_matched_concepts(kg_url):
    retriever = SurrealKGRetriever(db_url=kg_url, mode="concept", k=3)
    docs = retriever.invoke("polonium")
    assert any("polonium" in concept.lower() for concept in docs[0].metadata["concepts"])


def test_constructor_does_not_connect_and_errors_surface_on_use():
    retriever = SurrealKGRetriever(db_url="ws://127.0.0.1:9", mode="chunk")  # nothing listens there
    with pytest.raises(StoreConnectionError, match="127.0.0.1:9"):
        retriever.invoke(QUESTION)


def test_an_unknown_mode_or_option_is_refused_when_built_without_connecting():
    with pytest.raises(ValueError, match="unknown mode 'telepathy'"):
        SurrealKGRetriever(db_url="ws://127.0.0.1:9", mode="telepathy")
    with pytest.raises(ValueError, match="bogus"):
        SurrealKGRetriever(db_url="ws://127.0.0.1:9", retriever_options={"bogus": 1})
    retriever = SurrealKGRetriever(db_url="ws://127.0.0.1:9", mode="chunk")
    with pytest.raises(ValueError, match="candidates"):
        retriever.retriever_options = {"candidates": 0}
    # What a mode's constructor takes itself is an option too: hybrid's question extractor.
    SurrealKGRetriever(db_url="ws://127.0.0.1:9", mode="hybrid", retriever_options={"extractor": "spacy", "candidates": 30})
    with pytest.raises(ValueError, match="extractor"):
        SurrealKGRetriever(db_url="ws://127.0.0.1:9", mode="graph", retriever_options={"extractor": "spacy"})


def test_from_retriever_and_add_documents_on_a_mem_store(minilm, spacy_extractor):
    with SurrealStore("mem://") as store:
        retriever = SurrealKGRetriever.from_retriever(make_retriever("chunk", store, embedder=minilm, k=2))
        assert retriever.k == 2 and retriever.mode == "chunk"
        docs = [
            Document(id="tea", page_content="Green tea is grown in the hills of Shizuoka in Japan.", metadata={"lang": "en"}),
            Document(id="bikes", page_content="A bicycle chain transfers power from the pedals to the wheel."),
            Document(id="rivers", page_content="The Danube flows through Vienna, Budapest and Belgrade."),
        ]
        assert retriever.add_documents(docs, extractor=spacy_extractor) == ["tea", "bikes", "rivers"]
        assert retriever.add_documents(docs, extractor=spacy_extractor) == ["tea", "bikes", "rivers"]  # unchanged: skipped
        assert get_stats(store).documents == 3

        found = retriever.invoke("Which river passes through Budapest?")
        assert found[0].id == "rivers"
        assert len(found) == 2
        tea = retriever.invoke("tea plantations in Japan", k=1)[0]
        assert tea.metadata["lang"] == "en" and tea.metadata["document_id"] == "tea"
        retriever.close()  # does not close a store it was given
        assert retriever.invoke("tea", k=1)[0].id == "tea"


def test_grouped_by_chunk_each_document_is_its_chunk(minilm, spacy_extractor):
    """group_by="chunk" returns a source document once per chunk: the Documents' ids must stay unique."""
    rivers = " ".join(
        f"The {name} flows through {city}, where its bridges carry trams and its banks hold markets and parks."
        for name, city in [("Danube", "Vienna"), ("Danube", "Budapest"), ("Danube", "Belgrade"), ("Vltava", "Prague")] * 6
    )
    with SurrealStore("mem://") as store:
        core = make_retriever("chunk", store, embedder=minilm, group_by="chunk")
        retriever = SurrealKGRetriever.from_retriever(core, k=6)
        retriever.add_documents(
            [Document(id="rivers", page_content=rivers), Document(id="tea", page_content="Green tea grows in Shizuoka.")],
            extractor=spacy_extractor,
        )
        assert get_stats(store).chunks >= 4
        found = retriever.invoke("Which river flows through Budapest?")
        rivers_found = [d for d in found if d.metadata["document_id"] == "rivers"]
        assert len(rivers_found) >= 2
        assert len({d.id for d in found}) == len(found)
        assert all(d.id == d.metadata["chunk_ids"][0] and len(d.metadata["chunk_ids"]) == 1 for d in found)


def test_a_wrapped_retriever_made_configurable_searches_the_same_store(minilm, spacy_extractor):
    """``configurable_fields`` builds a new retriever from the fields on every call: one made by
    ``from_retriever`` must still search the core it wraps, not the default store."""
    from langchain_core.runnables import ConfigurableField

    with SurrealStore("mem://") as store:
        retriever = SurrealKGRetriever.from_retriever(make_retriever("chunk", store, embedder=minilm), k=2)
        retriever.add_documents(
            [Document(id="bees", page_content="Bees make honey in their hives."), Document(id="owls", page_content="Owls hunt mice.")],
            extractor=spacy_extractor,
        )
        configurable = retriever.configurable_fields(k=ConfigurableField(id="k"))
        assert [d.id for d in configurable.invoke("honey")] == ["bees", "owls"]
        assert [d.id for d in configurable.invoke("honey", config={"configurable": {"k": 1}})] == ["bees"]
        with pytest.raises(ValueError, match="from_retriever"):
            SurrealKGRetriever(wrapped_core=retriever.wrapped_core, db_url="mem://")


def test_settings_built_retrievers_made_configurable_share_one_store(kg_url, minilm, spacy_extractor):
    """``configurable_fields`` builds a retriever from the fields on every call. Built from settings,
    each copy must search the default's store (on mem:// a copy's own store would be a new, empty
    database) and no call may leave a store open behind it."""
    import gc
    import time

    from langchain_core.runnables import ConfigurableField

    from surreal_kgrag.db.connection import EmbeddedConnection

    memory = SurrealKGRetriever(db_url="mem://", mode="chunk", embedder=minilm, k=2)
    memory.add_documents(
        [Document(id="bees", page_content="Bees make honey in their hives."), Document(id="owls", page_content="Owls hunt mice.")],
        extractor=spacy_extractor,
    )
    configurable = memory.configurable_fields(k=ConfigurableField(id="k"))
    assert [d.id for d in configurable.invoke("honey", config={"configurable": {"k": 1}})] == ["bees"]
    assert [d.id for d in configurable.invoke("honey")] == ["bees", "owls"]
    memory.close()

    on_file = SurrealKGRetriever(db_url=kg_url, mode="chunk", k=2)
    configurable = on_file.configurable_fields(k=ConfigurableField(id="k"))
    assert len(on_file.invoke(QUESTION)) == 2
    references = EmbeddedConnection._registry[kg_url].refs
    for k in (1, 2, 3, 1, 2):
        assert len(configurable.invoke(QUESTION, config={"configurable": {"k": k}})) == k
    assert EmbeddedConnection._registry[kg_url].refs == references
    copied = on_file.model_copy(update={"k": 3})
    assert len(copied.invoke(QUESTION)) == 3
    assert (on_file.core.config.k, copied.core.config.k) == (2, 3)  # one core, each retriever's own k
    assert len(copied.core.search(QUESTION).documents) == 3
    core = on_file.core
    del on_file, configurable, copied
    gc.collect()
    assert [d.id for d in core.search(QUESTION, k=2).documents]  # a core still held keeps its store open
    assert EmbeddedConnection._registry[kg_url].refs == references

    def held() -> int:
        remaining = EmbeddedConnection._registry.get(kg_url)
        return remaining.refs if remaining else 0

    del core
    gc.collect()  # nothing holds the store now: it is released (in a thread of its own)
    deadline = time.monotonic() + 10
    while held() != references - 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert held() == references - 1


def test_retrievers_sharing_a_core_keep_their_own_scopes(minilm, spacy_extractor):
    """Two retrievers on one store with different access labels share a core (equal core fields):
    each reads and writes only under its own labels."""
    from surreal_kgrag.vectors import VectorWriteError

    hives = SurrealKGRetriever(db_url="mem://", mode="chunk", embedder=minilm, k=5, access=["hives"])
    barns = SurrealKGRetriever(db_url="mem://", mode="chunk", embedder=minilm, k=5, access=["barns"])
    try:
        assert hives._lazy is barns._lazy
        hives.add_documents([Document(id="bees", page_content="Bees make honey in their hives.")], extractor=spacy_extractor)
        barns.add_documents([Document(id="owls", page_content="Owls hunt mice in barns at night.")], extractor=spacy_extractor)
        assert [d.id for d in hives.invoke("honey and owls")] == ["bees"]
        assert [d.id for d in barns.invoke("honey and owls")] == ["owls"]
        with pytest.raises(VectorWriteError, match="bees"):
            barns.add_documents([Document(id="bees", page_content="Bees were replaced by owls.")], extractor=spacy_extractor)
        [bees] = hives.invoke("honey")
        assert bees.page_content == "Bees make honey in their hives."
    finally:
        hives.close()


def test_a_settings_built_retriever_deep_copies_and_pickles(kg_url, minilm):
    import copy
    import pickle

    retriever = SurrealKGRetriever(db_url=kg_url, mode="chunk", k=2)
    try:
        expected = [d.id for d in retriever.invoke(QUESTION)]
        assert [d.id for d in copy.deepcopy(retriever).invoke(QUESTION)] == expected
        restored = pickle.loads(pickle.dumps(retriever))
        assert (restored.db_url, restored.k) == (kg_url, 2)
        assert [d.id for d in restored.invoke(QUESTION)] == expected
    finally:
        retriever.close()
    with SurrealStore(kg_url) as store:
        wrapped = SurrealKGRetriever.from_retriever(make_retriever("chunk", store, embedder=minilm))
        with pytest.raises(TypeError, match="cannot be pickled"):
            pickle.dumps(wrapped)


async def test_aadd_documents(minilm, spacy_extractor):
    async with SurrealStore("mem://") as store:
        retriever = SurrealKGRetriever.from_retriever(make_retriever("chunk", store, embedder=minilm))
        ids = await retriever.aadd_documents(
            [Document(id="a", page_content="Owls hunt at night."), Document(page_content="Bees make honey.")],
            extractor=spacy_extractor,
        )
        assert ids[0] == "a" and ids[1].startswith("langchain:")
        assert (await retriever.ainvoke("honey", k=1))[0].id == ids[1]


def test_tool_returns_numbered_passages_and_documents(kg_url):
    tool = create_kg_search_tool(SurrealKGRetriever(db_url=kg_url, mode="chunk", k=4))
    message = tool.invoke(ToolCall(name=tool.name, args={"query": QUESTION, "k": 2}, id="1", type="tool_call"))
    assert len(message.artifact) == 2
    assert message.content.startswith("[1] ") and "\n\n[2] " in message.content
    assert message.artifact[0].metadata["title"] in message.content
    assert tool.args_schema.model_json_schema()["properties"]["k"]["anyOf"][0]["maximum"] == 20


def test_tool_arguments_are_strict(kg_url):
    """k is a real integer within the schema's bounds (no True, no "3"), unknown arguments are refused,
    as in the core's tool arguments; a good call still works."""
    tool = create_kg_search_tool(SurrealKGRetriever(db_url=kg_url, mode="chunk", k=4))
    for args, error in (
        ({"k": True}, "valid integer"),
        ({"k": "3"}, "valid integer"),
        ({"k": 2.0}, "valid integer"),
        ({"k": 0}, "greater than or equal to 1"),
        ({"k": 21}, "less than or equal to 20"),
        ({"top_k": 3}, "Extra inputs are not permitted"),
    ):
        with pytest.raises(ValidationError, match=error) as raised:
            tool.invoke({"query": QUESTION, **args})
        assert raised.value.error_count() == 1
    message = tool.invoke(ToolCall(name=tool.name, args={"query": f"  {QUESTION}  ", "k": 3}, id="1", type="tool_call"))
    assert len(message.artifact) == 3 and message.status == "success"


async def test_tool_reports_a_refused_query_as_tool_exception(kg_url):
    """A query the core refuses (too long, empty) is a ToolException with the core's message, so an agent
    with handle_tool_error=True hands it to the model instead of failing."""
    tool = create_kg_search_tool(SurrealKGRetriever(db_url=kg_url, mode="chunk", k=2))
    long_query = "curie " * 3334  # 20,004 characters; max_query_chars is 10,000
    for query, refusal in ((long_query, "more than max_query_chars=10,000"), ("   ", "non-empty string")):
        with pytest.raises(ToolException, match=refusal) as raised:
            tool.invoke({"query": query})
        assert isinstance(raised.value.__cause__, ConfigurationError)
        with pytest.raises(ToolException, match=refusal):
            await tool.ainvoke({"query": query, "k": 2})
    tool.handle_tool_error = True
    message = tool.invoke(ToolCall(name=tool.name, args={"query": long_query}, id="1", type="tool_call"))
    assert message.status == "error" and "max_query_chars" in message.content and message.artifact is None
    message = await tool.ainvoke(ToolCall(name=tool.name, args={"query": long_query}, id="2", type="tool_call"))
    assert message.status == "error" and "ask a shorter question" in message.content
    assert len(tool.invoke({"query": QUESTION})) > 0  # still answers a good query


def test_langchain_core_retriever_tool_works_with_it(retriever):
    tool = create_retriever_tool(retriever, "kg", "knowledge graph", response_format="content_and_artifact")
    message = tool.invoke(ToolCall(name="kg", args={"query": QUESTION}, id="1", type="tool_call"))
    assert len(message.artifact) == 4 and "Warsaw" in message.content


# -- conventions ---------------------------------------------------------------------------------


def test_from_retriever_refuses_what_it_cannot_honour(kg_url, minilm):
    with SurrealStore(kg_url) as store:
        core = make_retriever("chunk", store, embedder=minilm, k=3)
        for argument in ({"reranker": object()}, {"db_url": kg_url}, {"embedder": minilm}, {"retriever_options": {"ef": 10}}):
            with pytest.raises(TypeError, match="from_retriever"):
                SurrealKGRetriever.from_retriever(core, **argument)
        narrowed = SurrealKGRetriever.from_retriever(core, k=2, filters={"source": {"$ne": "nowhere"}}, max_chunks_per_document=1)
        docs = narrowed.invoke(QUESTION)
        assert len(docs) == 2 and all(len(d.metadata["chunk_ids"]) == 1 for d in docs)
        nothing = SurrealKGRetriever.from_retriever(core, access=[])  # access narrows the core: [] sees nothing
        assert nothing.invoke(QUESTION) == [] and nothing.core.search(QUESTION).documents == []
        with pytest.raises(ValueError, match="from_retriever"):
            narrowed.mode = "concept"


def test_changing_fields_takes_effect(kg_url):
    retriever = SurrealKGRetriever(db_url=kg_url, mode="chunk", k=2)
    try:
        assert retriever.invoke(QUESTION)[0].metadata["mode"] == "chunk"
        retriever.mode = "concept"  # a core field: a new core
        assert {d.metadata["mode"] for d in retriever.invoke(QUESTION)} == {"concept"}
        retriever.k = 1
        assert len(retriever.invoke(QUESTION)) == 1
        warsaw = str(EXAMPLES / "warsaw.txt")
        retriever.filters = {"source": warsaw}
        assert [d.id for d in retriever.invoke(QUESTION, k=3)] == [warsaw]
        assert [d.id for d in retriever.core.search(QUESTION, k=3).documents] == [warsaw]  # the answer runnables read .core
        retriever.filters = None
        assert len(retriever.invoke(QUESTION, k=3)) == 3
        with pytest.raises(ValueError, match="takes a string"):  # the FilterError, as pydantic reports it
            retriever.filters = {"title": {"$gt": 5}}
        with pytest.raises(ValueError, match="unknown operator"):
            SurrealKGRetriever(db_url=kg_url, filters={"year": {"$near": 1}})
        with pytest.raises(ValueError):
            retriever.k = 0
    finally:
        retriever.close()
