"""Data for benchmarks/side_by_side.py: the benchmark sets (a corpus.jsonl of passages, or a folder of
files), their limits, the shared embeddings, the units the baselines index and the result rows.
Nothing here knows a dataset's name: every set in a format is treated alike."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from surreal_kgrag.embed import Embedder
from surreal_kgrag.evaluate import EvalQuery, find_eval_set, load_queries, recall_figures
from surreal_kgrag.latency import Latency
from surreal_kgrag.retrieval.results import Timings

KS = (1, 2, 5)


@dataclass
class Passage:
    id: str
    title: str
    text: str
    record: dict[str, Any]

    @property
    def indexed_text(self) -> str:
        """What the baselines embed and index: the passage under its title, as our ingest does by default."""
        return f"{self.title.strip()}\n{self.text}" if self.title.strip() else self.text


@dataclass
class BenchSet:
    name: str
    folder: Path
    passages: list[Passage]
    queries: list[EvalQuery]
    digest: str  # of the passages and queries used, so a store or cache is never reused for other data

    @property
    def work_name(self) -> str:
        return f"{self.name}-{self.digest[:10]}"

    def write_corpus(self, path: Path) -> Path:
        """The (possibly limited) corpus as JSONL, the file our ingest reads."""
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", encoding="utf-8") as out:
            for passage in self.passages:
                out.write(json.dumps(passage.record, ensure_ascii=False) + "\n")
        return path


@dataclass
class FileSet:
    """A folder of files and questions naming gold file names: ingested by us, and the baselines
    index the chunks our store holds (the same texts and vectors)."""

    name: str
    folder: Path
    inputs: list[Path]
    queries: list[EvalQuery]

    @property
    def work_name(self) -> str:
        digest = hashlib.sha256("".join(q.model_dump_json() for q in self.queries).encode())
        for path in self.inputs:
            digest.update(str(path.resolve()).encode())
        return f"{self.name}-{digest.hexdigest()[:10]}"


def load_any(folder: Path, *, limit: int | None, corpus_limit: int | None, docs: Path | None = None,
             queries: Path | None = None) -> BenchSet | FileSet:
    """Either format of ``surreal_kgrag.evaluate.find_eval_set``: passages (``corpus.jsonl``) or files."""
    if docs is None and queries is None and not (folder / "queries.jsonl").is_file():
        raise SystemExit(f"{folder}: missing queries.jsonl (a benchmark folder holds queries.jsonl and corpus.jsonl or files)")
    found = find_eval_set(None if queries is not None else folder, docs=docs, queries=queries)
    if found.format == "records" and docs is None:
        return load_set(folder, limit=limit, corpus_limit=corpus_limit)
    if corpus_limit is not None:
        raise SystemExit(f"{folder}: --corpus-limit applies to corpus.jsonl sets only")
    return FileSet(folder.resolve().name, folder, found.inputs, found.queries[:limit])


def load_set(folder: Path, *, limit: int | None, corpus_limit: int | None) -> BenchSet:
    """Read ``corpus.jsonl`` and ``queries.jsonl``; ``limit`` keeps the first N queries, ``corpus_limit``
    keeps every gold passage of those queries plus the first other passages up to N in all."""
    corpus_file, queries_file = folder / "corpus.jsonl", folder / "queries.jsonl"
    for path in (corpus_file, queries_file):
        if not path.is_file():
            raise SystemExit(f"{folder}: missing {path.name} (a benchmark folder holds corpus.jsonl and queries.jsonl)")
    queries = load_queries(queries_file)[:limit]
    passages = []
    for number, line in enumerate(corpus_file.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            passages.append(Passage(str(record["id"]), str(record.get("title") or ""), str(record["text"]), record))
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise SystemExit(f"{corpus_file}:{number}: expected a JSON object with 'id' and 'text' ({exc!r})") from exc
    known = {p.id for p in passages}
    missing = sorted({g for q in queries for g in q.gold_ids} - known)
    if missing:
        raise SystemExit(f"{queries_file}: gold ids not in the corpus: {', '.join(missing[:5])}")
    if corpus_limit is not None:
        gold = {g for q in queries for g in q.gold_ids}
        room = max(corpus_limit - len(gold), 0)
        others = [p.id for p in passages if p.id not in gold][:room]
        keep = gold | set(others)
        passages = [p for p in passages if p.id in keep]
    digest = hashlib.sha256()
    for passage in passages:
        digest.update(json.dumps(passage.record, sort_keys=True).encode())
    for query in queries:
        digest.update(query.model_dump_json().encode())
    return BenchSet(folder.resolve().name, folder, passages, queries, digest.hexdigest())


@dataclass
class SharedVectors:
    """The passage and question vectors every vector baseline uses, computed once by our embedder."""

    passages: np.ndarray
    passage_seconds: float  # time it took to embed the passages (measured when the cache was written)
    cached: bool
    questions: np.ndarray
    question_ms: list[float]  # a fresh embedding per question, timed one by one

    def timed(self, i: int, search_ms: float, part: str = "rank") -> Timings:
        """Question ``i`` answered with its vector given in ``search_ms``, as if embedded in the call:
        the wall-clock time is the search plus the question's own embedding time."""
        return Timings(wall_ms=search_ms + self.question_ms[i], embed_ms=self.question_ms[i], **{f"{part}_ms": search_ms})


def embed_set(bench: BenchSet, embedder: Embedder, cache: Path) -> SharedVectors:
    texts = [p.indexed_text for p in bench.passages]
    vectors, seconds, cached = None, 0.0, False
    if cache.is_file():
        with np.load(cache, allow_pickle=False) as saved:
            if str(saved["model"]) == embedder.name and saved["vectors"].shape[0] == len(texts):
                vectors, seconds, cached = saved["vectors"], float(saved["seconds"]), True
    if vectors is None:
        t = time.perf_counter()
        vectors = embedder.embed_documents(texts)
        seconds = time.perf_counter() - t
        cache.parent.mkdir(parents=True, exist_ok=True)
        np.savez(cache, vectors=vectors, seconds=seconds, model=embedder.name)
    questions, question_ms = [], []
    for query in bench.queries:
        t = time.perf_counter()
        questions.append(embedder.embed_query(query.question))
        question_ms.append((time.perf_counter() - t) * 1000)
    return SharedVectors(np.asarray(vectors, dtype=np.float32), seconds, cached, np.stack(questions), question_ms)


@dataclass
class Row:
    """One line of the table: a system's recall and latency on one corpus."""

    system: str
    recall: dict[int, float] = field(default_factory=dict)  # percent, by k
    timings: list[Timings] = field(default_factory=list)  # per question: wall-clock, question embedding included, and parts
    ingest_s: float | None = None
    note: str = ""
    failed: bool = False
    latency: Latency | None = None  # when only the percentiles are known (ours, from surreal_kgrag.evaluate)
    by_type: dict[str, dict[str, float | int]] = field(default_factory=dict)  # when the questions have types

    def figures(self) -> dict[str, Any]:
        out: dict[str, Any] = {"system": self.system}
        out.update({f"recall@{k}": (round(self.recall[k], 1) if k in self.recall else None) for k in KS})
        latency = self.latency or (Latency.of(self.timings) if self.timings else None)
        out["p50_ms"] = round(latency.p50_ms, 2) if latency else None
        out["p95_ms"] = round(latency.p95_ms, 2) if latency else None
        out["parts_p50_ms"] = {part: round(ms, 2) for part, ms in latency.parts_p50_ms.items() if ms} if latency else None
        out["ingest_s"] = None if self.ingest_s is None else round(self.ingest_s, 3)
        out["note"] = self.note
        if self.by_type:
            out["by_type"] = self.by_type
        return out


def could_not_run(system: str, reason: str) -> Row:
    return Row(system, note=f"could not run: {reason}", failed=True)


@dataclass
class Units:
    """What a baseline indexes, one entry per unit (a passage, or a chunk of a file), with the label
    of its document (what recall compares with the gold); ``depth``: how many units to fetch per question."""

    ids: list[str]
    texts: list[str]
    titles: list[str]
    labels: list[str]
    depth: int

    def documents(self, ranked_ids: Sequence[str]) -> list[str]:
        index = {unit: i for i, unit in enumerate(self.ids)}
        return [self.labels[index[unit]] for unit in ranked_ids]


def score_rankings(row: Row, rankings: Sequence[Sequence[str]], queries: Sequence[EvalQuery]) -> Row:
    """Recall@k over distinct documents (surreal_kgrag.evaluate), overall and per type, in percent."""
    recall, by_type = recall_figures(queries, rankings, KS)
    row.recall = recall
    row.by_type = {name: t.flat() for name, t in by_type.items()}
    return row
