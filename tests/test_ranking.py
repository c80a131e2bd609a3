"""Ranking correctness on multi-chunk documents (real embedded SurrealDB, spaCy and MiniLM)."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from surrealdb import RecordID

from surreal_kgrag import IngestConfig, Ingestor, SourceDocument, SurrealStore, make_retriever
from surreal_kgrag.chunking import SentenceChunker
from surreal_kgrag.ids import chunk_document_key
from surreal_kgrag.retrieval.caches import LRU
from surreal_kgrag.retrieval.documents import Named, with_places
from surreal_kgrag.retrieval.documents import hits as documents_hits
from surreal_kgrag.retrieval.fusion import Hit, fuse, fuse_chunks, top_chunks

MODES = ["chunk", "concept", "hybrid", "graph"]
VOLCANO = [
    "Mount Etna erupted again last night. Lava flowed down the eastern slope of the volcano. ",
    "The volcano on Stromboli throws lava bombs every few minutes. Its eruptions are small but constant. ",
    "Vesuvius buried Pompeii under volcanic ash in 79 AD. The eruption column rose thirty kilometres. ",
]
OTHER = {
    "bread": "Sourdough bread needs a starter, flour, water and salt. Bake it in a hot oven.",
    "tea": "Green tea is steamed, black tea is oxidised. Brew green tea below boiling point.",
    "chess": "In chess the queen moves any distance. Castling protects the king.",
    "tennis": "Wimbledon is played on grass. The tennis season moves to grass in June.",
    "knitting": "Knitting needles come in many sizes. Wool yarn is warm and elastic.",
    "sailing": "A sloop has one mast. Sailors reef the mainsail when the wind rises.",
}


@pytest.fixture(scope="module")
def store(minilm, spacy_extractor):
    with SurrealStore("mem://") as s:
        config = IngestConfig(chunker=SentenceChunker(max_tokens=16, overlap_tokens=0), metadata_concepts=())
        documents = [
            SourceDocument(key=f"volcano{i}", title=f"Volcano report {i}", text=text * 16, source=f"volcano{i}.txt")
            for i, text in enumerate(VOLCANO)
        ]
        documents += [SourceDocument(key=k, title=k, text=t, source=f"{k}.txt") for k, t in OTHER.items()]
        # Two documents whose keys differ only by a trailing colon (chunk ids "report:::..." and "report::...").
        documents += [
            SourceDocument(key="report", title="Report", text="Zanzibar exports cloves. Zanzibar lies off Tanzania.", source="r1"),
            SourceDocument(key="report:", title="Report colon", text="Zanzibar has a stone town. Zanzibar was a sultanate.", source="r2"),
        ]
        summary = Ingestor(s, embedder=minilm, extractor=spacy_extractor, config=config).ingest(documents)
        assert summary.chunks >= 90  # the three volcano documents hold far more than a KNN pool
        yield s


@pytest.fixture(scope="module")
def build(store, minilm, spacy_extractor):
    def make(mode, **options):
        extra = {"extractor": spacy_extractor} if mode == "hybrid" else {}
        return make_retriever(mode, store, embedder=minilm, **extra, **options)

    return make


QUESTION = "volcano eruption with lava flows"


def test_the_nearest_chunks_belong_to_few_documents(build):
    """The premise of the next test: a default KNN pool holds chunks of three documents only."""
    nearest = build("chunk", group_by="chunk").search(QUESTION, k=40).documents
    assert len({d.id for d in nearest}) <= 3


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("k", [5, 9])
def test_k_documents_whenever_k_match(build, mode, k):
    result = build(mode, threshold=-1.0).search(QUESTION, k=k)  # every document matches
    assert len(result.documents) == k == len({d.id for d in result.documents})
    assert {"volcano0", "volcano1", "volcano2"} <= {d.id for d in result.documents}


def test_the_pool_stops_growing_when_nothing_more_matches(build):
    assert len(build("chunk", threshold=-1.0).search(QUESTION, k=50).documents) == 3 + len(OTHER) + 2
    assert len(build("chunk", threshold=0.45).search(QUESTION, k=9).documents) == 3


def test_a_chunk_counts_once_per_channel_however_many_paths_reach_it():
    graph = [Hit(doc="d", chunk="d::a::00001", score=0.9 - i / 10, channel="graph", via=f"s::x::{i:05d}") for i in range(3)]
    both = [Hit(doc="d", chunk="d::a::00002", score=0.5, channel="vector"), Hit(doc="d", chunk="d::a::00002", score=3.0, channel="text")]
    scores = fuse_chunks({"graph": graph, "vector": both[:1], "text": both[1:]}, dict.fromkeys(["graph", "vector", "text"], 1.0), "rrf", 5)
    assert scores == pytest.approx({"d::a::00001": 1 / 6, "d::a::00002": 2 / 6})
    assert top_chunks(graph + both, 1, scores) == ["d::a::00002"]
    assert top_chunks(graph + both, 2, scores) == ["d::a::00002", "d::a::00001"]


def test_a_document_shows_its_best_chunks_by_fused_score():
    """Not the chunks more channels found: a chunk the heavy document channel and the walk lead to
    is shown before one two light channels found."""
    hits = [
        Hit(doc="d", chunk="d::a::00003", score=0.4, channel="vector"),
        Hit(doc="d", chunk="d::a::00003", score=2.0, channel="text"),
        Hit(doc="d", chunk="d::a::00007", score=0.9, channel="document"),
    ]
    scores = fuse_chunks(
        {"vector": hits[:1], "text": hits[1:2], "document": hits[2:]}, {"vector": 1.0, "text": 1.0, "document": 16.0}, "rrf", 5
    )
    assert top_chunks(hits, 1, scores) == ["d::a::00007"]


@pytest.mark.parametrize("fusion", ["rrf", "weighted"])
def test_a_hit_carries_its_share_of_its_channels_weight(fusion):
    """A document the question names only in lower-case words (weight 0.1) counts a tenth of one it
    names properly, in both fusions, on documents and on chunks alike: in weighted fusion, min-max
    normalisation would otherwise give the channel's best a full 1 whatever its score."""
    weights = {"document": 16.0, "graph": 8.0}
    named = [Hit(doc="copy", chunk="copy::a::00001", score=0.3, channel="document", weight=0.1)]
    walk = [
        Hit(doc="shutil", chunk="shutil::a::00004", score=0.9, channel="graph"),
        Hit(doc="time", chunk="time::a::00002", score=0.1, channel="graph"),
    ]
    ranked = [doc for doc, _ in fuse({"document": named, "graph": walk}, weights, fusion, 5)]
    assert ranked.index("shutil") < ranked.index("copy")
    chunks = fuse_chunks({"document": named, "graph": walk}, weights, fusion, 5)
    assert chunks["shutil::a::00004"] > chunks["copy::a::00001"]
    proper = [named[0].model_copy(update={"weight": 1.0})]
    assert fuse({"document": proper, "graph": walk}, weights, fusion, 5)[0][0] == "copy"


def test_documents_a_channel_names_equally_share_their_place_in_rank_fusion():
    """Eight pages carrying one name ("wal") are named equally, in the order the store listed them: each
    takes the mean of places 1-8 in the document channel, so the walk orders them. By position, the
    first listed outweighed the walk's first by the channel's weight alone."""
    names = [f"page{i}" for i in range(8)]
    named = [Named(doc, 1.9, "", 1.0) for doc in names]
    placed = with_places(named, latest=False)
    assert {item.place for item in placed} == {4.5}
    hits = documents_hits(placed, [{"doc": RecordID("document", d), "chunk": RecordID("chunk", f"{d}::a::00000"), "score": 0.5} for d in names], 1)
    walk = [Hit(doc="page5", chunk="page5::a::00003", score=0.9, channel="graph"), Hit(doc="page0", chunk="page0::a::00001", score=0.2, channel="graph")]
    weights = {"document": 16.0, "graph": 8.0}
    assert fuse({"document": hits, "graph": walk}, weights, "rrf", 5)[0][0] == "page5"
    unplaced = [hit.model_copy(update={"place": None}) for hit in hits]
    assert fuse({"document": unplaced, "graph": walk}, weights, "rrf", 5)[0][0] == "page0"  # the old ranking
    # For a question asking for the latest, equally named documents of different dates keep places
    # of their own (scores() put the newest first).
    dated = [Named(doc, 1.9, f"2023-0{i + 1}-01", 1.0) for i, doc in enumerate(reversed(names))]
    assert [item.place for item in with_places(dated, latest=True)] == [1, 2, 3, 4, 5, 6, 7, 8]
    # Better named documents keep places of their own.
    assert [item.place for item in with_places([Named("a", 3.0, "", 1.0), *named[:2]], latest=False)] == [1, 2.5, 2.5]


@pytest.mark.parametrize("mode", ["chunk", "concept"])
def test_similarity_modes_score_chunks_by_cosine_similarity(store, build, minilm, mode):
    result = build(mode).search(QUESTION, k=4)
    chunks = [c for d in result.documents for c in d.chunks]
    rows = store.query("chunk_embeddings", {"ids": [RecordID("chunk", c.id) for c in chunks]}, filter=build(mode).scope.compile())[-1]
    stored = {row["id"].id: np.asarray(row["embedding"]) for row in rows}
    query = np.asarray(minilm.embed_query(QUESTION))
    for doc in result.documents:
        assert doc.score == pytest.approx(max(c.score for c in doc.chunks), abs=1e-6)
        for chunk in doc.chunks:
            assert -1.0 <= chunk.score <= 1.0
            if mode == "chunk":
                cosine = query @ stored[chunk.id] / (np.linalg.norm(query) * np.linalg.norm(stored[chunk.id]))
                assert chunk.score == pytest.approx(float(cosine), abs=1e-4)


@pytest.mark.parametrize("mode", ["hybrid", "graph"])
@pytest.mark.parametrize("fusion", ["rrf", "weighted"])
def test_fused_modes_score_chunks_on_the_document_scale(build, mode, fusion):
    retriever = build(mode, fusion=fusion)
    weights = sum(retriever.config.weights.values())
    ceiling = weights / (retriever.config.rrf_k + 1) if fusion == "rrf" else weights
    documents = retriever.search(QUESTION, k=6).documents
    for doc in documents:
        assert 0 < doc.score <= ceiling + 1e-9
        for chunk in doc.chunks:  # a chunk's rank in a channel is never better than its document's
            assert 0 < chunk.score <= doc.score + 1e-9
    per_chunk = build(mode, fusion=fusion, group_by="chunk").search(QUESTION, k=12).documents
    scores = [d.score for d in per_chunk]
    assert len(per_chunk) == 12 and scores == sorted(scores, reverse=True)
    assert all(d.score == d.chunks[0].score and d.score <= ceiling + 1e-9 for d in per_chunk)
    best = {c.id: c.score for d in documents for c in d.chunks}
    assert all(d.chunks[0].score == pytest.approx(best[d.chunks[0].id]) for d in per_chunk if d.chunks[0].id in best)


@pytest.mark.parametrize("mode", ["concept", "hybrid", "graph"])
def test_a_chunk_ranking_reads_one_pool_and_hydrates_only_the_chunks_it_returns(build, monkeypatch, mode):
    """group_by='chunk' wants k chunks: a pool whose hits hold that many (at most chunks_per_document
    a document) is enough, and only the k returned chunks and their documents are read back."""
    question = "Which volcano erupted, and where did its lava flow?"
    retriever = build(mode, group_by="chunk")
    reference = retriever.search(question, k=6).documents  # also caches the counts
    calls: list[tuple[str, dict]] = []
    original = SurrealStore.query_many

    def recording(self, steps):
        calls.extend((name, dict(params or {})) for name, params, _ in steps)
        return original(self, steps)

    monkeypatch.setattr(SurrealStore, "query_many", recording)
    found = retriever.search(question, k=6).documents
    monkeypatch.undo()
    assert [(d.id, d.chunks[0].id) for d in found] == [(d.id, d.chunks[0].id) for d in reference]
    assert len(found) == 6 and len({d.chunks[0].id for d in found}) == 6
    assert len([name for name, _ in calls if name in ("search_hybrid", "graph_subgraph")]) == 1
    hydrated = [params for name, params in calls if name == "hydrate_results"]
    assert len(hydrated) == 1 and len(hydrated[0]["chunks"]) == 6
    assert {str(rid.id) for rid in hydrated[0]["documents"]} == {d.id for d in found}


def test_llama_index_node_scores_are_the_cores_chunk_scores(build):
    pytest.importorskip("llama_index.retrievers.surreal_kgrag", reason="install integrations/llama_index (scripts/setup.sh does)")
    from llama_index.retrievers.surreal_kgrag import SurrealKGRetriever

    core = build("hybrid")
    nodes = SurrealKGRetriever.from_retriever(core, similarity_top_k=3).retrieve(QUESTION)
    expected = {c.id: (c.score, d.score) for d in core.search(QUESTION, k=3).documents for c in d.chunks}
    assert nodes and {n.node.node_id for n in nodes} <= set(expected)
    for node in nodes:
        score, document_score = expected[node.node.node_id]
        assert node.score == pytest.approx(score) and node.score <= document_score + 1e-9
        assert node.node.metadata["document_score"] == pytest.approx(document_score)


@pytest.mark.parametrize("mode", MODES)
def test_every_mode_keeps_documents_whose_keys_differ_by_a_colon(build, mode):
    result = build(mode, candidates=40).search("Zanzibar cloves and the stone town sultanate", k=4)
    ids = [d.id for d in result.documents]
    assert {"report", "report:"} <= set(ids), ids
    for doc in result.documents:
        assert all(chunk_document_key(c.id) == doc.id for c in doc.chunks)
        assert all(p.document_id == doc.id and chunk_document_key(p.chunk_id) == doc.id for p in doc.provenance)


def test_query_caches_are_safe_under_many_threads():
    cache = LRU(size=64)
    errors: list[BaseException] = []

    def hammer(seed: int) -> None:
        try:
            for i in range(3000):
                key = f"q{(seed * 7919 + i) % 200}"
                if cache.lookup(key) is None:
                    cache.remember(key, [seed, i])
        except BaseException as error:  # reported below
            errors.append(error)

    threads = [threading.Thread(target=hammer, args=(n,)) for n in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors and len(cache) == 64


async def test_concurrent_searches_from_threads_equal_sequential_ones(build):
    import asyncio

    questions = [QUESTION, "bread in a hot oven", "chess queen and king", "Zanzibar cloves", "green tea"] * 4
    for mode in ("hybrid", "concept"):
        retriever = build(mode)  # fresh caches, filled concurrently
        expected = {q: [d.id for d in build(mode).search(q, k=4).documents] for q in set(questions)}
        found = await asyncio.gather(*(asyncio.to_thread(retriever.search, q, k=4) for q in questions))
        assert [[d.id for d in r.documents] for r in found] == [expected[q] for q in questions]
