"""The baselines of benchmarks/side_by_side.py: exact numpy cosine, BM25 (bm25s) and the
langchain-surrealdb vector store (run in its own virtual environment). On a corpus.jsonl set each
indexes one record per passage, the passage under its title; on a set of files each indexes the
chunks our store holds (their texts and stored vectors, through ``surreal_kgrag.eval_baselines``).
Each returns a Row with recall and latency: the wall-clock time per question, its embedding included.
numpy and langchain-surrealdb search with the question's vector given (computed once for both), so
that question's embedding, timed on its own, is added to each search; BM25 tokenises instead."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from side_by_side_data import KS, BenchSet, Row, SharedVectors, Units, could_not_run, score_rankings

from surreal_kgrag.embed import Embedder
from surreal_kgrag.eval_baselines import BM25, NUMPY, ChunkTable, bm25_rankings, cosine_rankings
from surreal_kgrag.evaluate import EvalQuery, Ranking, file_name
from surreal_kgrag.latency import Stopwatch

DEPTH = max(KS)
CHUNK_DEPTH = 100  # chunks langchain-surrealdb returns per question on a set of files, for DEPTH distinct documents
LC_SYSTEM = "langchain-surrealdb"
LC_PACKAGES = ("langchain-surrealdb", "numpy")  # langchain-surrealdb imports numpy without declaring it
WORKER = Path(__file__).with_name("side_by_side_lc_worker.py")


def numpy_cosine(bench: BenchSet, vectors: SharedVectors) -> Row:
    """Exact cosine over the shared passage vectors (L2-normalised, so a dot product)."""
    t = time.perf_counter()
    matrix = np.ascontiguousarray(vectors.passages)
    index_s = vectors.passage_seconds + time.perf_counter() - t
    ids = [p.id for p in bench.passages]
    depth = min(DEPTH, len(ids))
    rankings, timings = [], []
    for n, question in enumerate(vectors.questions):
        t = time.perf_counter()
        scores = matrix @ question
        top = np.argpartition(-scores, depth - 1)[:depth]
        order = top[np.argsort(-scores[top])]
        timings.append(vectors.timed(n, (time.perf_counter() - t) * 1000))
        rankings.append([ids[i] for i in order])
    row = Row("numpy exact cosine", timings=timings, ingest_s=index_s)
    row.note = "MiniLM passage vectors, exact search" + (" (embed time from the cache)" if vectors.cached else "")
    return score_rankings(row, rankings, bench.queries)


def bm25(bench: BenchSet) -> Row:
    """bm25s with English stopwords, default parameters (k1=1.5, b=0.75)."""
    try:
        import bm25s
    except ImportError:
        return could_not_run("BM25 (bm25s)", "bm25s is not installed: pip install 'surreal-kgrag[bench]'")
    ids = [p.id for p in bench.passages]
    t = time.perf_counter()
    tokens = bm25s.tokenize([p.indexed_text for p in bench.passages], stopwords="en", show_progress=False)
    retriever = bm25s.BM25()
    retriever.index(tokens, show_progress=False)
    index_s = time.perf_counter() - t
    vocabulary = set(tokens.vocab)
    depth = min(DEPTH, len(ids))
    def words_of(question: str) -> list[str]:
        words = bm25s.tokenize(question, stopwords="en", return_ids=False, show_progress=False)[0]
        return [w for w in words if w in vocabulary]

    def ranking(words: list[str]) -> list[str]:
        if not words:  # a question with no indexed word matches nothing
            return []
        docs, _ = retriever.retrieve([words], k=depth, show_progress=False, n_threads=1)
        return [ids[i] for i in docs[0]]

    rankings, timings = [], []
    for query in bench.queries:
        watch = Stopwatch()
        rankings.append(watch.time("rank", ranking, watch.time("analyze", words_of, query.question)))
        timings.append(watch.timings())
    row = Row("BM25 (bm25s)", timings=timings, ingest_s=index_s, note="English stopwords, no stemming")
    return score_rankings(row, rankings, bench.queries)


def chunk_rows(table: ChunkTable, embedder: Embedder, queries: list[EvalQuery], names: list[str]) -> list[Row]:
    """numpy exact cosine and BM25 over the chunks our store holds (a set of files)."""
    rows = []
    if "numpy" in names:
        rows.append(_chunk_row(NUMPY, cosine_rankings(table, embedder, queries, DEPTH), queries, "stored chunk vectors, exact search"))
    if "bm25" in names:
        try:
            rankings = bm25_rankings(table, queries, DEPTH)
        except ImportError:
            rows.append(could_not_run(BM25, "bm25s is not installed: pip install 'surreal-kgrag[bench]'"))
        else:
            rows.append(_chunk_row(BM25, rankings, queries, "stored chunk texts, English stopwords, no stemming"))
    return rows


def _chunk_row(system: str, rankings: list[Ranking], queries: list[EvalQuery], note: str) -> Row:
    row = Row(system, timings=[r.timings for r in rankings], note=note)
    return score_rankings(row, [r.labels for r in rankings], queries)


def passage_units(bench: BenchSet) -> Units:
    ids = [p.id for p in bench.passages]
    return Units(ids, [p.indexed_text for p in bench.passages], [p.title for p in bench.passages], ids, DEPTH)


def chunk_units(table: ChunkTable) -> Units:
    return Units([f"chunk-{i}" for i in range(len(table.chunks))], table.texts, [file_name(s) for s in table.sources],
                 table.labels(by_file=True), CHUNK_DEPTH)


def langchain_surrealdb(units: Units, queries: list[EvalQuery], vectors: SharedVectors, work: Path, venv: Path) -> Row:
    """The langchain-surrealdb vector store on its own embedded surrealkv store, in its own venv,
    fed the shared vectors; any failure becomes a 'could not run' row that says what happened."""
    python, problem = ensure_venv(venv)
    if problem:
        return could_not_run(LC_SYSTEM, problem)
    inputs = work / "langchain-input"
    inputs.mkdir(parents=True, exist_ok=True)
    (inputs / "passages.json").write_text(json.dumps({"ids": units.ids, "texts": units.texts, "titles": units.titles}))
    (inputs / "questions.json").write_text(json.dumps([q.question for q in queries]))
    np.save(inputs / "passage_vectors.npy", vectors.passages)
    np.save(inputs / "question_vectors.npy", vectors.questions)
    store, output = work / "langchain-surrealdb.surrealkv", work / "langchain-result.json"
    shutil.rmtree(store, ignore_errors=True)
    output.unlink(missing_ok=True)
    command = [str(python), str(WORKER), str(inputs), str(store), str(units.depth), str(output)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0 or not output.is_file():
        return could_not_run(LC_SYSTEM, _last_line(done.stderr) or f"worker exited with status {done.returncode}")
    result = json.loads(output.read_text())
    # Its similarity_search (the query through its SDK and its own client work) counts as database time.
    timings = [vectors.timed(i, ms, "database") for i, ms in enumerate(result["search_ms"])]
    row = Row(LC_SYSTEM, timings=timings, ingest_s=vectors.passage_seconds + result["index_seconds"])
    versions = result["versions"]
    row.note = (f"langchain-surrealdb {versions['langchain-surrealdb']}, SDK surrealdb {versions['surrealdb']}, "
                "embedded surrealkv, HNSW (its defaults)")
    return score_rankings(row, [units.documents(r) for r in result["rankings"]], queries)


def ensure_venv(venv: Path) -> tuple[Path, str | None]:
    """A virtual environment with langchain-surrealdb from PyPI, made on first use and then reused."""
    python = venv / "bin" / "python"
    probe = [str(python), "-c", "import langchain_surrealdb.vectorstores, numpy"]
    if python.is_file() and subprocess.run(probe, capture_output=True).returncode == 0:
        return python, None
    print(f"  creating {venv} with {' '.join(LC_PACKAGES)} (a few minutes)", file=sys.stderr)
    made = subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], capture_output=True, text=True)
    if made.returncode != 0:
        return python, f"python -m venv failed: {_last_line(made.stderr)}"
    installed = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *LC_PACKAGES],
                               capture_output=True, text=True)
    if installed.returncode != 0:
        return python, f"pip install {' '.join(LC_PACKAGES)} failed: {_last_line(installed.stderr)}"
    checked = subprocess.run(probe, capture_output=True, text=True)
    if checked.returncode != 0:
        return python, f"langchain-surrealdb does not import: {_last_line(checked.stderr)}"
    return python, None


def _last_line(text: str) -> str:
    """The line of a failed command's stderr that says what went wrong (its last error, else its last line)."""
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("WARNING")]
    errors = [line for line in lines if "error" in line.lower()]
    return (errors or lines or [""])[-1][:300]
