"""``SurrealKGVectorStore`` on the real embedded SurrealDB and spaCy: LangChain's standard
``VectorStoreIntegrationTests`` unmodified (with its ``DeterministicFakeEmbedding``), then what the
suite does not cover (filters, MMR against the query, scores, scope, the graph behind it) with MiniLM."""

from __future__ import annotations

import asyncio
import math

import pytest

pytest.importorskip("langchain_surreal_kgrag", reason="install integrations/langchain (scripts/setup.sh does)")

from langchain_core.documents import Document
from langchain_tests.integration_tests import VectorStoreIntegrationTests

from langchain_surreal_kgrag import SurrealKGVectorStore
from surreal_kgrag import SurrealStore, get_stats, make_retriever
from surreal_kgrag.retrieval.filters import FilterError
from surreal_kgrag.vectors import VectorWriteError


class TestStandardSuite(VectorStoreIntegrationTests):
    @pytest.fixture
    def vectorstore(self, spacy_extractor):
        store = SurrealKGVectorStore(self.get_embeddings(), db_url="mem://", extractor=spacy_extractor)
        try:
            yield store
        finally:
            store.close()


PASSAGES = [
    ("curie", "Marie Curie was born in Warsaw and discovered polonium and radium with Pierre Curie.", {"field": "physics", "year": 1898, "tags": ["radioactivity", "chemistry"]}),
    ("curie-nobel", "Marie Curie won the Nobel Prize in Physics in 1903 and in Chemistry in 1911.", {"field": "physics", "year": 1911, "tags": ["prize"]}),
    ("curie-dup", "Marie Curie, born in Warsaw, discovered radium and polonium together with Pierre Curie.", {"field": "physics", "year": 1898, "tags": ["radioactivity"]}),
    ("vistula", "The Vistula is the longest river in Poland and flows through Warsaw and Krakow.", {"field": "geography", "year": 2001, "tags": []}),
    ("danube", "The Danube flows through Vienna, Budapest and Belgrade into the Black Sea.", {"field": "geography", "year": 1999, "tags": ["rivers"], "note": None}),
    ("bach", "Johann Sebastian Bach composed the Brandenburg Concertos in Leipzig.", {"field": "music", "year": 1721, "tags": ["baroque"], "nested": {"a": [1, 2.5, "x"]}}),
]


@pytest.fixture
def kg(minilm, spacy_extractor):
    store = SurrealKGVectorStore(minilm, db_url="mem://", extractor=spacy_extractor)
    ids = store.add_texts([p[1] for p in PASSAGES], [p[2] for p in PASSAGES], ids=[p[0] for p in PASSAGES])
    assert ids == [p[0] for p in PASSAGES]
    yield store
    store.close()


def test_round_trip_is_exact_and_the_graph_is_built(kg):
    documents = kg.get_by_ids(["bach", "danube", "missing"])
    assert [d.id for d in documents] == ["bach", "danube"]
    assert documents[0].page_content == PASSAGES[5][1]
    assert documents[0].metadata == PASSAGES[5][2]  # nested lists, floats, strings
    assert documents[1].metadata == PASSAGES[4][2]  # a None value survives
    stats = get_stats(kg.store)
    assert stats.documents == 6 and stats.chunks >= 6 and stats.concepts > 0 and stats.mentions > 0
    # The knowledge-graph retrievers read the same documents.
    graph = make_retriever("concept", kg.store, embedder=kg.texts.embedder).search("Who discovered polonium?", k=2)
    assert graph.documents[0].id in {"curie", "curie-dup"}


def test_scores_filters_and_relevance(kg):
    scored = kg.similarity_search_with_score("Which river flows through Warsaw?", k=3)
    assert scored[0][0].id == "vistula"
    assert all(-1.0 <= s <= 1.0 for _, s in scored) and [s for _, s in scored] == sorted((s for _, s in scored), reverse=True)
    relevance = kg.similarity_search_with_relevance_scores("Which river flows through Warsaw?", k=3)
    assert [d.id for d, _ in relevance] == [d.id for d, _ in scored]
    assert all(math.isclose(r, (s + 1) / 2, rel_tol=1e-6) for (_, r), (_, s) in zip(relevance, scored))
    # "id" is a metadata key here, not the document key; bare keys are metadata.
    assert {d.id for d in kg.similarity_search("Warsaw", k=6, filter={"field": "geography"})} == {"vistula", "danube"}
    assert [d.id for d in kg.similarity_search("Warsaw", k=6, filter={"year": {"$gte": 1900}, "field": "physics"})] == ["curie-nobel"]
    tagged = kg.similarity_search("Warsaw", k=6, filter={"$or": [{"tags": {"$contains": "baroque"}}, {"year": {"$lt": 1800}}]})
    assert [d.id for d in tagged] == ["bach"]
    # langchain-surrealdb's spelling: custom_filter (equality on metadata) and score_threshold.
    assert {d.id for d in kg.similarity_search("Warsaw", k=6, custom_filter={"field": "geography"})} == {"vistula", "danube"}
    high = kg.similarity_search_with_score("Which river flows through Warsaw?", k=6, score_threshold=scored[1][1])
    assert [d.id for d, _ in high] == [d.id for d, _ in scored[:2]]
    with pytest.raises(FilterError):
        kg.similarity_search("Warsaw", filter={"year": {"$near": 3}})
    with pytest.raises(TypeError, match="unexpected keyword"):
        kg.similarity_search("Warsaw", fliter={"field": "music"})


def test_search_by_vector(kg, minilm):
    vector = minilm.embed_query("composer of the Brandenburg Concertos").tolist()
    assert kg.similarity_search_by_vector(vector, k=1)[0].id == "bach"
    assert kg.similarity_search_by_vector(vector, k=2, filter={"field": "geography"})[0].metadata["field"] == "geography"


def test_mmr_measures_relevance_against_the_query(kg):
    plain = [d.id for d in kg.similarity_search("Marie Curie discovered radium in Warsaw", k=3)]
    assert set(plain[:2]) == {"curie", "curie-dup"}  # two near-duplicates lead a plain search
    diverse = [d.id for d in kg.max_marginal_relevance_search("Marie Curie discovered radium in Warsaw", k=3, fetch_k=6, lambda_mult=0.3)]
    assert len(diverse) == 3 and len({"curie", "curie-dup"} & set(diverse[:2])) == 1
    # lambda 1: relevance to the query alone, the plain ranking.
    assert [d.id for d in kg.max_marginal_relevance_search("Marie Curie discovered radium in Warsaw", k=3, fetch_k=6, lambda_mult=1.0)] == plain
    retriever = kg.as_retriever(search_type="mmr", search_kwargs={"k": 2, "fetch_k": 6, "lambda_mult": 0.3})
    assert len(retriever.invoke("Marie Curie discovered radium")) == 2


def test_async_paths(kg):
    async def run():
        found = await kg.asimilarity_search("river through Vienna", k=1)
        ids = await kg.aadd_texts(["Mozart was born in Salzburg."], [{"field": "music"}])
        got = await kg.aget_by_ids(ids)
        mmr = await kg.amax_marginal_relevance_search("Salzburg composer", k=2, fetch_k=5)
        await kg.adelete(ids)
        return found, ids, got, mmr, await kg.aget_by_ids(ids)

    found, ids, got, mmr, after = asyncio.run(run())
    assert found[0].id == "danube"
    assert got == [Document(id=ids[0], page_content="Mozart was born in Salzburg.", metadata={"field": "music"})]
    assert mmr[0].id == ids[0]
    assert after == []


def test_scope_reads_writes_and_deletes(minilm, spacy_extractor):
    with SurrealStore("mem://") as store:
        public = SurrealKGVectorStore(minilm, store=store, access=["public"], extractor=spacy_extractor)
        staff = SurrealKGVectorStore(minilm, store=store, access=["staff"], extractor=spacy_extractor)
        everyone = SurrealKGVectorStore(minilm, store=store, extractor=spacy_extractor)
        public.add_texts(["The museum opens at nine."], ids=["hours"])
        staff.add_texts(["The museum safe code is 4711."], ids=["safe"])
        assert [d.id for d in public.similarity_search("museum", k=5)] == ["hours"]
        assert public.get_by_ids(["safe"]) == []
        public.delete(["safe"])  # outside its scope: nothing happens
        assert [d.id for d in staff.get_by_ids(["safe"])] == ["safe"]
        assert {d.id for d in everyone.similarity_search("museum", k=5)} == {"hours", "safe"}
        assert {d.id for d in everyone.similarity_search("museum", k=5, filter={"missing": {"$exists": True}})} == set()


def test_a_filter_given_to_the_store_means_what_the_same_filter_means_per_call(minilm, spacy_extractor):
    """Every bare key of a vector-store filter is a metadata key; the constructor's filter read
    ``title`` and ``id`` as the document's own fields (a text's title is none: nothing was visible,
    and ``{"id": 8}`` was refused as not a string)."""
    with SurrealStore("mem://") as store:
        writer = SurrealKGVectorStore(minilm, store=store, extractor=spacy_extractor)
        writer.add_texts(
            ["The museum opens at nine.", "The museum closes at six.", "The museum cafe serves soup."],
            [{"title": "hours", "id": 7}, {"title": "closing", "id": 8}, {"title": "hours", "id": 9}],
            ids=["open", "close", "cafe"],
        )
        for spec in ({"title": "hours"}, {"id": 8}, {"$or": [{"id": 7}, {"title": "closing"}]}):
            pinned = SurrealKGVectorStore(minilm, store=store, filter=spec, extractor=spacy_extractor)
            per_call = {d.id for d in writer.similarity_search("museum", k=5, filter=spec)}
            assert {d.id for d in pinned.similarity_search("museum", k=5)} == per_call and per_call, spec
            assert {d.id for d in pinned.get_by_ids(["open", "close", "cafe"])} == per_call


def test_bad_input_is_reported_and_the_rest_stored(kg):
    with pytest.raises(VectorWriteError, match="no text") as failure:
        kg.add_texts(["   ", "Chopin was born near Warsaw."], ids=["blank", "chopin"])
    assert failure.value.stored == ["chopin"]
    assert [d.id for d in kg.get_by_ids(["blank", "chopin"])] == ["chopin"]
    with pytest.raises(ValueError, match="one of each"):
        kg.add_texts(["a", "b"], ids=["only-one"])


def test_documents_ingested_without_keep_text_read_back_as_their_chunks(kg, minilm, spacy_extractor):
    from surreal_kgrag import IngestConfig, Ingestor
    from surreal_kgrag.chunking import SentenceChunker
    from surreal_kgrag.loaders import from_text

    text = "Warsaw is the capital of Poland.   It lies on the Vistula.\n\nKrakow was the capital before it."
    config = IngestConfig(chunker=SentenceChunker(max_tokens=10, overlap_tokens=0))
    Ingestor(kg.store, embedder=minilm, extractor=spacy_extractor, config=config).ingest([from_text(text, key="plain")])
    [document] = kg.get_by_ids(["plain"])
    # No exact text was kept: the chunks in order, joined by newlines (whitespace between them is lost).
    assert document.page_content.split("\n") == [
        "Warsaw is the capital of Poland.", "It lies on the Vistula.", "Krakow was the capital before it."
    ]
    assert kg.store.query("vector_texts", {"ids": []}, filter=kg.texts.scope.compile())[-1] == []


def test_thousands_of_ids_are_read_and_deleted_in_bounded_queries(kg, sent_steps):
    """get_by_ids and delete take any number of ids; each query carries at most IDS_PER_QUERY of
    them (a caller's million ids is not one query of a million parameters)."""
    from surreal_kgrag.checks import IDS_PER_QUERY

    sent = sent_steps(kg.store)
    ids = [f"absent-{i}" for i in range(2 * IDS_PER_QUERY)] + ["danube", "bach"] + [f"absent-{i}" for i in range(IDS_PER_QUERY)]
    assert [d.id for d in kg.get_by_ids(ids)] == ["danube", "bach"]
    kg.delete(ids)
    assert [d.id for d in kg.get_by_ids(["danube", "bach", "curie"])] == ["curie"]
    sizes = {query: [len(params["ids"]) for name, params, _ in sent if name == query] for query in ("vector_texts", "vector_keys")}
    assert sizes["vector_texts"][:3] == [IDS_PER_QUERY, IDS_PER_QUERY, 2] and sizes["vector_keys"] == [IDS_PER_QUERY, IDS_PER_QUERY, 2]


@pytest.mark.parametrize("run", ["sync", "async"])
def test_the_ingestor_deletes_thousands_of_keys_in_bounded_queries(kg, monkeypatch, run):
    from surreal_kgrag.checks import IDS_PER_QUERY

    sizes: list[int] = []
    query, aquery = kg.store.query, kg.store.aquery

    def recorded(name, params=None, **placeholders):
        sizes.extend([len(params["sources"])] if name == "document_parts" else [])
        return query(name, params, **placeholders)

    async def arecorded(name, params=None, **placeholders):
        sizes.extend([len(params["sources"])] if name == "document_parts" else [])
        return await aquery(name, params, **placeholders)

    monkeypatch.setattr(kg.store, "query", recorded)
    monkeypatch.setattr(kg.store, "aquery", arecorded)
    keys = [f"absent-{i}" for i in range(IDS_PER_QUERY)] + ["danube", "bach"]
    ingestor = kg.texts.ingestor
    deleted = ingestor.delete(keys) if run == "sync" else asyncio.run(ingestor.adelete(keys))
    assert deleted == 2 and sizes == [IDS_PER_QUERY, 2]
    assert [d.id for d in kg.get_by_ids(["danube", "bach", "curie"])] == ["curie"]
