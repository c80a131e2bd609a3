"""The baselines :mod:`surreal_kgrag.evaluate` prints beside the retrieval modes: exact cosine (numpy)
and BM25 (bm25s) over the chunks a store holds, as the store holds them: the text each chunk was
embedded and full-text indexed as, and its stored embedding, so a baseline and a mode search the same
units with the same embedder. A ranking of chunks becomes a ranking of distinct documents.

Each baseline is timed as the modes are: the wall-clock time of answering one question, its embedding
included (exact cosine embeds it as a mode does; BM25 tokenises it), with the parts (embed or
analyze, then rank)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel

from .blas import one_blas_thread
from .db import SurrealStore
from .embed import Embedder
from .evaluate import EvalQuery, ModeReport, Ranking, document_label, score
from .latency import Stopwatch

NUMPY = "numpy exact cosine"
BM25 = "BM25 (bm25s)"
BASELINES = {"numpy": NUMPY, "bm25": BM25}


class StoredChunk(BaseModel):
    chunk_key: str
    key: str
    source: str
    text: str
    embedding: list[float]


@dataclass
class ChunkTable:
    """The store's chunks in a fixed order: ids, texts, vectors and their documents."""

    chunks: list[str]
    keys: list[str]
    sources: list[str]
    texts: list[str]
    vectors: np.ndarray  # (chunks, dimension), float32, as stored (L2-normalised by the embedder)

    @classmethod
    def read(cls, store: SurrealStore) -> ChunkTable:
        [rows] = store.query("eval_chunks")
        chunks = [StoredChunk.model_validate(row) for row in rows]
        vectors = np.asarray([c.embedding for c in chunks], dtype=np.float32).reshape(len(chunks), -1)
        return cls([c.chunk_key for c in chunks], [c.key for c in chunks], [c.source for c in chunks], [c.text for c in chunks], vectors)

    def labels(self, by_file: bool) -> list[str]:
        return [document_label(key, source, by_file) for key, source in zip(self.keys, self.sources)]


def distinct_documents(order: Sequence[int] | np.ndarray, labels: Sequence[str], depth: int) -> list[str]:
    """The documents of chunks ranked by ``order``, each once, the first ``depth`` of them."""
    found: dict[str, None] = {}
    for i in order:
        found.setdefault(labels[int(i)], None)
        if len(found) == depth:
            break
    return list(found)


def cosine_rankings(table: ChunkTable, embedder: Embedder, queries: Sequence[EvalQuery], depth: int) -> list[Ranking]:
    """Exact cosine between the query vector and every stored chunk vector (a dot product: both are normalised)."""
    labels = table.labels(queries[0].by_file)
    rankings = []
    for query in queries:
        watch = Stopwatch()
        vector = watch.time("embed", embedder.embed_query, query.question)
        found = watch.time("rank", _cosine_ranking, table.vectors, vector, labels, depth)
        rankings.append(Ranking(found, watch.timings()))
    return rankings


def _cosine_ranking(vectors: np.ndarray, vector: np.ndarray, labels: Sequence[str], depth: int) -> list[str]:
    # On one BLAS thread: a second one spun on after the product and slowed the next question's
    # embedding about twofold (surreal_kgrag.blas), which is the baseline's setup, not its cost.
    with one_blas_thread():
        similarities = vectors @ np.asarray(vector, dtype=np.float32)
    order = np.argsort(-similarities, kind="stable")
    return distinct_documents(order, labels, depth)


def bm25_rankings(table: ChunkTable, queries: Sequence[EvalQuery], depth: int) -> list[Ranking]:
    """bm25s over the chunk texts: English stopwords, no stemming, default parameters (k1=1.5, b=0.75).
    Raises ImportError when bm25s is not installed."""
    import bm25s

    labels = table.labels(queries[0].by_file)
    tokens = bm25s.tokenize(table.texts, stopwords="en", show_progress=False)
    index = bm25s.BM25()
    index.index(tokens, show_progress=False)
    vocabulary = set(tokens.vocab)
    def words_of(question: str) -> list[str]:
        return [w for w in bm25s.tokenize(question, stopwords="en", return_ids=False, show_progress=False)[0] if w in vocabulary]

    def ranking(words: list[str]) -> list[str]:
        if not words:  # a question with no indexed word matches nothing
            return []
        scores = np.asarray(index.get_scores(words))
        order = np.argsort(-scores, kind="stable")
        return distinct_documents(order[scores[order] > 0], labels, depth)

    rankings = []
    for query in queries:
        watch = Stopwatch()
        found = watch.time("rank", ranking, watch.time("analyze", words_of, query.question))
        rankings.append(Ranking(found, watch.timings()))
    return rankings


def run_baselines(
    store: SurrealStore, embedder: Embedder, queries: Sequence[EvalQuery], ks: Sequence[int], names: Sequence[str] = tuple(BASELINES),
) -> tuple[dict[str, ModeReport], dict[str, str]]:
    """The chosen baselines (``numpy``, ``bm25``) scored as the modes are; a baseline that cannot run
    gets a note saying why instead of figures."""
    if not names:
        return {}, {}
    table = ChunkTable.read(store)
    depth = max(ks)
    runners: dict[str, Callable[[], list[Ranking]]] = {
        "numpy": lambda: cosine_rankings(table, embedder, queries, depth),
        "bm25": lambda: bm25_rankings(table, queries, depth),
    }
    reports, notes = {}, {}
    for name in names:
        if not table.chunks:
            notes[BASELINES[name]] = "the store holds no chunks"
            continue
        try:
            reports[BASELINES[name]] = score(queries, runners[name](), ks)
        except ImportError as exc:
            notes[BASELINES[name]] = f"{exc.name or exc} is not installed: pip install 'surreal-kgrag[eval]'"
    return reports, notes
