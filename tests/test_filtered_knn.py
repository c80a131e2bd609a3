"""Filtered search is exact enough: filtered KNN compared with an exact (brute-force) filtered search
on the same store. SurrealDB 3.2's filtered HNSW search can drop true neighbours (surrealdb#7423);
the retrievers work around it (a larger pool, and an exact scan when a filtered KNN comes back short),
and this test measures both the engine and the workaround."""

from __future__ import annotations

import random
import statistics

import numpy as np
import pytest

from surreal_kgrag import IngestConfig, Ingestor, Scope, SourceDocument, SurrealStore, make_retriever
from surreal_kgrag.chunking import SentenceChunker
from surreal_kgrag.retrieval.base import FILTERED_POOL, MAX_CANDIDATES, Pool, Request

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


def _exact(store, vector, scope, k=K):
    condition = scope.compile()
    rows = store.query("exact_chunks", {"embedding": vector, **condition.params}, candidates=k, filter=condition)[-1]
    return [row["id"].id for row in rows]


def _engine_knn(store, vector, scope):
    """The engine's filtered KNN alone: a pool of K, no workaround."""
    condition = scope.compile()
    params = {"embedding": vector, "threshold": -1.0, "limit": 1000, "filtered": True, "exact": False, **condition.params}
    out = store.query("search_chunks", params, candidates=K, ef=80, filter=condition)[-1]
    return [c["id"].id for d in out["documents"] for c in d["chunks"]]


def _overlap(found, exact):
    return len(set(found) & set(exact)) / len(exact)


def test_filtered_search_finds_the_exact_nearest_chunks(store, minilm):
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


def test_hybrid_vector_channel_reaches_every_chunk_a_selective_filter_passes(store, minilm, spacy_extractor):
    scope = FILTERS["metadata n < 8 (4%)"]
    retriever = make_retriever("hybrid", store, embedder=minilm, extractor=spacy_extractor, scope=scope, threshold=-1.0)
    for question in QUESTIONS[:4]:
        vector = np.asarray(minilm.embed_query(question), dtype=np.float32)
        passing = set(_exact(store, vector, scope, k=1000))
        assert {c.split("::")[0] for c in passing} == {f"d{i}" for i in range(8)}
        found = retriever.search(question, k=8, embedding=vector.tolist()).documents
        assert {d.id for d in found} == {f"d{i}" for i in range(8)}
        assert {p.chunk_id for d in found for p in d.provenance if p.channel == "vector"} == passing


@pytest.mark.parametrize("mode", ["chunk", "concept", "hybrid", "graph"])
def test_a_filter_that_passes_every_document_ranks_as_no_filter(store, minilm, spacy_extractor, mode):
    """A filtered KNN reads a larger pool than it ranks (for the neighbours filtered HNSW drops):
    the extra vectors are not seeds, vector hits or BM25 hits, so the ranking is the unfiltered one."""
    extra = {"extractor": spacy_extractor} if mode == "hybrid" else {}
    retriever = make_retriever(mode, store, embedder=minilm, **extra)
    for question in QUESTIONS:
        plain = retriever.search(question, k=K)
        everything = retriever.search(question, k=K, filters={"n": {"$gte": 0}})
        assert [d.id for d in everything.documents] == [d.id for d in plain.documents], question
        assert [d.score for d in everything.documents] == pytest.approx([d.score for d in plain.documents]), question


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
