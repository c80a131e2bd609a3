"""Embedding adapters: real MiniLM, a real local OpenAI-compatible HTTP server, LangChain and LlamaIndex test models."""

from __future__ import annotations

import asyncio
import hashlib
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from json_server import JsonServer, embeddings_payload

from surreal_kgrag.embed import (
    DEFAULT_MODEL,
    LangChainEmbedder,
    LlamaIndexEmbedder,
    OpenAIEmbedder,
    SentenceTransformerEmbedder,
    resolve_embedder,
)
from surreal_kgrag.errors import ConfigurationError, KGRagError, ModelNotAvailableError


def assert_unit_rows(vectors: np.ndarray, rows: int, dimension: int) -> None:
    assert vectors.dtype == np.float32
    assert vectors.shape == (rows, dimension)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


# -- sentence-transformers (MiniLM) ---------------------------------------------------------------


def test_minilm_shape_name_and_normalisation(minilm):
    assert minilm.name == DEFAULT_MODEL == "sentence-transformers/all-MiniLM-L6-v2"
    assert minilm.dimension == 384
    vectors = minilm.embed_documents(["Jeff Porcaro played drums in Toto.", "", "Paris is in France."])
    assert_unit_rows(vectors, 3, 384)
    query = minilm.embed_query("Who was the drummer of Toto?")
    assert query.dtype == np.float32 and query.shape == (384,)
    assert np.linalg.norm(query) == pytest.approx(1.0, abs=1e-5)


def test_minilm_semantic_similarity(minilm):
    anchor, close, far = minilm.embed_documents(
        ["A man is playing a guitar.", "Someone plays a musical instrument.", "The stock market fell sharply today."]
    )
    assert anchor @ close > anchor @ far + 0.2
    query = minilm.embed_query("Which band did the drummer join?")
    drummer, recipe = minilm.embed_documents(["The drummer joined the rock band Toto.", "Whisk the eggs with sugar."])
    assert query @ drummer > query @ recipe


def test_minilm_batch_equals_single(minilm):
    texts = ["Steely Dan released Katy Lied.", "Honolulu is in Hawaii.", "x", "A much longer sentence " * 20]
    batch = minilm.embed_documents(texts)
    single = np.stack([minilm.embed_documents([t])[0] for t in texts])
    np.testing.assert_allclose(batch, single, atol=1e-5)
    np.testing.assert_allclose(minilm.embed_query(texts[0]), batch[0], atol=1e-5)


async def test_minilm_async_equals_sync(minilm):
    texts = ["Barack Obama was born in Honolulu.", "Angela Merkel lives in Berlin."]
    np.testing.assert_allclose(await minilm.aembed_documents(texts), minilm.embed_documents(texts), atol=1e-5)
    np.testing.assert_allclose(await minilm.aembed_query("Obama"), minilm.embed_query("Obama"), atol=1e-5)


def test_minilm_empty_and_invalid_inputs(minilm):
    assert minilm.embed_documents([]).shape == (0, 384)
    with pytest.raises(ConfigurationError, match="embed_query"):
        minilm.embed_documents("one text")
    with pytest.raises(ConfigurationError, match="text 1 is a int"):
        minilm.embed_documents(["fine", 42])
    with pytest.raises(ConfigurationError):
        minilm.embed_query(None)  # type: ignore[arg-type]


def test_minilm_aliases_share_one_loaded_model(minilm):
    other = SentenceTransformerEmbedder("sentence-transformers/all-MiniLM-L6-v2", batch_size=8)
    assert other.name == minilm.name
    assert other.model is minilm.model
    wrapped = resolve_embedder(minilm.model)
    assert isinstance(wrapped, SentenceTransformerEmbedder)
    assert wrapped.name == DEFAULT_MODEL and wrapped.dimension == 384


def test_wrappers_of_one_model_object_encode_one_at_a_time(minilm):
    """Embedders around one SentenceTransformer object (the tool dispatcher resolves its embedder
    twice) take turns on it: its fast tokenizer fails ("Already borrowed") when two threads use
    it at once. Counted at the model's encode_document, slowed so that overlapping calls meet."""
    model = minilm.model
    original = model.encode_document
    inside, most = [0], [0]
    count = threading.Lock()

    def counting(*args, **kwargs):
        with count:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        try:
            time.sleep(0.01)
            return original(*args, **kwargs)
        finally:
            with count:
                inside[0] -= 1

    texts = ["Marie Curie was born in Warsaw.", "The Eiffel Tower is in Paris.", "Honolulu is in Hawaii."]
    expected = minilm.embed_documents(texts)
    wrappers = [SentenceTransformerEmbedder(model), resolve_embedder(model), minilm]
    model.encode_document = counting
    try:
        with ThreadPoolExecutor(6) as pool:
            results = list(pool.map(lambda i: wrappers[i % len(wrappers)].embed_documents(texts), range(24)))
    finally:
        del model.encode_document
    assert most[0] == 1
    for vectors in results:
        np.testing.assert_allclose(vectors, expected, atol=1e-5)


def test_unknown_model_fails_on_first_use_with_instructions(tmp_path):
    embedder = SentenceTransformerEmbedder("no-such-org/no-such-model", local_files_only=True)  # cheap: nothing loaded
    with pytest.raises(ModelNotAvailableError, match="local folder path"):
        embedder.embed_documents(["text"])
    with pytest.raises(ModelNotAvailableError, match="not available"):
        SentenceTransformerEmbedder(str(tmp_path / "missing")).dimension


def test_an_environment_without_sentence_transformers_says_which_extra_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # as if it were not installed
    embedder = SentenceTransformerEmbedder("no-such-org/not-loaded-yet", local_files_only=True)
    with pytest.raises(ModelNotAvailableError, match=r"surreal-kgrag\[sentence-transformers\]"):
        embedder.embed_query("text")


@pytest.mark.parametrize(
    "options", [{"batch_size": 0}, {"batch_size": "8"}, {"device": ""}, {"model": ""}, {"model": 3.5}]
)
def test_sentence_transformer_settings_are_checked(options):
    with pytest.raises(ConfigurationError):
        SentenceTransformerEmbedder(**options)


# -- OpenAI-compatible server ---------------------------------------------------------------------


def fake_vector(text: str, size: int) -> list[float]:
    digest = hashlib.sha256(text.encode()).digest()
    return [digest[i % len(digest)] - 127.5 for i in range(size)]


SIZE = 12  # the vectors' size when a request names no dimensions


def embeddings(path: str, body: dict) -> tuple[int, dict]:
    """POST /v1/embeddings in OpenAI's format, vectors derived from each text, listed in reverse
    (clients must order by "index", not by position); a text "__drop_me__" gets no vector."""
    if path != "/v1/embeddings":
        return 404, {"error": {"message": f"no route {path}"}}
    inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
    size = body.get("dimensions", SIZE)
    kept = [(i, text) for i, text in enumerate(inputs) if text != "__drop_me__"]
    payload = embeddings_payload([fake_vector(text, size) for _, text in kept], body["model"])
    for row, (i, _) in zip(payload["data"], kept):
        row["index"] = i
    payload["data"].reverse()
    payload["usage"] = {"prompt_tokens": len(inputs), "total_tokens": len(inputs)}
    return 200, payload


def expected(texts: list[str], size: int = SIZE) -> np.ndarray:
    vectors = np.array([fake_vector(t, size) for t in texts], dtype=np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


@pytest.fixture
def openai_server():
    with JsonServer(embeddings) as server:
        yield server


def openai_embedder(server: JsonServer, **options) -> OpenAIEmbedder:
    return OpenAIEmbedder("test-embed", base_url=server.base_url, api_key="sk-test", **options)


def test_openai_batches_and_orders_by_index(openai_server):
    embedder = openai_embedder(openai_server, batch_size=2)
    texts = ["alpha", "beta", "gamma", "delta", "epsilon"]
    vectors = embedder.embed_documents(texts)
    np.testing.assert_allclose(vectors, expected(texts), atol=1e-6)
    assert_unit_rows(vectors, 5, 12)
    assert [r["input"] for r in openai_server.requests] == [["alpha", "beta"], ["gamma", "delta"], ["epsilon"]]
    assert all(r["model"] == "test-embed" and r["encoding_format"] == "float" for r in openai_server.requests)
    assert all("dimensions" not in r for r in openai_server.requests)
    assert openai_server.headers[0].get("Authorization") == "Bearer sk-test"
    assert embedder.name == "openai/test-embed"
    embedder.close()


async def test_openai_async_client_is_closed_by_aclose(openai_server):
    embedder = openai_embedder(openai_server)
    vectors = await embedder.aembed_documents(["alpha", "beta"])
    np.testing.assert_allclose(vectors, expected(["alpha", "beta"]), atol=1e-6)
    client = embedder._async_clients[asyncio.get_running_loop()]
    await embedder.aclose()
    assert client.is_closed() and not embedder._async_clients
    np.testing.assert_allclose(await embedder.aembed_query("gamma"), expected(["gamma"])[0], atol=1e-6)  # a new client
    await embedder.aclose()


def test_openai_dimension_is_discovered_lazily(openai_server):
    embedder = openai_embedder(openai_server)
    assert openai_server.requests == []  # constructing makes no request
    assert embedder.embed_documents([]).shape == (0, 0)  # unknown dimension, still no request
    assert embedder.dimension == 12
    assert len(openai_server.requests) == 1
    assert embedder.dimension == 12
    assert len(openai_server.requests) == 1
    assert embedder.embed_documents([]).shape == (0, 12)


def test_openai_dimensions_option_is_sent_and_known_up_front(openai_server):
    embedder = openai_embedder(openai_server, dimensions=7)
    assert embedder.dimension == 7
    assert openai_server.requests == []
    query = embedder.embed_query("hello")
    np.testing.assert_allclose(query, expected(["hello"], 7)[0], atol=1e-6)
    assert openai_server.requests[0]["dimensions"] == 7


async def test_openai_async_matches_sync(openai_server):
    embedder = openai_embedder(openai_server, batch_size=2)
    texts = ["one", "two", "three"]
    np.testing.assert_allclose(await embedder.aembed_documents(texts), embedder.embed_documents(texts), atol=1e-6)
    np.testing.assert_allclose(await embedder.aembed_query("one"), embedder.embed_query("one"), atol=1e-6)
    assert (await embedder.aembed_documents([])).shape == (0, 12)


def test_openai_wrong_number_of_vectors_is_an_error(openai_server):
    embedder = openai_embedder(openai_server)
    with pytest.raises(KGRagError, match="returned 1 embeddings for 2 inputs"):
        embedder.embed_documents(["kept", "__drop_me__"])


def test_openai_without_key_is_a_configuration_error(openai_server, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_ADMIN_KEY", raising=False)
    embedder = OpenAIEmbedder(base_url=openai_server.base_url)
    with pytest.raises(ConfigurationError, match="api_key"):
        embedder.embed_query("x")


@pytest.mark.parametrize(
    "options", [{"dimensions": 0}, {"batch_size": -1}, {"timeout": 0}, {"max_retries": -1}, {"model": ""}]
)
def test_openai_settings_are_checked(options):
    with pytest.raises(ConfigurationError):
        OpenAIEmbedder(**options)


# -- LangChain and LlamaIndex ---------------------------------------------------------------------


def test_langchain_adapter():
    from langchain_core.embeddings import DeterministicFakeEmbedding

    fake = DeterministicFakeEmbedding(size=16)
    embedder = LangChainEmbedder(fake)
    assert embedder.name == "langchain/DeterministicFakeEmbedding"
    texts = ["a", "b", "c"]
    vectors = embedder.embed_documents(texts)
    assert_unit_rows(vectors, 3, 16)
    raw = np.array(fake.embed_documents(texts), dtype=np.float32)
    np.testing.assert_allclose(vectors, raw / np.linalg.norm(raw, axis=1, keepdims=True), atol=1e-6)
    assert embedder.embed_query("a").shape == (16,)
    assert embedder.dimension == 16


async def test_langchain_adapter_async():
    from langchain_core.embeddings import DeterministicFakeEmbedding

    embedder = LangChainEmbedder(DeterministicFakeEmbedding(size=16))
    np.testing.assert_allclose(await embedder.aembed_documents(["a", "b"]), embedder.embed_documents(["a", "b"]), atol=1e-6)
    np.testing.assert_allclose(await embedder.aembed_query("q"), embedder.embed_query("q"), atol=1e-6)


async def test_llama_index_adapter():
    from llama_index.core.embeddings import MockEmbedding

    embedder = LlamaIndexEmbedder(MockEmbedding(embed_dim=8))
    assert embedder.name == "llama_index/MockEmbedding"
    vectors = embedder.embed_documents(["a", "b"])
    assert_unit_rows(vectors, 2, 8)
    np.testing.assert_allclose(vectors, 1 / np.sqrt(8), atol=1e-6)
    assert embedder.dimension == 8
    assert_unit_rows(await embedder.aembed_documents(["a", "b", "c"]), 3, 8)
    query = await embedder.aembed_query("q")
    assert query.shape == (8,) and np.linalg.norm(query) == pytest.approx(1.0)
    assert embedder.embed_documents([]).shape == (0, 8)


class BrokenBackend:
    """A LangChain-style model that answers with the wrong shapes."""

    def __init__(self, answer):
        self.answer = answer

    def embed_documents(self, texts):
        return self.answer

    def embed_query(self, text):
        return self.answer


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ([[1.0, 2.0]], r"shape \(1, 2\) for 2 texts"),
        ([[1.0, 2.0], [3.0]], "not a matrix of numbers"),
        ([[1.0, float("nan")], [1.0, 2.0]], "NaN"),
        ([[], []], r"shape \(2, 0\)"),
    ],
)
def test_backend_returning_wrong_shapes_is_an_error(answer, message):
    with pytest.raises(KGRagError, match=message):
        LangChainEmbedder(BrokenBackend(answer), name="broken").embed_documents(["x", "y"])


def test_dimension_change_is_an_error():
    embedder = LangChainEmbedder(BrokenBackend([[1.0, 2.0, 3.0]]), name="broken")
    embedder.embed_documents(["x"])
    embedder.embeddings.answer = [[1.0, 2.0]]
    with pytest.raises(KGRagError, match="2-dimensional vectors after 3-dimensional"):
        embedder.embed_documents(["x"])


def test_zero_vectors_stay_zero():
    vectors = LangChainEmbedder(BrokenBackend([[0.0, 0.0], [3.0, 4.0]]), name="zeros").embed_documents(["x", "y"])
    np.testing.assert_allclose(vectors, [[0.0, 0.0], [0.6, 0.8]])


# -- resolve_embedder -----------------------------------------------------------------------------


class CustomEmbedder:
    """A user's own Embedder; resolving it must not touch ``dimension``."""

    name = "custom"

    @property
    def dimension(self) -> int:
        raise AssertionError("resolve_embedder read .dimension")

    def embed_documents(self, texts):
        return np.zeros((len(texts), 2), dtype=np.float32)

    def embed_query(self, text):
        return np.zeros(2, dtype=np.float32)

    async def aembed_documents(self, texts):
        return self.embed_documents(texts)

    async def aembed_query(self, text):
        return self.embed_query(text)


def test_resolve_embedder(minilm):
    default = resolve_embedder(None)
    assert isinstance(default, SentenceTransformerEmbedder) and default.name == DEFAULT_MODEL
    named = resolve_embedder("all-MiniLM-L6-v2")
    assert isinstance(named, SentenceTransformerEmbedder) and named.name == DEFAULT_MODEL
    openai = resolve_embedder("openai:text-embedding-3-large")
    assert isinstance(openai, OpenAIEmbedder) and openai.model == "text-embedding-3-large"
    assert resolve_embedder(minilm) is minilm
    custom = CustomEmbedder()
    assert resolve_embedder(custom) is custom


def test_resolve_framework_models():
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from llama_index.core.embeddings import MockEmbedding

    assert isinstance(resolve_embedder(DeterministicFakeEmbedding(size=4)), LangChainEmbedder)
    assert isinstance(resolve_embedder(MockEmbedding(embed_dim=4)), LlamaIndexEmbedder)
    assert isinstance(resolve_embedder(BrokenBackend([[1.0]])), LangChainEmbedder)  # duck-typed


@pytest.mark.parametrize("spec", ["openai:", "", 42, object()])
def test_resolve_embedder_rejects_unusable_settings(spec):
    with pytest.raises(ConfigurationError):
        resolve_embedder(spec)


def test_loaded_models_are_out_of_the_garbage_collectors_walks(minilm, spacy_nlp):
    """A model's objects live as long as the process: once loaded they are frozen (gc.freeze), so a
    full collection, which Python runs now and then in the middle of a search, no longer walks them
    (with MiniLM and spaCy in its oldest generation one took 499 ms on a quiet machine)."""
    import gc

    tracked = {id(o) for o in gc.get_objects()}  # every generation but the frozen one
    tokenizer = minilm.model.tokenizer
    for loaded in (minilm.model, tokenizer, spacy_nlp, spacy_nlp.pipeline[0][1]):
        assert gc.is_tracked(loaded) and id(loaded) not in tracked, type(loaded).__name__
    assert gc.get_freeze_count() > 100_000
