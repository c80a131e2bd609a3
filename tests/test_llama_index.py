"""The LlamaIndex integration on the real embedded SurrealDB with the real spaCy and MiniLM models:
nodes and their relationships, LlamaIndex's conventions (similarity_top_k, MetadataFilters, from_defaults),
query engines, the retriever tool, reranking as a postprocessor."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("llama_index.retrievers.surreal_kgrag", reason="install integrations/llama_index (scripts/setup.sh does)")

from llama_index.core import Document
from llama_index.core.llms import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import NodeRelationship, ObjectType, QueryBundle
from llama_index.core.tools import RetrieverTool
from llama_index.core.vector_stores.types import FilterCondition, FilterOperator, MetadataFilter, MetadataFilters
from llama_index.postprocessor.surreal_kgrag import SurrealKGRerankPostprocessor
from llama_index.retrievers.surreal_kgrag import SurrealKGRetriever, UnsupportedFilterError
from surrealdb import RecordID

from surreal_kgrag import IngestConfig, Ingestor, RetrievedDocument, StoreConnectionError, SurrealStore
from surreal_kgrag.chunking import SentenceChunker
from surreal_kgrag.retrieval import RETRIEVERS, make_retriever
from surreal_kgrag.retrieval.filters import FilterError

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "data"
QUESTION = "Where was Marie Curie born?"
# Eight sentences about one river; cut into chunks of at most 24 tokens, so it has several chunks.
DANUBE = " ".join(
    [
        "The Danube is the second-longest river in Europe.",
        "It rises in the Black Forest in Germany.",
        "The river flows through Vienna, the capital of Austria.",
        "Further east it passes Bratislava and then Budapest in Hungary.",
        "In Serbia the Danube reaches the city of Belgrade.",
        "The Iron Gates gorge forms part of the border between Serbia and Romania.",
        "Its delta on the Black Sea is a large wetland reserve.",
        "Barges carry grain and steel along the river all year.",
    ]
)


@pytest.fixture(scope="module")
def store(minilm, spacy_extractor):
    with SurrealStore("mem://") as store:
        Ingestor(store, embedder=minilm, extractor=spacy_extractor).ingest(EXAMPLES)
        small_chunks = IngestConfig(chunker=SentenceChunker(max_tokens=24, overlap_tokens=0))
        summary = Ingestor(store, embedder=minilm, extractor=spacy_extractor, config=small_chunks).ingest(
            [Document(text=DANUBE, doc_id="danube", metadata={"title": "Danube", "region": "Europe"})]
        )
        assert summary.chunks >= 4
        yield store


@pytest.fixture
def retriever(store, minilm):
    return SurrealKGRetriever.from_retriever(make_retriever("chunk", store, embedder=minilm, k=3))


def test_nodes_have_scores_metadata_and_a_source_document(retriever):
    results = retriever.retrieve(QUESTION)
    documents = list(dict.fromkeys(r.node.ref_doc_id for r in results))
    assert 1 <= len(documents) <= 3 and "marie-curie" in documents[0]
    top = results[0]
    assert top.score is not None and 0 < top.score <= 1
    assert "Warsaw" in top.node.get_content()
    source = top.node.relationships[NodeRelationship.SOURCE]
    assert source.node_type == ObjectType.DOCUMENT and source.node_id == top.node.metadata["document_id"]
    assert top.node.metadata["title"] and top.node.metadata["mode"] == "chunk"
    assert top.node.node_id.startswith(f"{top.node.ref_doc_id}::")
    # the LLM sees the title and source, not the bookkeeping
    llm_text = top.node.get_content(metadata_mode="llm")
    assert "title:" in llm_text and "document_score" not in llm_text


def test_previous_and_next_point_at_existing_neighbours(retriever, store):
    results = [r for r in retriever.retrieve("Which cities does the Danube flow through?") if r.node.ref_doc_id == "danube"]
    assert results
    stored = store.query("get_document", {"ids": [RecordID("document", "danube")]})[-1][0]["chunks"]
    ids = [c["id"].id for c in stored]
    for result in results:
        index = result.node.metadata["chunk_index"]
        assert result.node.node_id == ids[index]
        rels = result.node.relationships
        if index > 0:
            assert rels[NodeRelationship.PREVIOUS].node_id == ids[index - 1]
        else:
            assert NodeRelationship.PREVIOUS not in rels
        if index + 1 < len(ids):
            assert rels[NodeRelationship.NEXT].node_id == ids[index + 1]
        else:
            assert NodeRelationship.NEXT not in rels


@pytest.mark.parametrize("mode", sorted(RETRIEVERS))
def test_chunk_counts_come_with_the_search(store, minilm, mode):
    """NEXT needs each document's chunk count: every mode's search query returns it (no second query)."""
    result = make_retriever(mode, store, embedder=minilm, k=3).search("Which cities does the Danube flow through?")
    stored = store.query("get_document", {"ids": [RecordID("document", "danube")]})[-1][0]["chunks"]
    counts = {doc.id: doc.chunk_count for doc in result.documents}
    assert counts["danube"] == len(stored) and all(isinstance(n, int) and n >= 1 for n in counts.values())


def test_similarity_top_k_is_the_number_of_nodes(store, minilm):
    core = make_retriever("chunk", store, embedder=minilm)
    for top_k in (1, 2, 5, 7):
        nodes = SurrealKGRetriever.from_retriever(core, similarity_top_k=top_k).retrieve("Danube river cities Vienna Budapest")
        assert len(nodes) == top_k
        assert [n.score for n in nodes] == sorted((n.score for n in nodes), reverse=True)
    with pytest.warns(DeprecationWarning, match="similarity_top_k"):
        legacy = SurrealKGRetriever.from_retriever(core, k=2)
    assert legacy.similarity_top_k == 2 and len(legacy.retrieve("Danube")) == 2
    with pytest.raises(TypeError, match="db_url"):
        SurrealKGRetriever.from_retriever(core, db_url="mem://")


def test_metadata_filters(store, minilm):
    core = make_retriever("chunk", store, embedder=minilm)

    def documents(filters, top_k=10):
        nodes = SurrealKGRetriever.from_retriever(core, similarity_top_k=top_k, filters=filters).retrieve("rivers and science in Europe")
        return {n.node.ref_doc_id for n in nodes}

    europe = MetadataFilters(filters=[MetadataFilter(key="region", value="Europe")])
    assert documents(europe) == {"danube"}
    either = MetadataFilters(
        filters=[MetadataFilter(key="region", value="Europe"), MetadataFilter(key="title", value="Danube", operator=FilterOperator.NE)],
        condition=FilterCondition.OR,
    )
    assert documents(either) >= {"danube", str(EXAMPLES / "warsaw.txt")}  # the example files have no title key
    nested = MetadataFilters(
        filters=[
            MetadataFilter(key="region", value=["Asia", "Europe"], operator=FilterOperator.IN),
            MetadataFilters(filters=[MetadataFilter(key="title", value="Danube")], condition=FilterCondition.NOT),
        ]
    )
    assert documents(nested) == set()
    missing = MetadataFilters(filters=[MetadataFilter(key="region", value=None, operator=FilterOperator.IS_EMPTY)])
    assert "danube" not in documents(missing) and len(documents(missing)) >= 5
    with pytest.raises(UnsupportedFilterError, match="TEXT_MATCH_INSENSITIVE"):
        SurrealKGRetriever.from_retriever(
            core, filters=MetadataFilters(filters=[MetadataFilter(key="t", value="x", operator=FilterOperator.TEXT_MATCH_INSENSITIVE)])
        )
    deep = MetadataFilters(filters=[MetadataFilter(key="region", value="Europe")])
    for _ in range(5000):  # deeper than Python's recursion limit: refused by name, not by RecursionError
        deep = MetadataFilters(filters=[deep])
    with pytest.raises(FilterError, match="nested more than"):
        SurrealKGRetriever.from_retriever(core, filters=deep)


def test_from_defaults(store, minilm):
    retriever = SurrealKGRetriever.from_defaults("mem://", mode="concept", similarity_top_k=3, embedder=minilm)
    assert retriever.similarity_top_k == 3 and retriever.mode == "concept"
    assert SurrealKGRetriever.from_defaults().similarity_top_k == 4


def test_query_bundle_embedding_is_used(retriever, minilm):
    embedding = minilm.embed_query("a radioactive element discovered in 1898").tolist()
    results = retriever.retrieve(QueryBundle(query_str=QUESTION, embedding=embedding))
    assert "polonium" in results[0].node.ref_doc_id


async def test_async_retrieve_matches_sync(retriever):
    sync = retriever.retrieve(QUESTION)
    async_results = await retriever.aretrieve(QUESTION)
    assert [(r.node.node_id, r.score) for r in async_results] == [(r.node.node_id, r.score) for r in sync]
    assert all(r.node.relationships[NodeRelationship.SOURCE] for r in async_results)


def test_max_chunks_per_document(store, minilm):
    one = SurrealKGRetriever.from_retriever(make_retriever("chunk", store, embedder=minilm), similarity_top_k=3, max_chunks_per_document=1)
    assert len({r.node.ref_doc_id for r in one.retrieve("Danube river cities Vienna Budapest Belgrade")}) == 3
    two = SurrealKGRetriever.from_retriever(make_retriever("chunk", store, embedder=minilm), similarity_top_k=2, max_chunks_per_document=2)
    results = two.retrieve("Danube river cities Vienna Budapest Belgrade")
    assert len(results) == 2 and {r.node.ref_doc_id for r in results} == {"danube"}
    assert results[0].score >= results[1].score


def test_query_engine_returns_source_nodes(retriever):
    engine = RetrieverQueryEngine.from_args(retriever, llm=MockLLM())
    response = engine.query(QUESTION)
    assert isinstance(response.response, str)
    nodes = response.source_nodes
    assert nodes and all(n.score is not None for n in nodes)
    assert nodes[0].node.ref_doc_id and "Warsaw" in nodes[0].node.get_content()
    assert all(n.node.metadata["document_id"] == n.node.ref_doc_id for n in nodes)


async def test_query_engine_async(retriever):
    engine = RetrieverQueryEngine.from_args(retriever, llm=MockLLM())
    response = await engine.aquery(QUESTION)
    assert "marie-curie" in response.source_nodes[0].node.ref_doc_id


@pytest.mark.parametrize("mode", sorted(RETRIEVERS))
def test_every_core_mode_in_a_query_engine(store, minilm, mode):
    retriever = SurrealKGRetriever.from_retriever(make_retriever(mode, store, embedder=minilm, k=2))
    response = RetrieverQueryEngine.from_args(retriever, llm=MockLLM()).query("Who discovered polonium?")
    nodes = response.source_nodes
    assert 1 <= len({n.node.ref_doc_id for n in nodes}) <= 2
    assert any("polonium" in n.node.ref_doc_id for n in nodes)
    assert all(n.score is not None and n.node.metadata["mode"] == mode for n in nodes)


def test_concept_mode_reports_the_concepts_behind_a_chunk(store, minilm):
    retriever = SurrealKGRetriever.from_retriever(make_retriever("concept", store, embedder=minilm, k=2))
    [first, *_] = retriever.retrieve("polonium")
    assert "polonium" in first.node.ref_doc_id
    assert any("polonium" in c.lower() for c in first.node.metadata["concepts"])


def test_retriever_tool(retriever):
    tool = RetrieverTool.from_defaults(retriever, name="kg_search", description="search the knowledge graph")
    output = tool.call(input=QUESTION)
    assert "Warsaw" in output.content and "title:" in output.content
    assert output.raw_output[0].node.ref_doc_id


class KeywordReranker:
    """A real (if simple) reranker: documents ordered by how many query words their chunks contain."""

    def rerank(self, query, documents, *, k, query_embedding=None):
        words = set(query.lower().split())

        def overlap(doc: RetrievedDocument) -> float:
            return float(sum(word in chunk.content.lower() for chunk in doc.chunks for word in words))

        return [doc.model_copy(update={"score": overlap(doc)}) for doc in sorted(documents, key=lambda d: -overlap(d))][:k]

    async def arerank(self, query, documents, *, k, query_embedding=None):
        return self.rerank(query, documents, k=k, query_embedding=query_embedding)


def test_rerank_postprocessor_reorders_by_document(retriever):
    nodes = retriever.retrieve(QUESTION)
    assert "marie-curie" in nodes[0].node.ref_doc_id
    postprocessor = SurrealKGRerankPostprocessor(reranker=KeywordReranker(), top_n=1)
    reranked = postprocessor.postprocess_nodes(nodes, query_str="piezoelectric crystallography magnetism")
    assert {n.node.ref_doc_id for n in reranked} == {reranked[0].node.ref_doc_id}
    assert "pierre-curie" in reranked[0].node.ref_doc_id
    assert reranked[0].score == 3.0  # the reranker's document score, given to each of its nodes


class SyncOnlyKeywordReranker:
    """A reranker with ``rerank`` alone, which the postprocessor's field and the core accept."""

    def rerank(self, query, documents, *, k, query_embedding=None):
        return KeywordReranker().rerank(query, documents, k=k, query_embedding=query_embedding)


async def test_rerank_postprocessor_async_with_a_reranker_without_arerank(retriever):
    nodes = await retriever.aretrieve(QUESTION)
    postprocessor = SurrealKGRerankPostprocessor(reranker=SyncOnlyKeywordReranker(), top_n=1)
    query = "piezoelectric crystallography magnetism"
    reranked = await postprocessor.apostprocess_nodes(nodes, query_str=query)
    expected = postprocessor.postprocess_nodes(nodes, query_str=query)
    assert [(n.node.node_id, n.score) for n in reranked] == [(n.node.node_id, n.score) for n in expected]
    assert "pierre-curie" in reranked[0].node.ref_doc_id


async def test_rerank_postprocessor_in_a_query_engine(retriever):
    postprocessor = SurrealKGRerankPostprocessor(reranker=KeywordReranker(), top_n=2)
    engine = RetrieverQueryEngine.from_args(retriever, llm=MockLLM(), node_postprocessors=[postprocessor])
    response = await engine.aquery(QUESTION)
    assert 1 <= len({n.node.ref_doc_id for n in response.source_nodes}) <= 2
    scores = [n.score for n in response.source_nodes]
    assert scores == sorted(scores, reverse=True)


def test_add_llama_index_documents(minilm, spacy_extractor):
    with SurrealStore("mem://") as store:
        retriever = SurrealKGRetriever.from_retriever(make_retriever("chunk", store, embedder=minilm, k=1))
        docs = [
            Document(text="Owls hunt small mammals at night.", doc_id="owls", metadata={"title": "Owls"}),
            Document(text="Bees collect nectar and make honey.", doc_id="bees"),
        ]
        assert retriever.add_documents(docs, extractor=spacy_extractor).added == 2
        assert retriever.add_documents(docs, extractor=spacy_extractor).skipped == 2
        [result] = retriever.retrieve("Which animal makes honey?")
        assert result.node.ref_doc_id == "bees"


def test_constructor_does_not_connect():
    retriever = SurrealKGRetriever("ws://127.0.0.1:9", mode="chunk")  # nothing listens there
    with pytest.raises(StoreConnectionError, match="127.0.0.1:9"):
        retriever.retrieve(QUESTION)


def test_an_unknown_mode_or_option_is_refused_when_built_without_connecting():
    with pytest.raises(ValueError, match="unknown mode 'grpah'"):
        SurrealKGRetriever("ws://127.0.0.1:9", mode="grpah")
    with pytest.raises(ValueError, match="bogus"):
        SurrealKGRetriever.from_defaults("ws://127.0.0.1:9", retriever_options={"bogus": 1})


def test_db_url_construction_on_a_file_store(tmp_path, minilm, spacy_extractor):
    url = f"surrealkv://{tmp_path / 'kg'}"
    retriever = SurrealKGRetriever(url, mode="chunk", similarity_top_k=2, embedder=minilm)
    retriever.add_documents([Document(text="Warsaw is the capital of Poland.", doc_id="warsaw")], extractor=spacy_extractor)
    assert retriever.retrieve("capital of Poland")[0].node.ref_doc_id == "warsaw"
    retriever.close()
