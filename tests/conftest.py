"""Shared fixtures: the real models, loaded once per test session."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def minilm():
    from surreal_kgrag.embed import SentenceTransformerEmbedder

    embedder = SentenceTransformerEmbedder("all-MiniLM-L6-v2")
    embedder.dimension  # load now, so the first test using it is not the one that pays
    return embedder


@pytest.fixture(scope="session")
def spacy_nlp():
    from surreal_kgrag.extract import load_spacy

    return load_spacy("auto")


@pytest.fixture(scope="session")
def spacy_extractor(spacy_nlp):
    from surreal_kgrag.extract import SpacyConceptExtractor

    return SpacyConceptExtractor(spacy_nlp)


@pytest.fixture
def ctrl_c_raises():
    """Ctrl-C (``_thread.interrupt_main``) raises KeyboardInterrupt in the main thread, as it does in
    a user's process: an earlier test in the session (an event loop runner, a server library) may
    have left its own SIGINT handler installed."""
    import signal

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.fixture
def sent_steps(monkeypatch):
    """``record(store)``: the list of ``(name, params, placeholders)`` of every query ``store`` runs
    from then on, filled as they run (every query a plan sends goes through ``query_many``)."""

    def record(store):
        sent: list[tuple] = []
        query_many = store.query_many

        def recorded(steps):
            sent.extend(steps)
            return query_many(steps)

        monkeypatch.setattr(store, "query_many", recorded)
        return sent

    return record
