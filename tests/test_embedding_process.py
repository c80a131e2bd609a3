"""A long ingest embeds its documents in a child process (surreal_kgrag.embed.process): the vectors
are the ones the parent computes, the child ends with the run, and a child that fails or dies loses
nothing (the parent embeds the rest)."""

from __future__ import annotations

import json
import logging
import os
import random
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest

from surreal_kgrag import ConfigurationError, SurrealStore
from surreal_kgrag.embed import SentenceTransformerEmbedder, process
from surreal_kgrag.embed.process import ProcessEmbedding, start_mode
from surreal_kgrag.ingest import IngestConfig, Ingestor

PEOPLE = ["Marie Curie", "Pierre Curie", "Alfred Nobel", "Irene Joliot-Curie", "Ernest Rutherford", "Lise Meitner"]
PLACES = ["Warsaw", "Paris", "Stockholm", "Cambridge", "Vienna", "Berlin"]
THINGS = ["polonium", "radium", "the Nobel Prize in Physics", "radioactivity", "the Sorbonne", "uranium salts"]


def documents(count: int, sentences: int) -> list[str]:
    """``count`` documents of ``sentences`` sentences each, mentioning people, places and things
    that recur across documents (10 chunks a document at 60 sentences)."""
    texts = []
    for seed in range(count):
        rng = random.Random(seed)
        lines = [
            f"In {1890 + rng.randrange(40)} {rng.choice(PEOPLE)} studied {rng.choice(THINGS)} in {rng.choice(PLACES)} "
            f"with {rng.choice(PEOPLE)}, and wrote about {rng.choice(THINGS)} (note {seed}-{i})."
            for i in range(sentences)
        ]
        texts.append(" ".join(lines))
    return texts


def stored_vectors(store: SurrealStore) -> dict[str, np.ndarray]:
    rows = store.query_text("test: vectors", "SELECT record::id(id) AS id, embedding FROM chunk;")[-1]
    return {row["id"]: np.asarray(row["embedding"], dtype=np.float32) for row in rows}


class ChildCalls:
    """Counts what the real child answered (the calls go through to it) and remembers its pid."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, after_first: Any = None) -> None:
        self.answered = 0
        self.pids: list[int] = []
        ask, start = ProcessEmbedding._ask, ProcessEmbedding._start

        def counted_ask(embedding: ProcessEmbedding, texts: list[str], limit: float) -> np.ndarray:
            vectors = ask(embedding, texts, limit)
            self.answered += len(texts)
            if after_first is not None and self.answered == len(texts):
                after_first(embedding)
            return vectors

        def remembered_start(embedding: ProcessEmbedding) -> None:
            start(embedding)
            if embedding._child is not None:
                self.pids.append(embedding._child.pid)

        monkeypatch.setattr(ProcessEmbedding, "_ask", counted_ask)
        monkeypatch.setattr(ProcessEmbedding, "_start", remembered_start)


def ingest(minilm: Any, spacy_extractor: Any, texts: list[str], *, process: bool) -> SurrealStore:
    store = SurrealStore("mem://")
    config = IngestConfig(embedding_process=process, batch_chunks=16, show_progress=False)
    summary = Ingestor(store, embedder=minilm, extractor=spacy_extractor, config=config).ingest_texts(
        texts, ids=[f"d{i}" for i in range(len(texts))]
    )
    assert summary.failures == [] and summary.added == len(texts)
    vectors = stored_vectors(store)
    assert len(vectors) == summary.chunks and all(v.shape == (384,) for v in vectors.values())  # every chunk has its vector
    return store


def wait_until_ready(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hold the first batches until the child is ready (or has failed), so a short run uses it."""
    embed = ProcessEmbedding.embed_documents

    def patient(embedding: ProcessEmbedding, texts: Any) -> np.ndarray:
        if embedding._child is not None:
            embedding._settled.wait(60)
        return embed(embedding, texts)

    monkeypatch.setattr(ProcessEmbedding, "embed_documents", patient)


def test_the_child_embeds_what_the_parent_would_and_ends_with_the_run(minilm, spacy_extractor, monkeypatch):
    texts = documents(4, 60)
    calls = ChildCalls(monkeypatch)
    wait_until_ready(monkeypatch)
    with_child = stored_vectors(ingest(minilm, spacy_extractor, texts, process=True))
    in_parent = stored_vectors(ingest(minilm, spacy_extractor, texts, process=False))

    assert len(calls.pids) == 1 and calls.answered >= len(with_child) >= 40
    assert not os.path.exists(f"/proc/{calls.pids[0]}") or _is_zombie(calls.pids[0])
    assert with_child.keys() == in_parent.keys()
    worst = max(float(np.abs(with_child[key] - in_parent[key]).max()) for key in with_child)
    assert worst < 1e-5


def test_a_child_that_dies_mid_run_loses_nothing(minilm, spacy_extractor, monkeypatch, caplog):
    texts = documents(4, 60)
    calls = ChildCalls(monkeypatch, after_first=lambda embedding: os.kill(embedding._child.pid, signal.SIGKILL))
    wait_until_ready(monkeypatch)
    with caplog.at_level(logging.WARNING, logger="surreal_kgrag.embed.process"):
        vectors = stored_vectors(ingest(minilm, spacy_extractor, texts, process=True))
    reference = stored_vectors(ingest(minilm, spacy_extractor, texts, process=False))

    assert 0 < calls.answered < len(reference)  # the child answered the first batch only
    assert "embedding in this process from now on" in caplog.text
    assert vectors.keys() == reference.keys()
    assert max(float(np.abs(vectors[key] - reference[key]).max()) for key in vectors) < 1e-5


@pytest.mark.skipif(not hasattr(signal, "SIGSTOP"), reason="stopping a process takes SIGSTOP (POSIX)")
def test_a_child_that_stops_answering_is_stopped_in_time_and_loses_nothing(minilm, caplog):
    with pytest.raises(ConfigurationError, match="timeout must be a positive number"):
        ProcessEmbedding(minilm, minilm.process_spec(), "now", timeout=0)
    # a batch larger than a pipe's buffer: the write to a stopped child blocks too, not only the read
    texts = [text[:1000] for text in documents(120, 12)]
    assert len(json.dumps(texts)) > 100_000
    with ProcessEmbedding(minilm, minilm.process_spec(), "now", timeout=0.5) as embedding:
        assert embedding.wait_until_ready(120)
        child = embedding._child
        os.kill(child.pid, signal.SIGSTOP)
        with caplog.at_level(logging.WARNING, logger="surreal_kgrag.embed.process"):
            started = time.monotonic()
            vectors = embedding.embed_documents(texts)
            waited = time.monotonic() - started
        assert child.poll() is not None and not embedding.in_child  # killed, and the texts embedded here
        assert "did not answer within 6.5 s" in caplog.text
        assert 6.5 <= waited < 60
    assert np.abs(vectors - minilm.embed_documents(texts)).max() < 1e-5


def test_a_question_is_not_held_behind_a_batch_and_a_forked_process_leaves_the_child_alone(minilm, monkeypatch):
    asked: list[Any] = []
    ask = ProcessEmbedding._ask
    monkeypatch.setattr(ProcessEmbedding, "_ask", lambda embedding, texts, limit: asked.append(texts) or ask(embedding, texts, limit))
    question = "Where did Marie Curie study polonium?"
    with ProcessEmbedding(minilm, minilm.process_spec(), "now", threads=1, timeout=600) as embedding:
        assert embedding.wait_until_ready(120)
        # while the child embeds a long batch, a question is embedded here at once (not after the
        # batch, nor after its timeout)
        texts = documents(600, 4)
        with ThreadPoolExecutor(1) as pool:
            batch = pool.submit(embedding.embed_documents, texts)
            while not embedding._batch and not batch.done():
                time.sleep(0.001)
            vector = embedding.embed_query(question)
            assert not batch.done()  # the question did not wait for the batch
            vectors = batch.result()
        assert asked == [texts] and embedding.in_child
        assert np.abs(vector - minilm.embed_query(question)).max() < 1e-5
        assert np.abs(vectors[:3] - minilm.embed_documents(texts[:3])).max() < 1e-5
        # between batches, questions go to the child
        assert np.abs(embedding.embed_query(question) - vector).max() < 1e-5 and asked[-1] == {"query": question}
        # a process forked from this one does not share the child's pipes: it embeds by itself, and
        # its close() leaves the child to this process
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the forked process
            try:
                seen = [embedding.in_child, embedding.embeds_elsewhere]
                embedding.close()
                os.write(write, json.dumps(seen).encode())
            finally:
                os._exit(0)
        os.close(write)
        os.waitpid(pid, 0)
        assert json.loads(os.read(read, 1024)) == [False, False]
        os.close(read)
        assert embedding.in_child and embedding._child.poll() is None
        assert np.abs(embedding.embed_query(question) - vector).max() < 1e-5 and len(asked) == 3


def test_a_child_that_does_not_load_the_model_in_time_is_stopped(minilm, monkeypatch, caplog):
    monkeypatch.setattr(process, "LOAD_TIMEOUT", 0.5)  # importing torch alone takes longer
    with (
        caplog.at_level(logging.WARNING, logger="surreal_kgrag.embed.process"),
        ProcessEmbedding(minilm, minilm.process_spec(), "now") as embedding,
    ):
        child = embedding._child
        assert not embedding.wait_until_ready(120)
        assert child.poll() is not None and child.stdout.closed
        assert np.abs(embedding.embed_documents(["radium", "polonium"]) - minilm.embed_documents(["radium", "polonium"])).max() < 1e-5
    assert "did not load the model within 0.5 s" in caplog.text


def test_a_child_that_cannot_load_the_model_is_reported_and_the_parent_embeds(minilm, spacy_extractor, monkeypatch, caplog):
    spec = {**minilm.process_spec(), "model": "/nonexistent/model-folder", "local_files_only": True}
    monkeypatch.setattr(SentenceTransformerEmbedder, "process_spec", lambda self: spec)
    calls = ChildCalls(monkeypatch)
    wait_until_ready(monkeypatch)
    with caplog.at_level(logging.WARNING, logger="surreal_kgrag.embed.process"):
        store = ingest(minilm, spacy_extractor, documents(2, 60), process=True)

    assert calls.answered == 0 and len(calls.pids) == 1
    assert "/nonexistent/model-folder" in caplog.text
    assert len(stored_vectors(store)) >= 20


def test_when_a_run_uses_a_child(minilm):
    assert start_mode(minilm, True) == "now"
    assert start_mode(minilm, False) is None
    assert start_mode(minilm, None) == "auto"  # this machine has more than 4 GB
    assert start_mode(SentenceTransformerEmbedder(minilm.model), True) is None  # a loaded model cannot be sent
    assert start_mode(object(), True) is None


def _is_zombie(pid: int) -> bool:
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().split(") ", 1)[1].startswith("Z")
