"""Filtered search is exact enough: filtered KNN compared with an exact (brute-force) filtered search
on the same store. SurrealDB 3.2's filtered HNSW search can drop true neighbours (surrealdb#7423);
the retrievers work around it (an exact scan when the filter passes few chunks; else a larger pool,
and an exact scan when a filtered KNN comes back short), and this test measures both the engine and
the workaround."""

from __future__ import annotations

import datetime
import math
import random
import statistics

import numpy as np
import pytest
from surrealdb import RecordID

from surreal_kgrag import IngestConfig, Ingestor, Scope, SourceDocument, SurrealStore, make_retriever, surql
from surreal_kgrag.chunking import SentenceChunker
from surreal_kgrag.retrieval import pool as pool_module
from surreal_kgrag.retrieval.base import MAX_CANDIDATES
from surreal_kgrag.retrieval.caches import LRU, ChunkTotals, cache_key
from surreal_kgrag.retrieval.pool import FILTERED_POOL, POST_FILTER_MAX, POST_FILTER_READ, Pool, post_filtered_size
from surreal_kgrag.retrieval.request import Request

SUBJECTS = ["The volcano", "A glacier", "The river", "An old castle", "The harbour", "A rainforest", "The desert",
            "A coral reef", "The observatory", "A vineyard", "The railway", "A monastery", "The bridge", "A lighthouse"]
VERBS = ["attracts", "threatens", "shelters", "feeds", "surprises", "divides", "connects", "inspires"]
OBJECTS = ["tourists", "farmers", "scientists", "pilgrims", "sailors", "miners", "birds", "painters", "traders", "monks"]
PLACES = ["in Iceland", "near Lima", "in Norway", "outside Cairo", "in Kenya", "near Quebec", "in Tuscany", "on Java"]
QUESTIONS = ["volcano tourists in Iceland", "monks in a monastery near Quebec", "sailors and a lighthouse",
             "scientists at the observatory", "birds on the coral reef", "traders at the harbour in Kenya",
             "railway miners near Lima", "vineyard painters in Tuscany"]
DOCUMENTS = 200
K = 10


@pytest.fixture(scope="module")
def store(minilm, spacy_extractor):
    rng = random.Random(7)
    documents = []
    for i in range(DOCUMENTS):
        text = " ".join(
            f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} {rng.choice(PLACES)}." for _ in range(3)
        )
        tenant = f"t{i % 20}"
        documents.append(SourceDocument(key=f"d{i}", text=text, source="generated", metadata={"n": i}, access=[tenant]))
    with SurrealStore("mem://") as s:
        config = IngestConfig(chunker=SentenceChunker(max_tokens=12, overlap_tokens=0), metadata_concepts=())
        summary = Ingestor(s, embedder=minilm, extractor=spacy_extractor, config=config).ingest(documents)
        assert summary.chunks >= 2 * DOCUMENTS
        s.optimize(force=True)  # search the HNSW graph, not the exact queue of fresh inserts
        yield s


FILTERS = {  # what share of the chunks each filter passes
    "1 tenant (5%)": Scope(access=["t3"]),
    "metadata n < 8 (4%)": Scope(filters={"n": {"$lt": 8}}),
    "metadata n < 40 (20%)": Scope(filters={"n": {"$lt": 40}}),
    "10 tenants (50%)": Scope(access=[f"t{i}" for i in range(10)]),
}


@pytest.fixture(params=["scan when few pass", "post-filter", "filtered KNN"])
def exact_scan_chunks(request, monkeypatch):
    """The three ways a filtered search reads its pool: this store's filters pass a few hundred
    chunks, which are scanned exactly by default; with the limit at 0 an unfiltered KNN is read and
    filtered after it (a filter passing at least 2% of the chunks), or, with no post-filtered read
    allowed, the KNN filters."""
    limit = surql.CONSTANTS["exact_scan_chunks"] if request.param == "scan when few pass" else 0
    monkeypatch.setitem(surql.CONSTANTS, "exact_scan_chunks", limit)
    if request.param == "filtered KNN":
        monkeypatch.setattr(pool_module, "POST_FILTER_MAX", 0)
    surql.load.cache_clear()
    yield limit
    monkeypatch.undo()
    surql.load.cache_clear()


def _exact(store, vector, scope, k=K):
    condition = scope.compile()
    rows = store.query("exact_chunks", {"embedding": vector, **condition.params}, candidates=k, filter=condition)[-1]
    return [row["id"].id for row in rows]


def _engine_knn(store, vector, scope):
    """The engine's filtered KNN alone: a pool of K, no workaround (not ``count_inside``: the query
    does not count the documents inside the filter, which would scan exactly)."""
    condition = scope.compile()
    params = {"embedding": vector, "threshold": -1.0, "limit": 1000, "filtered": True, "exact": False, "count_inside": False,
              "keep": K, **condition.params}
    out = store.query("search_chunks", params, candidates=K, ef=80, filter=condition, document_filter=condition.on_documents())[-1]
    assert not out["pool"]["exact"]
    return [c["id"].id for d in out["documents"] for c in d["chunks"]]


def _overlap(found, exact):
    return len(set(found) & set(exact)) / len(exact)


def test_filtered_search_finds_the_exact_nearest_chunks(store, minilm, exact_scan_chunks):
    vectors = {q: np.asarray(minilm.embed_query(q), dtype=np.float32) for q in QUESTIONS}
    report = []
    for name, scope in FILTERS.items():
        retriever = make_retriever("chunk", store, embedder=minilm, scope=scope, group_by="chunk")
        engine, ours = [], []
        for question, vector in vectors.items():
            exact = _exact(store, vector, scope)
            assert len(exact) == K
            engine.append(_overlap(_engine_knn(store, vector, scope), exact))
            found = retriever.search(question, k=K, embedding=vector.tolist()).documents
            assert len(found) == K
            ours.append(_overlap([d.chunks[0].id for d in found], exact))
        report.append((name, statistics.mean(engine), min(engine), statistics.mean(ours), min(ours)))
    print("\nfiltered KNN top-10 overlap with the exact filtered top-10 (mean / worst query):")
    for name, engine_mean, engine_min, ours_mean, ours_min in report:
        print(f"  {name:24} engine alone {engine_mean:.3f} / {engine_min:.2f}   retriever {ours_mean:.3f} / {ours_min:.2f}")
    for name, _, _, ours_mean, ours_min in report:
        assert ours_mean >= 0.99 and ours_min >= 0.9, (name, ours_mean, ours_min)


def test_hybrid_vector_channel_reaches_every_chunk_a_selective_filter_passes(store, minilm, spacy_extractor, exact_scan_chunks):
    scope = FILTERS["metadata n < 8 (4%)"]
    retriever = make_retriever("hybrid", store, embedder=minilm, extractor=spacy_extractor, scope=scope, threshold=-1.0)
    for question in QUESTIONS[:4]:
        vector = np.asarray(minilm.embed_query(question), dtype=np.float32)
        passing = set(_exact(store, vector, scope, k=1000))
        assert {c.split("::")[0] for c in passing} == {f"d{i}" for i in range(8)}
        found = retriever.search(question, k=8, embedding=vector.tolist()).documents
        assert {d.id for d in found} == {f"d{i}" for i in range(8)}
        assert {p.chunk_id for d in found for p in d.provenance if p.channel == "vector"} == passing


@pytest.mark.parametrize(
    "mode, options",
    [("chunk", {}), ("chunk", {"aggregate": "count"}), ("concept", {}), ("hybrid", {}), ("graph", {})],
    ids=["chunk", "chunk-count", "concept", "hybrid", "graph"],
)
def test_a_filter_that_passes_every_document_ranks_as_no_filter(store, minilm, spacy_extractor, mode, options, exact_scan_chunks):
    """A filtered KNN reads a larger pool than it ranks (for the neighbours filtered HNSW drops):
    the extra vectors are not seeds, vector hits, BM25 hits or a document's chunks, so the ranking
    and what each document shows are the unfiltered ones."""
    extra = {"extractor": spacy_extractor} if mode == "hybrid" else {}
    retriever = make_retriever(mode, store, embedder=minilm, **extra, **options)
    for question in QUESTIONS:
        plain = retriever.search(question, k=K)
        everything = retriever.search(question, k=K, filters={"n": {"$gte": 0}})
        assert [d.id for d in everything.documents] == [d.id for d in plain.documents], question
        assert [d.score for d in everything.documents] == pytest.approx([d.score for d in plain.documents]), question
        assert [[c.id for c in d.chunks] for d in everything.documents] == [[c.id for c in d.chunks] for d in plain.documents]


@pytest.mark.parametrize("mode", ["concept", "hybrid", "graph"])
def test_threshold_keeps_less_similar_chunks_out_of_every_mode(store, minilm, spacy_extractor, mode):
    """The KNN's chunks below ``threshold`` are neither vector hits nor dense seeds, in every mode."""
    def vector_scores(threshold: float) -> list[float]:
        extra = {"extractor": spacy_extractor} if mode == "hybrid" else {}
        retriever = make_retriever(mode, store, embedder=minilm, threshold=threshold, **extra)
        found = [retriever.search(question, k=K) for question in QUESTIONS]
        return [p.score for result in found for d in result.documents for p in d.provenance if p.channel == "vector"]

    assert min(vector_scores(-1.0)) < 0.5  # the premise: the pool holds chunks less similar than that
    assert all(score >= 0.5 for score in vector_scores(0.5))


def test_an_exact_scan_is_read_at_most_twice():
    """Each exact scan reads every chunk inside the filter, whatever its LIMIT: a pool that turned
    exact and still finds too few documents grows once, to the largest pool, then stops."""
    scope = Scope(access=["t3"])
    request = Request(query="q", k=50, fetch=50, scope=scope, filter=scope.compile(), embedding=[0.0])
    pool = Pool(request, 100)
    assert (pool.size, pool.keep) == (100 * FILTERED_POOL, 100)
    assert not pool.read({}, 10)  # a filtered KNN far short of its pool: read it again exactly
    scans = []
    while pool.size is not None:
        assert pool.read({}, pool.size)
        scans.append(pool.size)
        pool.grow(found=1, fetched=pool.size)  # a full pool and still too few documents
    assert scans == [100 * FILTERED_POOL, MAX_CANDIDATES]


def test_a_scoped_walk_without_hop_2_counts_the_concepts_its_seeds_met(minilm, spacy_extractor):
    """Without the second hop a scoped walk reads only the seeds' own edges of the concepts they
    meet: it counts those concepts from the store (as an unscoped walk does), not from the few
    edges it read, so a filter that passes everything gives the unfiltered scores."""
    people = ["Anna Berg", "Jonas Lind", "Maria Holm", "Erik Dahl", "Sofia Ek", "Lars Nyman"]
    cities = ["Oslo", "Bergen", "Tromso", "Uppsala"]
    documents = [
        SourceDocument(key=f"p{i}", text=f"{person} was born in {cities[i % 4]}. {person} studied chemistry in {cities[(i + 1) % 4]}.",
                       source="people", metadata={"n": i})
        for i, person in enumerate(people)
    ]
    with SurrealStore("mem://") as s:
        assert Ingestor(s, embedder=minilm, extractor=spacy_extractor).ingest(documents).added == len(people)
        retriever = make_retriever("graph", s, embedder=minilm, hop2=False, candidates=2)
        for question in ["Where was Anna Berg born?", "Who studied chemistry in Tromso?"]:
            # k=1: a pool of 2 chunks, so the seeds are not every chunk that mentions their cities
            plain = retriever.search(question, k=1)
            everything = retriever.search(question, k=1, filters={"n": {"$gte": 0}})
            walked = [[(p.chunk_id, p.score) for p in d.provenance if p.channel == "graph"] for d in plain.documents]
            assert walked and walked[0]
            assert [[(p.chunk_id, p.score) for p in d.provenance if p.channel == "graph"] for d in everything.documents] == [
                [(chunk, pytest.approx(score)) for chunk, score in paths] for paths in walked
            ]


def _search_chunks(store, vector, scope):
    condition = scope.compile()
    params = {"embedding": vector, "threshold": -1.0, "limit": 1000, "filtered": True, "exact": False, "count_inside": True,
              "keep": K, **condition.params}
    return store.query("search_chunks", params, candidates=K, ef=80, filter=condition, document_filter=condition.on_documents())[-1]


def test_a_filter_passing_few_chunks_is_scanned_exactly_by_the_first_query(store, minilm, monkeypatch):
    """The query counts the documents inside the filter first: when their chunks are at most
    ``exact_scan_chunks`` it scans them exactly (no filtered HNSW search, which walks far into the
    graph when few vectors pass), and says so, with how many documents are inside."""
    vector = minilm.embed_query(QUESTIONS[0])
    tenant = {f"d{i}" for i in range(DOCUMENTS) if i % 20 == 3}
    for scope, documents in ((FILTERS["metadata n < 8 (4%)"], {f"d{i}" for i in range(8)}), (FILTERS["1 tenant (5%)"], tenant)):
        out = _search_chunks(store, vector, scope)
        assert out["pool"]["exact"]
        assert set(out["pool"]["inside"]) == documents
        found = sorted(((c["score"], c["id"].id) for d in out["documents"] for c in d["chunks"]), reverse=True)
        assert [chunk for _, chunk in found] == _exact(store, vector, scope)
    monkeypatch.setitem(surql.CONSTANTS, "exact_scan_chunks", 20)  # fewer than the 8 documents' chunks
    surql.load.cache_clear()
    try:
        out = _search_chunks(store, vector, FILTERS["metadata n < 8 (4%)"])
        assert not out["pool"]["exact"]  # a KNN, and the documents it can find:
        assert set(out["pool"]["inside"]) == {f"d{i}" for i in range(8)}
        out = _search_chunks(store, vector, FILTERS["10 tenants (50%)"])
        assert (out["pool"]["exact"], out["pool"]["inside"]) == (False, None)  # more documents than it counts
    finally:
        monkeypatch.undo()
        surql.load.cache_clear()


def test_a_short_filtered_knn_is_scanned_again_through_the_documents_it_counted(store, minilm, monkeypatch):
    """A filter passing a few documents with more chunks than ``exact_scan_chunks`` (one long PDF of
    a large store) is read by a filtered KNN; when that comes back short, the exact scan that
    replaces it counts the documents again and reads their chunks alone (chunk_doc), not every
    chunk of the store: the same exact top K, and the query says the documents were counted."""
    vector = minilm.embed_query(QUESTIONS[0])
    scope = FILTERS["metadata n < 8 (4%)"]
    monkeypatch.setitem(surql.CONSTANTS, "exact_scan_chunks", 20)  # fewer than the 8 documents' chunks
    surql.load.cache_clear()
    try:
        condition = scope.compile()
        request = Request(query="q", k=K, fetch=K, scope=scope, filter=condition, embedding=vector)
        pool = Pool(request, K)
        first = _search_chunks(store, vector, scope)
        assert not first["pool"]["exact"] and first["pool"]["inside"]
        assert not pool.read(first, 1)  # as if the filtered KNN had come back far short
        assert pool.params() == {"keep": K, "exact": True, "count_inside": True, "post": False}
        out = store.query("search_chunks", {"embedding": vector, "threshold": -1.0, "limit": 1000, "filtered": True, **pool.params(),
                                            **condition.params}, candidates=pool.size, ef=80, filter=condition,
                          document_filter=condition.on_documents())[-1]
        assert out["pool"]["exact"] and set(out["pool"]["inside"]) == {f"d{i}" for i in range(8)}
        found = sorted(((c["score"], c["id"].id) for d in out["documents"] for c in d["chunks"]), reverse=True)
        assert [chunk for _, chunk in found][:K] == _exact(store, vector, scope)
    finally:
        monkeypatch.undo()
        surql.load.cache_clear()


def test_a_pool_stops_growing_once_it_found_every_document_inside_the_filter():
    """A filter passing two long documents cannot give five: the pool stops when it found both,
    instead of growing (each filtered KNN larger and slower) to the largest pool. A document found
    that is not inside the filter (a chunk of one being removed) does not count for another."""
    scope = Scope(access=["t3"])
    request = Request(query="q", k=5, fetch=5, scope=scope, filter=scope.compile(), embedding=[0.0])
    for exact in (False, True):
        grown = MAX_CANDIDATES if exact else 20 * FILTERED_POOL * 4
        for found, stops in ((["a", "b"], True), (["a", "b", "c"], True), (["a", "c"], False), (["a"], False)):
            pool = Pool(request, 20)
            assert pool.read({"pool": {"exact": exact, "inside": ["a", "b"]}}, pool.size)
            pool.grow(len(found), pool.size, documents=found)
            assert pool.size == (None if stops else grown), (exact, found)
        pool = Pool(request, 20)
        assert pool.read({"pool": {"exact": exact, "inside": ["a", "b"]}}, pool.size)
        pool.grow(2, pool.size)  # chunks wanted, not documents: found every document is not enough
        assert pool.size == grown


def test_a_retriever_stops_counting_the_documents_of_a_filter_that_passes_many():
    """Counting the documents inside a filter reads up to ``exact_scan_chunks`` of them: a filter
    found to pass more goes straight to the filtered KNN for a while; one passing few documents (or
    few but long ones, whose count stops the pool growing) is counted each time."""
    dense = LRU()
    many, few = Scope(access=["t1"]), Scope(access=["t2"])

    def pool(scope):
        return Pool(Request(query="q", k=5, fetch=5, scope=scope, filter=scope.compile(), embedding=[0.0]), 20, dense=dense)

    first = pool(many)
    assert first.params()["count_inside"]
    first.read({"pool": {"exact": False, "inside": None}}, first.size)
    assert not first.params()["count_inside"]  # this search's later reads do not count again
    assert not pool(many).params()["count_inside"]  # nor the next search's
    for inside in (["d1", "d2", "d3"], None):
        counted = pool(few)
        assert counted.params()["count_inside"]
        counted.read({"pool": {"exact": inside is not None, "inside": inside}}, counted.size)
        if inside is not None:
            assert pool(few).params()["count_inside"]
    assert not pool(few).params()["count_inside"]
    assert pool(Scope(access=["t3"])).params()["count_inside"]


@pytest.fixture(scope="module")
def long_documents(minilm, spacy_extractor):
    """Three documents of 60 chunks each: a filter passing two of them passes 120 chunks."""
    rng = random.Random(11)
    documents = [
        SourceDocument(
            key=f"long{i}",
            text=" ".join(f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} {rng.choice(PLACES)}." for _ in range(60)),
            source=f"long{i}.txt",
            metadata={"n": i},
        )
        for i in range(3)
    ]
    with SurrealStore("mem://") as s:
        config = IngestConfig(chunker=SentenceChunker(max_tokens=12, overlap_tokens=0), metadata_concepts=())
        assert Ingestor(s, embedder=minilm, extractor=spacy_extractor, config=config).ingest(documents).chunks >= 150
        s.optimize(force=True)
        yield s


@pytest.mark.parametrize("mode", ["chunk", "hybrid", "graph"])
def test_a_filter_passing_fewer_documents_than_k_reads_one_pool(long_documents, minilm, spacy_extractor, mode, monkeypatch):
    """Two long documents pass the filter and k is 5: the first filtered KNN finds both, and the
    search stops there, where it used to read a four times larger pool for documents that do not
    exist. (The scan limit is lowered so the 120 chunks go through the KNN.)"""
    monkeypatch.setitem(surql.CONSTANTS, "exact_scan_chunks", 50)
    surql.load.cache_clear()
    searches: list[str] = []
    query_many = long_documents.query_many

    def recorded(steps):
        searches.extend(name for name, _, _ in steps if name in ("search_chunks", "search_hybrid", "graph_subgraph"))
        return query_many(steps)

    monkeypatch.setattr(long_documents, "query_many", recorded)
    extra = {"extractor": spacy_extractor} if mode == "hybrid" else {}
    retriever = make_retriever(mode, long_documents, embedder=minilm, **extra)
    try:
        for question in QUESTIONS[:3]:
            searches.clear()
            found = retriever.search(question, k=5, filters={"n": {"$lt": 2}})
            assert {d.id for d in found.documents} == {"long0", "long1"}
            assert len(searches) == 1, searches
    finally:
        monkeypatch.undo()
        surql.load.cache_clear()


def test_a_filter_passing_a_large_share_filters_an_unfiltered_knn(store, minilm, monkeypatch):
    """A filter passing half the chunks, more than an exact scan reads: the search reads the
    unfiltered KNN of twice the chunks it keeps over that share, keeps those inside the filter, and
    finds the exact filtered top K; it neither counts the documents inside nor filters the KNN."""
    monkeypatch.setitem(surql.CONSTANTS, "exact_scan_chunks", 0)
    surql.load.cache_clear()
    scope = FILTERS["10 tenants (50%)"]
    counted = store.query("count_chunks", {"filtered": True, **scope.compile().params}, filter=scope.compile().on_documents())[-1]
    assert 0.4 < counted["scope"] / counted["store"] < 0.6 and counted["documents"] == DOCUMENTS // 2
    reads: list[tuple[dict, dict, dict]] = []
    query = store.query

    def recorded(name, params=None, **placeholders):
        answer = query(name, params, **placeholders)
        if name == "search_chunks":
            reads.append((dict(params), placeholders, answer[-1]["pool"]))
        return answer

    monkeypatch.setattr(store, "query", recorded)
    retriever = make_retriever("chunk", store, embedder=minilm, scope=scope, group_by="chunk")
    try:
        for question in QUESTIONS[:4]:
            vector = minilm.embed_query(question)
            reads.clear()
            found = retriever.search(question, k=K, embedding=vector).documents
            assert [d.chunks[0].id for d in found] == _exact(store, vector, scope)
            ((params, placeholders, pool),) = reads
            assert params["post"] and not params["count_inside"] and not params["exact"]
            assert placeholders["candidates"] == math.ceil(POST_FILTER_READ * 20 * counted["store"] / counted["scope"])
            assert pool["read"] == placeholders["candidates"] and pool["inside"] is None
    finally:
        monkeypatch.undo()
        surql.load.cache_clear()


def test_which_filters_are_applied_after_the_knn():
    """Post-filtering needs the counts, more chunks inside than an exact scan reads, as many
    documents inside as the search wants, and a share of the store large enough for a first read
    of at most ``POST_FILTER_MAX`` vectors."""
    scope = Scope(access=["t1"])
    request = Request(query="q", k=5, fetch=5, scope=scope, filter=scope.compile(), embedding=[0.0])
    limit = surql.CONSTANTS["exact_scan_chunks"]
    assert post_filtered_size(request, 20, ChunkTotals(scope=1_000, store=2_000, documents=50)) == 80
    assert post_filtered_size(request, 20, ChunkTotals(scope=1_000, store=1_000, documents=50)) == 40
    assert post_filtered_size(request, 20, None) is None  # not counted
    assert post_filtered_size(request, 20, ChunkTotals(scope=limit, store=100_000, documents=50)) is None  # scanned exactly
    assert post_filtered_size(request, 20, ChunkTotals(scope=10_000, store=20_000, documents=4)) is None  # fewer than k documents
    largest = math.ceil(POST_FILTER_READ * 20 / POST_FILTER_MAX * 1_000_000)
    assert post_filtered_size(request, 20, ChunkTotals(scope=largest, store=1_000_000, documents=50)) == POST_FILTER_MAX
    assert post_filtered_size(request, 20, ChunkTotals(scope=largest - 1_000, store=1_000_000, documents=50)) is None
    unfiltered = Request(query="q", k=5, fetch=5, scope=Scope(), filter=Scope().compile(), embedding=[0.0])
    assert post_filtered_size(unfiltered, 20, ChunkTotals(scope=1_000, store=1_000, documents=50)) is None
    pool = Pool(request, 20, passing=ChunkTotals(scope=1_000, store=2_000, documents=50))
    assert (pool.size, pool.keep, pool.params()) == (80, 20, {"keep": 20, "exact": False, "count_inside": False, "post": True})
    assert pool.read({"pool": {"exact": False, "inside": None, "read": 80}}, 3)  # 3 of 80 inside: not read again exactly
    pool.grow(found=2, fetched=3)  # the unfiltered KNN was full: more may pass further out
    assert (pool.size, pool.keep) == (320, 80)
    assert pool.read({"pool": {"exact": False, "inside": None, "read": 250}}, 40)  # the store holds 250 chunks
    pool.grow(found=3, fetched=40)
    assert pool.size is None


def test_the_share_passing_a_filter_is_read_from_a_bounded_number_of_documents(store, monkeypatch):
    """``count_chunks.surql`` reads at most ``passing_documents`` documents: past that, the chunks
    inside are a lower bound (a larger first pool, never a smaller one), and the concept weights
    weigh against the store's chunks instead (``weighed``)."""
    condition = FILTERS["10 tenants (50%)"].compile()

    def counted():
        params = {"filtered": True, **condition.params}
        return store.query("count_chunks", params, filter=condition.on_documents())[-1]

    whole = counted()
    assert whole["documents"] == DOCUMENTS // 2 and whole["store"] == store.query("table_counts")[-1]["chunk"] and whole["whole"]
    assert ChunkTotals(**whole).weighed == whole["scope"] < whole["store"]
    monkeypatch.setitem(surql.CONSTANTS, "passing_documents", 10)
    surql.load.cache_clear()
    try:
        bounded = counted()
        assert bounded["documents"] == 10 and 10 <= bounded["scope"] < whole["scope"] and bounded["store"] == whole["store"]
        assert not bounded["whole"] and ChunkTotals(**bounded).weighed == whole["store"]
    finally:
        monkeypatch.undo()
        surql.load.cache_clear()


@pytest.mark.parametrize("mode", ["concept", "hybrid", "graph"])
def test_a_fused_search_with_a_scope_alone_counts_it_once(store, minilm, spacy_extractor, mode, monkeypatch):
    """The fused modes count their scope for the concept weights; with no call filter that count
    also chooses the KNN pool, whether or not it was read whole, so it is read once; a call filter
    on top of the scope is counted on its own."""
    names: list[str] = []
    query_many = store.query_many  # every query goes through it

    def recorded(steps):
        names.extend(name for name, _, _ in steps)
        return query_many(steps)

    monkeypatch.setattr(store, "query_many", recorded)
    extra = {"extractor": spacy_extractor} if mode == "hybrid" else {}
    retriever = make_retriever(mode, store, embedder=minilm, scope=FILTERS["10 tenants (50%)"], **extra)
    retriever.search(QUESTIONS[0], k=K)
    assert names.count("count_chunks") == 1, names
    names.clear()
    retriever.search(QUESTIONS[1], k=K, filters={"n": {"$lt": 150}})
    assert names.count("count_chunks") == 1, names  # the filter's; the scope's count is cached
    names.clear()
    retriever.search(QUESTIONS[2], k=K, filters={"n": {"$lt": 150}})
    assert "count_chunks" not in names, names
    monkeypatch.setitem(surql.CONSTANTS, "passing_documents", 10)
    surql.load.cache_clear()
    try:  # a scope past the count's limit: the same count, a lower bound, sizes the pool
        names.clear()
        make_retriever(mode, store, embedder=minilm, scope=FILTERS["10 tenants (50%)"], **extra).search(QUESTIONS[0], k=K)
        assert names.count("count_chunks") == 1, names
    finally:
        monkeypatch.undo()
        surql.load.cache_clear()


def test_filters_whose_values_print_alike_are_cached_apart():
    """A datetime and its text, a record id and its text, match different rows: their counts and
    pool choices are cached under different keys."""
    when = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)
    assert cache_key("c", {"p": [when]}) != cache_key("c", {"p": [str(when)]})
    record = RecordID("document", "d1")
    assert cache_key("c", {"p": record}) != cache_key("c", {"p": str(record)})
    assert cache_key("c", {"p": [when], "q": 1}) == cache_key("c", {"q": 1, "p": [when]})
