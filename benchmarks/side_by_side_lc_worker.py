"""The langchain-surrealdb baseline, run by benchmarks/side_by_side.py inside its own virtual environment
(langchain-surrealdb pins surrealdb~=1.0.8, which cannot share ours). Imports only the standard library,
numpy and langchain-surrealdb.

    <venv>/bin/python side_by_side_lc_worker.py INPUT_DIR STORE_PATH DEPTH OUTPUT.json

INPUT_DIR holds ``passages.json`` ({"ids", "texts", "titles"}), ``passage_vectors.npy``,
``questions.json`` and ``question_vectors.npy``: the vectors our side computed with the same MiniLM.
The store gets them through the ordinary LangChain ``Embeddings`` interface (a lookup by text), so
``add_documents`` and ``similarity_search`` run exactly as they would with a live model.
``search_ms`` is the wall-clock time of each ``similarity_search`` call with the question's vector
looked up; side_by_side.py adds that question's embedding time, measured with the model, as it does
for the numpy row, so every row's latency includes the question's embedding.
"""

from __future__ import annotations

import json
import sys
import time
from importlib import metadata
from pathlib import Path

import numpy as np
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_surrealdb.vectorstores import SurrealDBVectorStore
from surrealdb import Surreal


class PrecomputedEmbeddings(Embeddings):
    """Answers with the vectors computed outside this process for exactly these texts."""

    def __init__(self, texts: list[str], vectors: np.ndarray, questions: list[str], question_vectors: np.ndarray) -> None:
        self._documents = {t: v.tolist() for t, v in zip(texts, vectors)}
        self._queries = {q: v.tolist() for q, v in zip(questions, question_vectors)}

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        try:
            return [self._documents[t] for t in texts]
        except KeyError as exc:
            raise KeyError(f"no precomputed vector for passage {str(exc)[:80]}") from exc

    def embed_query(self, text: str) -> list[float]:
        try:
            return self._queries[text]
        except KeyError as exc:
            raise KeyError(f"no precomputed vector for question {text[:80]!r}") from exc


def main(input_dir: Path, store_path: Path, depth: int, output: Path) -> None:
    passages = json.loads((input_dir / "passages.json").read_text(encoding="utf-8"))
    questions = json.loads((input_dir / "questions.json").read_text(encoding="utf-8"))
    vectors = np.load(input_dir / "passage_vectors.npy")
    embeddings = PrecomputedEmbeddings(passages["texts"], vectors, questions, np.load(input_dir / "question_vectors.npy"))

    connection = Surreal(f"surrealkv://{store_path}")
    connection.use("langchain", "bench")
    t = time.perf_counter()
    store = SurrealDBVectorStore(embeddings, connection, embedding_dimension=int(vectors.shape[1]))
    documents = [
        Document(page_content=text, metadata={"title": title}) for text, title in zip(passages["texts"], passages["titles"])
    ]
    store.add_documents(documents, ids=passages["ids"])
    index_seconds = time.perf_counter() - t

    rankings, search_ms = [], []
    for question in questions:
        t = time.perf_counter()
        found = store.similarity_search(question, k=depth)
        search_ms.append((time.perf_counter() - t) * 1000)
        rankings.append([doc.id for doc in found])
    connection.close()
    versions = {name: metadata.version(name) for name in ("langchain-surrealdb", "surrealdb", "langchain-core")}
    output.write_text(json.dumps({"index_seconds": index_seconds, "rankings": rankings, "search_ms": search_ms, "versions": versions}))


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    main(Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4]))
