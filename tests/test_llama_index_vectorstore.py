"""The LlamaIndex ``SurrealKGVectorStore`` on the real embedded SurrealDB, spaCy and MiniLM: a
``VectorStoreIndex`` over HotpotQA passages answering through a query engine, nodes round-tripping
with their relationships, ``MetadataFilters``, MMR, deletes, and the knowledge graph behind it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("llama_index.vector_stores.surreal_kgrag", reason="install integrations/llama_index_vector_stores (scripts/setup.sh does)")

from llama_index.core import Document, StorageContext, VectorStoreIndex
from llama_index.core.llms import MockLLM
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode
from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
)
from llama_index.retrievers.surreal_kgrag import UnsupportedFilterError
from llama_index.vector_stores.surreal_kgrag import SurrealKGVectorStore

from surreal_kgrag import ConfigurationError, QueryExecutionError, SurrealStore, get_stats, make_retriever

HOTPOTQA = Path("/work/shared/bench/hotpotqa")
PASSAGES = 200


def _hotpot() -> tuple[list[dict], list[dict]]:
    if not (HOTPOTQA / "corpus.jsonl").exists():
        pytest.skip(f"the HotpotQA benchmark files are not at {HOTPOTQA} on this machine")
    with open(HOTPOTQA / "corpus.jsonl", encoding="utf-8") as lines:
        passages = [json.loads(line) for _, line in zip(range(PASSAGES), lines)]
    ids = {p["id"] for p in passages}
    with open(HOTPOTQA / "queries.jsonl", encoding="utf-8") as lines:
        queries = [q for q in map(json.loads, lines) if set(q["gold_ids"]) <= ids]
    return passages, queries


@pytest.fixture(scope="module")
def hotpot(minilm, spacy_extractor):
    passages, queries = _hotpot()
    with SurrealStore("mem://") as store:
        vector_store = SurrealKGVectorStore(store=store, embedder=minilm, extractor=spacy_extractor)
        nodes = [
            TextNode(
                id_=p["id"],
                text=p["text"],
                metadata={"title": p["title"], "position": i, "shard": "even" if i % 2 == 0 else "odd"},
                relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=f"article:{p['title']}")},
            )
            for i, p in enumerate(passages)
        ]
        assert vector_store.add(nodes) == [p["id"] for p in passages]
        yield vector_store, passages, queries


def test_query_engine_over_hotpotqa_returns_source_nodes(hotpot):
    vector_store, passages, queries = hotpot
    assert len(queries) >= 5
    index = VectorStoreIndex.from_vector_store(vector_store, embed_model=vector_store.embed_model)
    engine = index.as_query_engine(llm=MockLLM(), similarity_top_k=5)
    found = 0
    for query in queries[:10]:
        response = engine.query(query["question"])
        nodes = response.source_nodes
        assert len(nodes) == 5, (query["question"], [t.id for t in vector_store.texts.search(query["question"], k=5)])
        assert all(n.score is not None for n in nodes)
        assert [n.score for n in nodes] == sorted((n.score for n in nodes), reverse=True)
        found += bool({n.node.node_id for n in nodes} & set(query["gold_ids"]))
    assert found >= 7  # MiniLM finds a gold passage in the top 5 for most HotpotQA questions
    by_id = {p["id"]: p for p in passages}
    node = nodes[0].node
    assert node.get_content() == by_id[node.node_id]["text"]  # the exact text, not chunks
    assert node.metadata["title"] == by_id[node.node_id]["title"]
    assert node.ref_doc_id == f"article:{by_id[node.node_id]['title']}"


async def test_async_query_and_retriever(hotpot):
    vector_store, _, queries = hotpot
    index = VectorStoreIndex.from_vector_store(vector_store, embed_model=vector_store.embed_model)
    nodes = await index.as_retriever(similarity_top_k=3).aretrieve(queries[0]["question"])
    sync = index.as_retriever(similarity_top_k=3).retrieve(queries[0]["question"])
    assert [n.node.node_id for n in nodes] == [n.node.node_id for n in sync] and len(nodes) == 3


def test_metadata_filters(hotpot):
    vector_store, passages, queries = hotpot
    embedding = vector_store.embed_model.get_query_embedding(queries[0]["question"])

    def ids(filters, k=10):
        result = vector_store.query(VectorStoreQuery(query_embedding=embedding, similarity_top_k=k, filters=filters))
        assert len(result.ids) == len(result.nodes) == len(result.similarities)
        return result.ids

    even = ids(MetadataFilters(filters=[MetadataFilter(key="shard", value="even")]))
    assert len(even) == 10 and all(int(i.split("-")[1]) % 2 == 0 for i in even)
    low = ids(MetadataFilters(filters=[MetadataFilter(key="position", value=10, operator=FilterOperator.LT)]), k=20)
    assert sorted(low) == sorted(p["id"] for p in passages[:10])
    titles = [passages[3]["title"], passages[150]["title"]]
    either = MetadataFilters(
        filters=[
            MetadataFilter(key="title", value=titles, operator=FilterOperator.IN),
            MetadataFilters(
                filters=[MetadataFilter(key="position", value=100, operator=FilterOperator.GTE), MetadataFilter(key="position", value=102, operator=FilterOperator.LTE)],
                condition=FilterCondition.AND,
            ),
        ],
        condition=FilterCondition.OR,
    )
    assert set(ids(either)) >= {passages[i]["id"] for i in (100, 101, 102)}
    assert {i for i in ids(either)} <= {p["id"] for p in passages if p["title"] in titles} | {passages[i]["id"] for i in (100, 101, 102)}
    with pytest.raises(UnsupportedFilterError):
        ids(MetadataFilters(filters=[MetadataFilter(key="title", value="Rush", operator=FilterOperator.TEXT_MATCH_INSENSITIVE)]))
    index = VectorStoreIndex.from_vector_store(vector_store, embed_model=vector_store.embed_model)
    odd = index.as_retriever(similarity_top_k=4, filters=MetadataFilters(filters=[MetadataFilter(key="shard", value="odd")]))
    assert all(n.node.metadata["shard"] == "odd" for n in odd.retrieve(queries[0]["question"]))


def test_mmr_and_node_ids(hotpot):
    vector_store, passages, queries = hotpot
    embedding = vector_store.embed_model.get_query_embedding(queries[1]["question"])
    plain = vector_store.query(VectorStoreQuery(query_embedding=embedding, similarity_top_k=4))
    relevance_only = vector_store.query(
        VectorStoreQuery(query_embedding=embedding, similarity_top_k=4, mode=VectorStoreQueryMode.MMR, mmr_threshold=1.0)
    )
    assert relevance_only.ids == plain.ids
    diverse = vector_store.query(
        VectorStoreQuery(query_embedding=embedding, similarity_top_k=4, mode=VectorStoreQueryMode.MMR, mmr_threshold=0.1)
    )
    assert len(diverse.ids) == 4 and diverse.ids[0] == plain.ids[0]
    only = [passages[7]["id"], passages[8]["id"]]
    limited = vector_store.query(VectorStoreQuery(query_embedding=embedding, similarity_top_k=5, node_ids=only))
    assert sorted(limited.ids) == sorted(only)
    with pytest.raises(ValueError, match="DEFAULT and MMR"):
        vector_store.query(VectorStoreQuery(query_embedding=embedding, mode=VectorStoreQueryMode.SPARSE))


def test_mmr_settings_sent_as_the_retrievers_keywords_are_used(hotpot):
    """``as_retriever(vector_store_query_mode="mmr", vector_store_kwargs={...})`` sends ``mmr_threshold``
    and ``mmr_prefetch_factor`` as keywords of ``query``, not on the ``VectorStoreQuery``."""
    vector_store, _, queries = hotpot
    question = queries[1]["question"]
    index = VectorStoreIndex.from_vector_store(vector_store, embed_model=vector_store.embed_model)
    embedding = vector_store.embed_model.get_query_embedding(question)

    def mmr(**kwargs):
        retriever = index.as_retriever(similarity_top_k=4, vector_store_query_mode="mmr", vector_store_kwargs=kwargs)
        return [hit.node.node_id for hit in retriever.retrieve(question)]

    plain = vector_store.query(VectorStoreQuery(query_embedding=embedding, similarity_top_k=4)).ids
    diverse = vector_store.query(
        VectorStoreQuery(query_embedding=embedding, similarity_top_k=4, mode=VectorStoreQueryMode.MMR, mmr_threshold=0.1)
    ).ids
    assert set(diverse) != set(plain)
    assert mmr(mmr_threshold=1.0) == plain
    assert mmr(mmr_threshold=0.1) == diverse
    assert sorted(mmr(mmr_threshold=0.1, mmr_prefetch_factor=1)) == sorted(plain)
    with pytest.raises(ValueError, match="not both"):
        mmr(mmr_prefetch_k=8, mmr_prefetch_factor=2)


def test_the_graph_modes_work_on_the_same_nodes(hotpot):
    vector_store, _, queries = hotpot
    stats = get_stats(vector_store.client)
    assert stats.documents == PASSAGES and stats.concepts > PASSAGES and stats.mentions > stats.chunks
    for mode in ("concept", "graph"):
        result = make_retriever(mode, vector_store.client, embedder=vector_store.texts.embedder).search(queries[0]["question"], k=5)
        assert len(result.documents) == 5


def test_index_inserts_deletes_and_clears(minilm, spacy_extractor):
    with SurrealStore("mem://") as store:
        vector_store = SurrealKGVectorStore(store=store, embedder=minilm, extractor=spacy_extractor, access=["team"])
        context = StorageContext.from_defaults(vector_store=vector_store)
        documents = [
            Document(text="Owls hunt small mammals at night. They fly silently.", doc_id="owls", metadata={"kind": "bird"}),
            Document(text="Bees collect nectar and make honey in hives.", doc_id="bees", metadata={"kind": "insect"}),
            Document(text="Ants build colonies and farm aphids.", doc_id="ants", metadata={"kind": "insect"}),
        ]
        index = VectorStoreIndex.from_documents(documents, storage_context=context, embed_model=vector_store.embed_model)
        retriever = index.as_retriever(similarity_top_k=1)
        [hit] = retriever.retrieve("Which animal makes honey?")
        assert hit.node.ref_doc_id == "bees" and hit.node.metadata == {"kind": "insect"}
        nodes = vector_store.get_nodes([hit.node.node_id])
        assert nodes[0].get_content() == "Bees collect nectar and make honey in hives."
        assert vector_store.get_nodes([hit.node.node_id], filters=MetadataFilters(filters=[MetadataFilter(key="kind", value="bird")])) == []
        # Written under the store's labels: a reader without them sees nothing.
        outsider = SurrealKGVectorStore(store=store, embedder=minilm, access=["other"])
        assert outsider.get_nodes([hit.node.node_id]) == [] and outsider.query(VectorStoreQuery(query_str="honey", similarity_top_k=3)).ids == []
        outsider.clear()  # deletes nothing it cannot read
        vector_store.delete("bees")
        assert {n.node.ref_doc_id for n in index.as_retriever(similarity_top_k=5).retrieve("honey")} == {"owls", "ants"}
        vector_store.delete_nodes(filters=MetadataFilters(filters=[MetadataFilter(key="kind", value="insect")]))
        assert {n.node.ref_doc_id for n in index.as_retriever(similarity_top_k=5).retrieve("honey")} == {"owls"}
        vector_store.clear()
        assert index.as_retriever(similarity_top_k=5).retrieve("honey") == []


async def test_get_nodes_by_filters_alone(minilm, spacy_extractor):
    """``get_nodes(filters=...)`` without ids returns every node matching (LlamaIndex's contract); with
    neither it is refused rather than reading the whole store."""
    kinds = {"owls": "bird", "bees": "insect", "ants": "insect"}
    with SurrealStore("mem://") as store:
        vector_store = SurrealKGVectorStore(store=store, embedder=minilm, extractor=spacy_extractor)
        vector_store.add([TextNode(id_=name, text=f"Notes on {name} and where they live.", metadata={"kind": kind}) for name, kind in kinds.items()])
        insects = MetadataFilters(filters=[MetadataFilter(key="kind", value="insect")])
        assert sorted(n.node_id for n in vector_store.get_nodes(filters=insects)) == ["ants", "bees"]
        assert sorted(n.node_id for n in await vector_store.aget_nodes(filters=insects)) == ["ants", "bees"]
        assert vector_store.get_nodes(["owls", "bees"], filters=insects)[0].get_content() == "Notes on bees and where they live."
        outsider = SurrealKGVectorStore(store=store, embedder=minilm, access=["other"])
        assert outsider.get_nodes(filters=insects) == []
        with pytest.raises(ConfigurationError, match="ids or filters"):
            vector_store.get_nodes()


_FILTER_METADATA = {
    "n1": {"author": "Alice", "year": 2005, "tags": ["a", "b"], "note": "x", "title": "Rush Hour"},
    "n2": {"author": "Bob", "year": 2005.0, "tags": [], "note": "", "title": "rush"},
    "n3": {"author": "Alice", "year": 1999, "tags": ["b"], "note": None, "title": "The Rush"},
    "n4": {"author": "Carol", "year": 2010, "tags": ["b", "c"]},
    "n5": {"author": None, "note": "y", "title": "Calm"},
    "n6": {"author": "alice", "year": 2020, "tags": ["a"]},
}


def _one(key, value, operator):
    return MetadataFilters(filters=[MetadataFilter(key=key, value=value, operator=operator)])


def _two(condition):
    return MetadataFilters(
        filters=[MetadataFilter(key="author", value="Alice"), MetadataFilter(key="year", value=2000, operator=FilterOperator.GT)], condition=condition
    )


_O = FilterOperator
_FILTER_CASES = [
    # a missing key or null (n5's author, n3's note) matches only NE, NIN and IS_EMPTY
    _one("author", "Alice", _O.EQ),
    _one("year", 2005, _O.EQ),  # 2005 and 2005.0
    _one("year", 2005.0, _O.EQ),
    _one("tags", [], _O.EQ),
    _one("author", "Alice", _O.NE),
    _one("year", 2005, _O.NE),
    _one("tags", [], _O.NE),
    _one("note", "", _O.NE),
    _one("year", 2000, _O.GT),
    _one("year", 2005, _O.GTE),
    _one("year", 2005, _O.LT),
    _one("year", 2005.0, _O.LTE),
    _one("author", "B", _O.GT),  # strings as text: "alice" > "B"
    _one("title", "Rush", _O.LTE),
    _one("author", ["Alice", "Carol"], _O.IN),
    _one("year", [1999, 2010], _O.IN),
    _one("author", [], _O.IN),
    _one("author", ["Alice", "Carol"], _O.NIN),
    _one("year", [2005], _O.NIN),
    _one("author", [], _O.NIN),
    _one("tags", "b", _O.CONTAINS),  # a list element
    _one("title", "Rush", _O.CONTAINS),  # a substring
    _one("author", "li", _O.CONTAINS),
    _one("title", "Rush", _O.TEXT_MATCH),
    _one("title", "ush", _O.TEXT_MATCH),
    _one("tags", ["a", "c"], _O.ANY),
    _one("title", ["Rush", "rush"], _O.ANY),
    _one("tags", [], _O.ANY),
    _one("tags", ["b", "c"], _O.ALL),
    _one("title", ["R", "H"], _O.ALL),
    _one("author", [], _O.ALL),  # every node with a value
    _one("tags", None, _O.IS_EMPTY),
    _one("note", None, _O.IS_EMPTY),
    _one("author", None, _O.IS_EMPTY),
    _two(FilterCondition.AND),
    _two(FilterCondition.OR),
    _two(FilterCondition.NOT),
    MetadataFilters(filters=[MetadataFilter(key="author", value="Alice", operator=_O.EQ)], condition=FilterCondition.NOT),
    MetadataFilters(filters=[MetadataFilter(key="year", value=2000, operator=_O.GT)], condition=FilterCondition.NOT),
    MetadataFilters(filters=[MetadataFilter(key="author", value=["Alice"], operator=_O.NIN)], condition=FilterCondition.NOT),
    MetadataFilters(
        filters=[MetadataFilter(key="tags", value="c", operator=_O.CONTAINS), _two(FilterCondition.NOT), _one("note", None, _O.IS_EMPTY)],
        condition=FilterCondition.OR,
    ),
    MetadataFilters(filters=[_one("title", "Rush", _O.CONTAINS), _two(FilterCondition.OR)], condition=FilterCondition.NOT),
]


def _reference(filters, node_id):
    """llama_index.core's own filter function on _FILTER_METADATA; it refuses nested MetadataFilters,
    so a nested group is its own call, combined as build_metadata_filter_fn combines a group."""
    from llama_index.core.vector_stores.utils import build_metadata_filter_fn

    if not any(isinstance(item, MetadataFilters) for item in filters.filters):
        return build_metadata_filter_fn(_FILTER_METADATA.__getitem__, filters)(node_id)
    results = [_reference(item if isinstance(item, MetadataFilters) else MetadataFilters(filters=[item]), node_id) for item in filters.filters]
    condition = filters.condition or FilterCondition.AND
    return all(results) if condition == FilterCondition.AND else any(results) if condition == FilterCondition.OR else not any(results)


@pytest.fixture(scope="module")
def filter_nodes(minilm, spacy_extractor):
    with SurrealStore("mem://") as store:
        vector_store = SurrealKGVectorStore(store=store, embedder=minilm, extractor=spacy_extractor)
        nodes = [TextNode(id_=key, text=f"Note {key} on river towns and their bridges.", metadata=meta) for key, meta in _FILTER_METADATA.items()]
        vector_store.add(nodes)
        yield vector_store, vector_store.embed_model.get_query_embedding("river towns")


@pytest.mark.parametrize("filters", _FILTER_CASES, ids=lambda f: f"{f.condition.name}:" + ",".join(getattr(i, "operator", "group").__str__() for i in f.filters))
def test_every_filter_operator_matches_llama_index_s_own_filter_function(filter_nodes, filters):
    """Each operator and condition finds the nodes llama_index.core's reference
    (build_metadata_filter_fn, SimpleVectorStore's) finds on the same metadata: missing keys and
    nulls, ints against floats, list elements and substrings, empty lists, NOT over several filters."""
    vector_store, embedding = filter_nodes
    expected = [key for key in _FILTER_METADATA if _reference(filters, key)]
    found = vector_store.query(VectorStoreQuery(query_embedding=embedding, similarity_top_k=10, filters=filters)).ids
    assert sorted(found) == expected
    assert sorted(node.node_id for node in vector_store.get_nodes(None, filters=filters)) == expected


@pytest.mark.parametrize(
    ("key", "value", "operator", "instead"),
    [
        ("author", None, _O.EQ, "use IS_EMPTY"),  # LlamaIndex: never matches
        ("author", None, _O.NE, "IS_EMPTY inside MetadataFilters"),  # LlamaIndex: always matches
        ("tags", ["a", "b"], _O.NE, "use NIN"),  # LlamaIndex: the whole value is not this list
        ("tags", ["a", "b"], _O.EQ, "use IN"),
        ("year", [2000], _O.GT, "not a list"),
        ("tags", ["a"], _O.CONTAINS, "use ANY or ALL"),
        ("author", "Alice", _O.IN, "use EQ"),  # LlamaIndex: a substring of "Alice"
        ("author", "Alice", _O.NIN, "use NE"),
        ("tags", "ab", _O.ANY, "use CONTAINS"),  # LlamaIndex: the characters "a" and "b"
        ("tags", "ab", _O.ALL, "use CONTAINS"),
        ("year", None, _O.GT, "not None"),
        ("title", "rush", _O.TEXT_MATCH_INSENSITIVE, "use TEXT_MATCH or CONTAINS"),
    ],
)
def test_filters_llama_index_reads_otherwise_or_the_store_cannot_express_are_refused(filter_nodes, key, value, operator, instead):
    vector_store, embedding = filter_nodes
    query = VectorStoreQuery(query_embedding=embedding, similarity_top_k=10, filters=_one(key, value, operator))
    with pytest.raises(UnsupportedFilterError, match=rf"the {operator.name} filter on '{key}' .*{instead}") as refused:
        vector_store.query(query)
    assert isinstance(refused.value, ValueError)


def test_nodes_the_vector_store_wrote_read_back_clean_through_the_kg_retriever(minilm, spacy_extractor):
    """The knowledge-graph retrievers read the same documents: a chunk of a node the vector store
    wrote carries the node's own metadata, not LlamaIndex's serialised copy of the node, keeps what
    the node kept out of the LLM's text out of it, and has the node's source document as its own."""
    from llama_index.core.schema import MetadataMode
    from llama_index.retrievers.surreal_kgrag import SurrealKGRetriever

    facts = {
        "owls": "Owls hunt small mammals at night. Their soft feathers let them fly silently over fields.",
        "bees": "Bees collect nectar from flowers and make honey in their hives through the summer.",
        "ants": "Ants build large colonies underground and farm aphids for their sweet honeydew.",
    }
    with SurrealStore("mem://") as store:
        vector_store = SurrealKGVectorStore(store=store, embedder=minilm, extractor=spacy_extractor)
        nodes = [
            TextNode(
                id_=f"{name}-node",
                text=text,
                metadata={"kind": name, "reviewer": "Ines Ortega"},
                excluded_llm_metadata_keys=["reviewer"],
                relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=f"field-guide:{name}")},
            )
            for name, text in facts.items()
        ]
        vector_store.add(nodes)
        for mode in ("chunk", "hybrid"):
            core = make_retriever(mode, store, embedder=minilm)
            hits = SurrealKGRetriever.from_retriever(core, similarity_top_k=3).retrieve("Which insect makes honey?")
            assert len(hits) == 3 and hits[0].node.metadata["kind"] == "bees", mode
            for hit in hits:
                node, kind = hit.node, hit.node.metadata["kind"]
                assert not {"_node_content", "_node_type"} & set(node.metadata), (mode, node.metadata)
                assert node.ref_doc_id == f"field-guide:{kind}" and node.metadata["document_id"] == f"{kind}-node"
                llm_text = node.get_content(metadata_mode=MetadataMode.LLM)
                assert f"kind: {kind}" in llm_text and facts[kind] in llm_text
                assert "Ines Ortega" not in llm_text and "ref_doc_id" not in llm_text and "_node" not in llm_text, llm_text


def test_nodes_the_vector_store_wrote_show_no_serialised_node_through_langchain_or_the_agent_tools(minilm, spacy_extractor):
    """LlamaIndex's bookkeeping (``_node_content``: the whole node serialised again, ``_node_type``)
    is the core's to hide: no retrieved document's metadata carries it, so neither a LangChain
    ``Document`` nor an agent tool's answer puts it in a prompt."""
    from langchain_surreal_kgrag import SurrealKGRetriever as LangChainRetriever
    from langchain_surreal_kgrag import SurrealKGVectorStore as LangChainVectorStore
    from surreal_kgrag.tools import ToolDispatcher

    reserved = {"_node_content", "_node_type"}
    with SurrealStore("mem://") as store:
        vector_store = SurrealKGVectorStore(store=store, embedder=minilm, extractor=spacy_extractor)
        vector_store.add(
            [
                TextNode(id_="bees-node", text="Bees make honey in their hives through the summer.", metadata={"kind": "bees"}),
                TextNode(id_="owls-node", text="Owls hunt small mammals at night over the fields.", metadata={"kind": "owls"}),
            ]
        )
        core = make_retriever("hybrid", store, embedder=minilm)
        documents = LangChainRetriever.from_retriever(core, k=2).invoke("Which insect makes honey?")
        assert documents[0].id == "bees-node" and len(documents) == 2
        assert all(not reserved & set(doc.metadata) and doc.metadata["kind"] for doc in documents), documents
        tools = ToolDispatcher(store, embedder=minilm)
        for name, arguments in (("search_chunks", {"query": "honey"}), ("get_document", {"document_id": "bees-node"})):
            answer = tools.call(name, arguments)
            assert '"kind"' in answer and "_node" not in answer, (name, answer)
        assert vector_store.get_nodes(["bees-node"])[0].metadata == {"kind": "bees"}
        langchain_store = LangChainVectorStore(minilm, store=store)
        read = [*langchain_store.get_by_ids(["bees-node"]), *langchain_store.similarity_search("honey", k=2)]
        assert len(read) == 3 and all(not reserved & set(doc.metadata) and doc.metadata["kind"] for doc in read), read


async def test_the_embed_models_async_batches_leave_the_event_loop_running(minilm):
    """``aget_text_embedding_batch`` (what ``VectorStoreIndex(use_async=True)`` and ``ainsert`` call) is
    the core embedder's ``aembed_documents``: MiniLM runs in a worker thread, not on the event loop."""
    import asyncio
    import time

    with SurrealStore("mem://") as store:
        embed_model = SurrealKGVectorStore(store=store, embedder=minilm).embed_model
    texts = [f"Passage {i} about rivers, bridges and the towns along them, item {i}." for i in range(400)]
    ticks: list[float] = []

    async def ticker() -> None:
        while True:
            ticks.append(time.perf_counter())
            await asyncio.sleep(0.01)

    running = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    started = time.perf_counter()
    vectors = await embed_model.aget_text_embedding_batch(texts)
    finished = time.perf_counter()
    running.cancel()
    assert len(vectors) == len(texts) and vectors[3] == pytest.approx(embed_model.get_text_embedding(texts[3]), abs=1e-5)
    longest_stall = max(b - a for a, b in zip([started, *ticks], [*ticks, finished]) if b >= started and a <= finished)
    assert longest_stall < (finished - started) / 2, (longest_stall, finished - started)


def test_a_node_embedded_by_another_model_is_refused_before_anything_is_written(minilm, spacy_extractor):
    """A node whose embedding has another dimension than the store's model was embedded by another
    model: the index's queries would not match the store's vectors, so the insert fails, naming it."""
    with SurrealStore("mem://") as store:
        vector_store = SurrealKGVectorStore(store=store, embedder=minilm, extractor=spacy_extractor)
        ours = TextNode(id_="ours", text="Glaciers carve valleys.", embedding=minilm.embed_query("Glaciers carve valleys."))
        other = TextNode(id_="other", text="Rivers cut canyons.", embedding=[0.1] * 1536)
        with pytest.raises(ValueError, match=r"'other' has an embedding of 1536 numbers.*384.*embed_model=vector_store.embed_model"):
            vector_store.add([ours, other])
        assert vector_store.get_nodes(["ours", "other"]) == []
        assert vector_store.add([ours]) == ["ours"]
        assert vector_store.get_nodes(["ours"])[0].get_content() == "Glaciers carve valleys."


async def test_aclose_closes_a_store_it_opened_and_leaves_a_given_one_open(minilm):
    opened = SurrealKGVectorStore(db_url="mem://", embedder=minilm)
    opened.client.query_text("test: a row", "CREATE marker:one;")
    await opened.aclose()
    with pytest.raises(QueryExecutionError, match="does not exist"):  # a new in-memory engine: the old one was closed
        opened.client.query_text("test: the row", "SELECT * FROM marker;")
    with SurrealStore("mem://") as store:
        store.query_text("test: a row", "CREATE marker:one;")
        await SurrealKGVectorStore(store=store, embedder=minilm).aclose()
        assert len(store.query_text("test: the row", "SELECT * FROM marker;")[-1]) == 1  # the caller's, still open
