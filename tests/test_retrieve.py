"""Retrievers on the real embedded SurrealDB with the real spaCy and MiniLM models."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from pydantic import ValidationError
from surrealdb import RecordID

from surreal_kgrag import Ingestor, SourceDocument, SurrealStore
from surreal_kgrag.cli import main as cli_main
from surreal_kgrag.extract import CallableConceptExtractor
from surreal_kgrag.retrieval import make_retriever
from surreal_kgrag.retrieval.config import GraphConfig, HybridConfig
from surreal_kgrag.retrieval.filters import FilterError, compile_filter
from surreal_kgrag.retrieval.hybrid import MAX_QUESTION_CONCEPTS

MODES = ["chunk", "concept", "hybrid", "graph"]

CORPUS = [
    ("curie", "Marie Curie", "Marie Curie was a physicist and chemist born in Warsaw. She discovered polonium and radium with Pierre Curie.", {"year": 1903, "tags": ["physics", "chemistry"]}, ["public"]),
    ("pierre", "Pierre Curie", "Pierre Curie was a French physicist who studied magnetism and shared the Nobel Prize in Physics in 1903.", {"year": 1903, "tags": ["physics"]}, ["public"]),
    ("warsaw", "Warsaw", "Warsaw is the capital of Poland, on the Vistula river. The city was the birthplace of Marie Curie.", {"year": 1596, "tags": ["city"]}, ["public"]),
    ("polonium", "Polonium", "Polonium is a radioactive element named after Poland. It was discovered by Marie Curie in 1898.", {"year": 1898, "tags": ["chemistry"]}, ["public"]),
    ("nobel", "Alfred Nobel", "Alfred Nobel was a Swedish chemist who invented dynamite and founded the Nobel Prize.", {"year": 1895, "tags": ["chemistry", "prize"]}, ["public"]),
    ("vistula", "Vistula", "The Vistula is the longest river in Poland. It flows through Krakow and Warsaw to the Baltic Sea.", {"year": 2001, "tags": ["river"]}, ["staff"]),
    ("krakow", "Krakow", "Krakow is a city in southern Poland with a famous old town and the Wawel castle.", {"year": 2005, "tags": ["city"]}, ["staff"]),
    ("baltic", "Baltic Sea", "The Baltic Sea is an arm of the Atlantic Ocean bordered by Sweden, Finland and Poland.", {"year": 2010, "tags": ["sea"]}, ["staff"]),
    ("dynamite", "Dynamite", "Dynamite is an explosive made from nitroglycerin, invented by Alfred Nobel in Sweden.", {"year": 2015, "tags": ["chemistry"]}, ["public"]),
    ("radium", "Radium", "Radium is a radioactive element isolated by Marie Curie and Pierre Curie from pitchblende.", {"year": 2020, "tags": ["chemistry", "physics"]}, ["public"]),
]
QUESTION = "Which element did the physicist born in Warsaw discover?"


@pytest.fixture(scope="module")
def store(minilm, spacy_extractor):
    with SurrealStore("mem://") as s:
        docs = [
            SourceDocument(key=key, title=title, text=text, source=f"{key}.txt", metadata=meta, access=access)
            for key, title, text, meta, access in CORPUS
        ]
        Ingestor(s, embedder=minilm, extractor=spacy_extractor).ingest(docs)
        yield s


@pytest.fixture(scope="module")
def retrievers(store, minilm, spacy_extractor):
    def build(mode, **options):
        extra = {"extractor": spacy_extractor} if mode == "hybrid" else {}
        return make_retriever(mode, store, embedder=minilm, **extra, **options)

    return build


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("k", [1, 3, 6])
def test_k_is_exact_and_scores_descend(retrievers, mode, k):
    result = retrievers(mode, candidates=40).search(QUESTION, k=k)
    assert len(result.documents) == k
    scores = [d.score for d in result.documents]
    assert scores == sorted(scores, reverse=True)
    assert len({d.id for d in result.documents}) == k
    assert result.mode == mode
    for doc in result.documents:
        assert doc.chunks and all(c.content for c in doc.chunks)


@pytest.mark.parametrize("mode", MODES)
def test_relevant_document_ranks_high(retrievers, mode):
    ids = [d.id for d in retrievers(mode).search("Who invented dynamite?", k=3).documents]
    assert {"nobel", "dynamite"} & set(ids[:2]), ids


def test_k_larger_than_store_returns_everything_found(retrievers):
    result = retrievers("chunk", candidates=100).search(QUESTION, k=50)
    assert len(result.documents) == len(CORPUS)


def test_threshold_drops_weak_chunks(retrievers):
    strong = retrievers("chunk", threshold=0.3).search(QUESTION, k=10)
    assert strong.documents and all(c.score >= 0.3 for d in strong.documents for c in d.chunks)
    assert len(strong.documents) < len(CORPUS)
    assert retrievers("chunk", threshold=0.99).search(QUESTION, k=5).documents == []


def test_group_by_chunk_returns_k_chunks(retrievers):
    result = retrievers("chunk", group_by="chunk").search(QUESTION, k=4)
    assert len(result.documents) == 4
    assert all(len(d.chunks) == 1 for d in result.documents)
    assert [d.score for d in result.documents] == [d.chunks[0].score for d in result.documents]


def test_aggregation_count_orders_by_hits(retrievers):
    result = retrievers("chunk", aggregate="count", candidates=30).search(QUESTION, k=5)
    scores = [d.score for d in result.documents]
    assert scores == sorted(scores, reverse=True)
    assert all(float(s).is_integer() and s >= 1 for s in scores)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("spec", "allowed"),
    [
        ({"metadata.year": {"$gte": 2000}}, {"vistula", "krakow", "baltic", "dynamite", "radium"}),
        ({"year": {"$lt": 1900}}, {"warsaw", "polonium", "nobel"}),
        ({"year": {"$between": [1898, 1903]}}, {"curie", "pierre", "polonium"}),
        ({"title": {"$in": ["Radium", "Polonium", "Warsaw"]}}, {"radium", "polonium", "warsaw"}),
        ({"tags": {"$contains": "chemistry"}}, {"curie", "polonium", "nobel", "dynamite", "radium"}),
        ({"$or": [{"title": "Krakow"}, {"metadata.tags": {"$contains": "sea"}}]}, {"krakow", "baltic"}),
        ({"$not": {"tags": {"$contains": "chemistry"}}, "year": {"$ne": 1596}}, {"pierre", "vistula", "krakow", "baltic"}),
        ({"id": {"$in": ["curie", "nobel"]}}, {"curie", "nobel"}),
    ],
)
def test_filters_apply_inside_the_query(retrievers, mode, spec, allowed):
    k = min(3, len(allowed))
    result = retrievers(mode, candidates=40).search(QUESTION, k=k, filters=spec)
    ids = {d.id for d in result.documents}
    assert ids <= allowed
    if mode in ("chunk", "hybrid", "graph"):  # every chunk is a vector candidate: k is always filled
        assert len(ids) == k


def test_datetime_range_filter(retrievers):
    past = dt.datetime(2000, 1, 1, tzinfo=dt.timezone.utc)
    assert len(retrievers("chunk").search(QUESTION, k=3, filters={"created_at": {"$gte": past}}).documents) == 3
    assert retrievers("chunk").search(QUESTION, k=3, filters={"created_at": {"$lt": past}}).documents == []


def test_access_labels_restrict_results(retrievers):
    result = retrievers("hybrid", access=["staff"]).search("rivers and cities in Poland", k=3)
    assert {d.id for d in result.documents} <= {"vistula", "krakow", "baltic"}
    assert len(result.documents) == 3


@pytest.mark.parametrize("key", ["title.sub", "", "metadata", "$where", "a..b", "x" * 300, "bad\udc80"])
def test_malformed_filter_keys_are_rejected(retrievers, key):
    with pytest.raises(FilterError):
        retrievers("chunk").search(QUESTION, filters={key: 1})


@pytest.mark.parametrize("key", ["x; REMOVE TABLE chunk", "metadata.a b", "a.`b`", "⟨x⟩", "-- comment"])
def test_hostile_filter_keys_are_bound_names_that_match_nothing(retrievers, store, key):
    assert retrievers("chunk").search(QUESTION, filters={key: 1}).documents == []
    assert key not in compile_filter({key: 1}).condition
    assert store.query("stats")[0]["chunks"] == len(CORPUS)


@pytest.mark.parametrize("mode", MODES)
def test_hostile_keys_and_values_are_literals(retrievers, store, mode):
    for spec in ({"vector": 1}, {"table": "chunk"}, {"title": "'; REMOVE TABLE chunk; --"}, {"title": {"$in": ["x` OR true"]}}):
        assert retrievers(mode).search(QUESTION, k=3, filters=spec).documents == []
    assert store.query("stats")[0]["chunks"] == len(CORPUS)  # tables and rows still there
    assert len(retrievers(mode).search(QUESTION, k=3).documents) == 3


def test_bad_filter_values_name_the_problem():
    with pytest.raises(FilterError, match=r"\$between"):
        compile_filter({"year": {"$between": [1]}})
    with pytest.raises(FilterError, match="unknown operator"):
        compile_filter({"year": {"$regex": ".*"}})
    with pytest.raises(FilterError, match="non-empty list"):
        compile_filter({"year": {"$in": []}})
    compiled = compile_filter({"title": "x'); DROP", "year": {"$gt": 3}})
    assert "x'); DROP" not in compiled.condition and "x'); DROP" in compiled.params.values()


def test_concept_provenance_names_the_matched_concepts(retrievers):
    result = retrievers("concept").search("Marie Curie", k=3)
    top = result.documents[0]
    # the question names the concept: match quality 1 (a name) x rarity in (0, 1]
    assert top.concepts and top.concepts[0].id == "marie curie" and 0 < top.concepts[0].score <= 1
    paths = [p for p in top.provenance if p.concept]
    assert paths and all(p.document_id == top.id for p in paths)
    chunk_ids = {c.id for c in top.chunks}
    assert all(p.chunk_id in chunk_ids for p in paths)
    assert "-> document " + top.id in paths[0].describe()


def test_hybrid_provenance_shows_each_channel(retrievers):
    result = retrievers("hybrid").search("Who invented dynamite in Sweden?", k=3)
    channels = {p.channel for d in result.documents for p in d.provenance}
    assert {"vector", "concept"} <= channels
    named = [p for d in result.documents for p in d.provenance if p.channel == "concept"]
    assert any(p.concept and p.concept.id in {"dynamite", "sweden"} for p in named)


def test_graph_walk_reaches_documents_through_shared_concepts(retrievers, store):
    result = retrievers("graph", max_df=6).search("Who discovered polonium?", k=6)
    walked = [p for d in result.documents for p in d.provenance if p.channel == "graph"]
    assert walked, "the walk reached no document"
    assert any(p.concept and p.concept.id == "polonium" for p in walked)
    for path in walked:
        assert path.chunk_id.startswith(f"{path.document_id}::")
    # a document the walk reached that neither names polonium nor is among the nearest chunks
    dense = {d.id for d in retrievers("chunk").search("Who discovered polonium?", k=3).documents}
    naming = {p.document_id for p in walked if p.concept}
    assert {p.document_id for p in walked} - dense - naming


@pytest.mark.parametrize("mode", MODES)
async def test_async_equals_sync(retrievers, mode):
    retriever = retrievers(mode)
    sync = retriever.search(QUESTION, k=4, filters={"year": {"$gte": 1800}})
    other = await retriever.asearch(QUESTION, k=4, filters={"year": {"$gte": 1800}})
    assert [(d.id, round(d.score, 5)) for d in sync.documents] == [(d.id, round(d.score, 5)) for d in other.documents]
    assert [c.id for d in sync.documents for c in d.chunks] == [c.id for d in other.documents for c in d.chunks]


def test_query_embedding_is_cached(retrievers):
    retriever = retrievers("chunk")
    first = retriever.search("a question asked twice", k=1)
    second = retriever.search("a question asked twice", k=1)
    assert first.embed_ms > 0 and second.embed_ms < first.embed_ms / 5


def test_published_concept_grouping_fails_on_3x(store, minilm):
    """The published Pattern 1 (SPLIT on the walked field, GROUP BY chunk only) groups wrongly on
    SurrealDB 3.x: per-chunk fields come back as arrays and documents repeat. Our query does not."""
    embedding = minilm.embed_query("Marie Curie").tolist()
    rows = store.query("search_concepts_published", {"embedding": embedding}, candidates=10, ef=80)[-1]
    docs = [row["doc"] for row in rows]
    broken = any(isinstance(row["index"], list) or isinstance(row["doc"], list) for row in rows) or len(docs) != len(
        {str(d) for d in docs}
    )
    assert broken, rows
    ours = make_retriever("concept", store, embedder=minilm, candidates=10).search("Marie Curie", k=10)
    assert len({d.id for d in ours.documents}) == len(ours.documents)
    assert all(isinstance(c.index, int) for d in ours.documents for c in d.chunks)


def test_unknown_mode_and_bad_k():
    with pytest.raises(ValueError, match="unknown mode"):
        make_retriever("magic", SurrealStore("mem://"))


@pytest.mark.parametrize("mode", MODES)
def test_cli_query_every_mode_json(tmp_path, minilm, capsys, mode):
    db = f"surrealkv://{tmp_path / 'kg'}"
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("\n".join(json.dumps({"id": k, "title": t, "text": x}) for k, t, x, _, _ in CORPUS), encoding="utf-8")
    assert cli_main(["ingest", str(corpus), "--db", db, "--no-progress", "--json"]) == 0
    capsys.readouterr()
    assert cli_main(["query", QUESTION, "--db", db, "--mode", mode, "-k", "2", "--json", "--explain"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["mode"] == mode and len(out["documents"]) == 2
    assert cli_main(["query", QUESTION, "--db", db, "--mode", mode, "--filter", '{"title": {"$gt": 5}}']) == 1
    assert "takes a string" in capsys.readouterr().err


def test_cli_eval_prints_recall_and_chart(tmp_path, capsys):
    db = f"surrealkv://{tmp_path / 'kg'}"
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("\n".join(json.dumps({"id": k, "title": t, "text": x}) for k, t, x, _, _ in CORPUS), encoding="utf-8")
    queries = tmp_path / "queries.jsonl"
    queries.write_text(
        "\n".join(
            json.dumps(q)
            for q in [
                {"id": "1", "question": "Who invented dynamite?", "gold_ids": ["nobel", "dynamite"]},
                {"id": "2", "question": "Which river flows through Warsaw?", "gold_ids": ["vistula"]},
                {"id": "3", "question": "What did Marie Curie discover?", "gold_ids": ["polonium", "radium"]},
            ]
        ),
        encoding="utf-8",
    )
    chart = tmp_path / "chart.png"
    argv = ["eval", "--corpus", str(corpus), "--queries", str(queries), "--db", db, "--mode", "chunk", "--mode", "hybrid"]
    assert cli_main([*argv, "-k", "1,5", "--json", "--chart", str(chart)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out["modes"]) == {"chunk", "hybrid"}
    for row in out["modes"].values():
        assert 0 <= row["recall@1"] <= row["recall@5"] <= 100
        assert row["recall@5"] >= 60
        assert row["p50_ms"] > 0 and row["p95_ms"] >= row["p50_ms"]
    # The same scoring beside exact cosine and BM25 over the store's chunks; every gold id is stored.
    assert out["format"] == "records" and out["gold_not_found"] == 0
    assert set(out["baselines"]) == {"numpy exact cosine", "BM25 (bm25s)"}
    assert all(row["recall@5"] >= 60 and "by_type" not in row for row in out["baselines"].values())
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    queries.write_text('{"question": "no gold"}\n', encoding="utf-8")
    assert cli_main(argv) == 1
    assert "gold_ids" in capsys.readouterr().err


def test_weighted_fusion_fills_k_and_orders(retrievers):
    result = retrievers("hybrid", fusion="weighted").search(QUESTION, k=4)
    assert len(result.documents) == 4
    scores = [d.score for d in result.documents]
    assert scores == sorted(scores, reverse=True) and scores[0] <= 3.0 + 1e-9  # three channels, each at most 1


def test_hybrid_without_fulltext_has_no_text_paths(retrievers):
    result = retrievers("hybrid", fulltext=False).search(QUESTION, k=4)
    assert len(result.documents) == 4
    assert "text" not in {p.channel for d in result.documents for p in d.provenance}


def _text_channel_documents(retriever, question):
    result = retriever.search(question, k=len(CORPUS))
    return {p.document_id for d in result.documents for p in d.provenance if p.channel == "text"}


def test_bm25_leaves_out_words_found_in_many_chunks(retrievers):
    # Ten one-chunk documents: "flows" is in 1 chunk, "river" in 2, "poland" in 5.
    question = "Which river flows through Poland?"
    everything = _text_channel_documents(retrievers("hybrid", text_max_df=1.0), question)
    assert everything == {"vistula", "warsaw", "polonium", "krakow", "baltic"}
    assert _text_channel_documents(retrievers("hybrid", text_max_df=0.2), question) == {"vistula", "warsaw"}
    # The budget takes words rarest first: "flows" (1 chunk) fits, "river" (1 + 2) does not.
    assert _text_channel_documents(retrievers("hybrid", text_max_df=1.0, text_max_matches=2), question) == {"vistula"}


def test_bm25_keeps_the_rarest_word_within_its_budget_and_drops_unknown_ones(retrievers):
    strict = retrievers("hybrid", text_max_df=0.1)
    # Every word is common: the rarest one is still searched.
    assert _text_channel_documents(strict, "Poland?") == {"warsaw", "polonium", "vistula", "krakow", "baltic"}
    # A word no chunk holds does not count as the rarest one.
    assert _text_channel_documents(strict, "Zzyzx flows through Poland") == {"vistula"}
    assert _text_channel_documents(strict, "Zzyzx qwertyuiop") == set()
    # ... but never above the match budget: "poland" is in 5 chunks, so a budget of 4 searches nothing
    # (a question of common words must not cost a scan of a large store's postings).
    assert _text_channel_documents(retrievers("hybrid", text_max_df=0.1, text_max_matches=4), "Poland?") == set()
    assert _text_channel_documents(retrievers("hybrid", text_max_df=0.1, text_max_matches=5), "Poland?") == {
        "warsaw", "polonium", "vistula", "krakow", "baltic"
    }


def test_hybrid_concept_channel_leaves_out_concepts_in_more_chunks_than_its_bound(retrievers):
    # "poland" is mentioned by 5 chunks, "polonium" by fewer: a bound of 4 walks polonium's chunks only.
    def concepts(**config):
        result = retrievers("hybrid", **config).search("Is Polonium named after Poland?", k=10)
        return {p.concept.id for d in result.documents for p in d.provenance if p.channel == "concept" and p.concept}

    assert {"poland", "polonium"} <= concepts(concept_max_chunks=5)
    bounded = concepts(concept_max_chunks=4)
    assert "polonium" in bounded and "poland" not in bounded


@pytest.mark.parametrize("mode", ["chunk", "hybrid"])
async def test_reranker_sees_the_pool_and_k_is_cut(store, minilm, retrievers, mode):
    from surreal_kgrag import MMRReranker

    class Recording(MMRReranker):
        seen: list[int] = []

        def rerank(self, query, documents, **kw):
            self.seen.append(len(documents))
            return super().rerank(query, documents, **kw)

        async def arerank(self, query, documents, **kw):
            self.seen.append(len(documents))
            return await super().arerank(query, documents, **kw)

    reranker = Recording(store, embedder=minilm, lambda_mult=0.3)
    retriever = retrievers(mode, reranker=reranker, rerank_pool=8)
    plain = retrievers(mode).search(QUESTION, k=3)
    result = retriever.search(QUESTION, k=3)
    assert len(result.documents) == 3 and reranker.seen == [8]
    assert {d.id for d in result.documents} <= {d.id for d in retrievers(mode).search(QUESTION, k=8).documents}
    assert [d.id for d in result.documents] != [d.id for d in plain.documents] or result.rerank_ms > 0
    other = await retriever.asearch(QUESTION, k=3)
    assert [d.id for d in other.documents] == [d.id for d in result.documents]


def test_a_long_question_walks_from_a_bounded_number_of_concepts(store, minilm, sent_steps):
    """Each concept a question names is a walk in hybrid_concepts.surql, read once a search: a
    question naming hundreds walks from the first MAX_QUESTION_CONCEPTS of them; an ordinary one from
    all it names."""
    names = [f"name {i:03d}" for i in range(300)]
    extractor = CallableConceptExtractor(lambda text: names if text.startswith("Long") else ["poland", "polonium"])
    steps = sent_steps(store)
    retriever = make_retriever("hybrid", store, embedder=minilm, extractor=extractor)

    def concept_ids(question):
        steps.clear()
        retriever.search(question, k=3)
        return [params["concept_ids"] for name, params, _ in steps if name == "hybrid_concepts"]

    sent = concept_ids("Long question " + "word " * 1000)
    assert len(sent) == 1 and all(ids == [RecordID("concept", n) for n in names[:MAX_QUESTION_CONCEPTS]] for ids in sent)
    sent = concept_ids("Is Polonium named after Poland?")
    assert len(sent) == 1 and all(ids == [RecordID("concept", "poland"), RecordID("concept", "polonium")] for ids in sent)


@pytest.mark.parametrize("option", ["concept_max_chunks", "text_max_matches", "chunks_per_document"])
def test_hybrid_limits_have_upper_bounds(option):
    with pytest.raises(ValidationError):
        HybridConfig(**{option: 10**9})


def test_options_beside_a_config_override_it_and_are_checked(store, minilm):
    """Options passed with a ``config`` were dropped: ``k`` beside a config kept the config's k, and
    an option the mode does not have (graph's ``extractor``) passed silently."""
    retriever = make_retriever("graph", store, embedder=minilm, config=GraphConfig(k=3, max_df=7), k=8)
    assert (retriever.config.k, retriever.config.max_df) == (8, 7)
    assert len(retriever.search("Is Polonium named after Poland?").documents) > 3
    with pytest.raises(ValidationError, match="extractor"):
        make_retriever("graph", store, embedder=minilm, config=GraphConfig(), extractor="en_core_web_sm")
    with pytest.raises(ValidationError, match="extractor"):
        make_retriever("concept", store, embedder=minilm, extractor="en_core_web_sm")
