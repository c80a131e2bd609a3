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
