"""Retrieval evaluation: recall@k over distinct documents and latency per mode, overall and per
question type, on a benchmark in one of two formats.

- **records**: ``corpus.jsonl`` lines ``{"id", "title", "text", ...}`` and ``queries.jsonl`` lines
  ``{"id", "question", "gold_ids": [corpus ids], ...}``; a document matches a gold id by its key.
- **files**: a folder of files (``docs/`` beside ``queries.jsonl``, or the files beside it) and
  ``queries.jsonl`` lines ``{"id", "question", "gold_files": [file names], "type"?, ...}``; a document
  matches a gold file by the file name of its ``source``.

recall@k, in percent: per question, the fraction of its gold documents among the first k distinct
documents of the ranking, averaged over questions (HippoRAG's definition when documents are passages).
Latency (:mod:`surreal_kgrag.latency`): p50 / p95 of the wall-clock time of each whole call, the
question's embedding included, with the median of each part beside them.
The baselines (:mod:`surreal_kgrag.eval_baselines`) are scored and timed the same way.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError, model_validator

from .db import SurrealStore
from .errors import LoaderError
from .latency import LATENCY_NOTE, Latency
from .models import LoadFailure
from .retrieval import BaseRetriever
from .retrieval.results import Timings

DEFAULT_KS = (1, 2, 5)
UNTYPED = "(no type)"


class EvalQuery(BaseModel):
    id: str
    question: str
    gold_ids: list[str] = Field(default_factory=list, description="corpus ids (records format)")
    gold_files: list[str] = Field(default_factory=list, description="file names (files format)")
    type: str | None = Field(None, description="question type; recall is also reported per type")
    answer: Any = None

    @model_validator(mode="after")
    def _one_kind_of_gold(self) -> EvalQuery:
        if bool(self.gold_ids) == bool(self.gold_files):
            raise ValueError("expected a non-empty 'gold_ids' list (corpus ids) or a non-empty 'gold_files' list (file names), not both")
        return self

    @property
    def by_file(self) -> bool:
        return bool(self.gold_files)

    @property
    def gold(self) -> set[str]:
        """What a document's label (:func:`document_label`) is compared with."""
        return {file_name(f) for f in self.gold_files} if self.gold_files else set(self.gold_ids)


def file_name(path: str) -> str:
    """The last part of a path, with either separator."""
    return path.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]


def document_label(key: str, source: str, by_file: bool) -> str:
    """What identifies a document for scoring: its source's file name (files) or its key (records)."""
    return file_name(source) if by_file else key


def load_queries(path: str | Path) -> list[EvalQuery]:
    path = Path(path)
    queries: list[EvalQuery] = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise LoaderError(f"cannot read queries file {path}: {exc.strerror or exc}") from exc
    first_line = 0
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            query = EvalQuery.model_validate({**record, "id": str(record.get("id", number))})
        except (json.JSONDecodeError, ValidationError, AttributeError) as exc:
            raise LoaderError(
                f"{path}:{number}: expected a JSON object with 'question' and a non-empty 'gold_ids' or 'gold_files' list ({exc})"
            ) from exc
        if queries and query.by_file != queries[0].by_file:
            kind = "gold_files" if queries[0].by_file else "gold_ids"
            raise LoaderError(f"{path}:{number}: every line must use '{kind}' as line {first_line} does")
        first_line = first_line or number
        queries.append(query)
    if not queries:
        raise LoaderError(f"{path} holds no queries")
    return queries


# -- the benchmark on disk ------------------------------------------------------------------------


class EvalSet(BaseModel):
    """What to ingest and which questions to ask about it."""

    inputs: list[Path] = Field(description="files and folders to ingest")
    queries_file: Path
    queries: list[EvalQuery]

    @property
    def format(self) -> Literal["files", "records"]:
        return "files" if self.queries[0].by_file else "records"

    @property
    def described_inputs(self) -> str:
        return ", ".join(str(p) for p in self.inputs)


def find_eval_set(
    folder: str | Path | None = None, *, docs: str | Path | None = None, corpus: str | Path | None = None,
    queries: str | Path | None = None,
) -> EvalSet:
    """A benchmark from a folder, from explicit paths, or both (explicit paths win).

    A folder holds ``queries.jsonl``; with ``gold_files`` the documents are its ``docs/`` folder, or
    else every file and folder beside ``queries.jsonl`` (hidden ones left out); with ``gold_ids`` they
    are its ``corpus.jsonl``."""
    base = Path(folder) if folder is not None else None
    if base is not None and not base.is_dir():
        raise LoaderError(f"{base} is not a folder (a benchmark folder holds queries.jsonl and the documents)")
    if queries is None:
        if base is None:
            raise LoaderError("give a benchmark folder, or --queries FILE with --docs DIR or --corpus FILE")
        queries = base / "queries.jsonl"
        if not queries.is_file():
            raise LoaderError(f"{base}: no queries.jsonl (lines {{id, question, gold_files or gold_ids}})")
    queries_file = Path(queries)
    loaded = load_queries(queries_file)
    chosen = docs if docs is not None else corpus
    if chosen is not None:
        inputs = [Path(chosen)]
    elif base is None:
        raise LoaderError(f"{queries_file}: give the documents to ingest with --docs DIR or --corpus FILE")
    elif not loaded[0].by_file:
        if not (base / "corpus.jsonl").is_file():
            raise LoaderError(f"{base}: no corpus.jsonl (the queries name corpus records by 'gold_ids')")
        inputs = [base / "corpus.jsonl"]
    elif (base / "docs").is_dir():
        inputs = [base / "docs"]
    else:
        skip = queries_file.resolve()
        inputs = sorted(p for p in base.iterdir() if not p.name.startswith(".") and p.resolve() != skip)
        if not inputs:
            raise LoaderError(f"{base}: no docs/ folder and no files beside queries.jsonl")
    for path in inputs:
        if not path.exists():
            raise LoaderError(f"{path}: no such file or folder")
    return EvalSet(inputs=inputs, queries_file=queries_file, queries=loaded)


# -- scoring --------------------------------------------------------------------------------------


def recall_at(retrieved: Sequence[str], gold: Iterable[str], k: int) -> float:
    """The fraction of ``gold`` among the first ``k`` distinct labels of ``retrieved``."""
    gold = set(gold)
    return len(gold.intersection(list(dict.fromkeys(retrieved))[:k])) / len(gold)


@dataclass
class Ranking:
    """One question's answer from one system: document labels in rank order, and the wall-clock
    time of the call that answered it (the question's embedding included) with its parts."""

    labels: list[str]
    timings: Timings


class TypeReport(BaseModel):
    recall: dict[int, float]
    queries: int

    def flat(self) -> dict[str, float | int]:
        return {**{f"recall@{k}": round(v, 1) for k, v in sorted(self.recall.items())}, "queries": self.queries}


def recall_figures(queries: Sequence[EvalQuery], rankings: Sequence[Sequence[str]], ks: Sequence[int]) -> tuple[
    dict[int, float], dict[str, TypeReport]
]:
    """Recall@k in percent overall and, when any question has a type, per type."""
    per_type: dict[str, list[dict[int, float]]] = {}
    overall = dict.fromkeys(ks, 0.0)
    typed = any(q.type for q in queries)
    for query, labels in zip(queries, rankings, strict=True):
        row = {k: recall_at(labels, query.gold, k) for k in ks}
        for k in ks:
            overall[k] += row[k]
        if typed:
            per_type.setdefault(query.type or UNTYPED, []).append(row)
    n = len(queries)
    by_type = {
        name: TypeReport(recall={k: 100 * sum(r[k] for r in rows) / len(rows) for k in ks}, queries=len(rows))
        for name, rows in sorted(per_type.items())
    }
    return {k: 100 * s / n for k, s in overall.items()}, by_type


class ModeReport(Latency):
    """A mode's (or a baseline's) recall and latency: ``p50_ms`` and ``p95_ms`` are the wall-clock
    time of the whole call, the question's embedding included (:data:`~surreal_kgrag.latency.LATENCY_NOTE`)."""

    recall: dict[int, float] = Field(description="recall@k in percent, by k")
    queries: int
    by_type: dict[str, TypeReport] = Field(default_factory=dict, description="recall per question type, when the queries have types")

    def flat(self) -> dict[str, Any]:
        """The GUIDE's JSON shape: ``recall@k`` keys next to the latency figures (``by_type`` when typed)."""
        row: dict[str, Any] = {f"recall@{k}": round(v, 1) for k, v in sorted(self.recall.items())}
        row.update(
            p50_ms=round(self.p50_ms, 2),
            p95_ms=round(self.p95_ms, 2),
            parts_p50_ms={part: round(ms, 2) for part, ms in self.parts_p50_ms.items()},
            queries=self.queries,
        )
        if self.by_type:
            row["by_type"] = {name: t.flat() for name, t in self.by_type.items()}
        return row


def score(queries: Sequence[EvalQuery], rankings: Sequence[Ranking], ks: Sequence[int]) -> ModeReport:
    recall, by_type = recall_figures(queries, [r.labels for r in rankings], ks)
    latency = Latency.of([r.timings for r in rankings])
    return ModeReport(recall=recall, by_type=by_type, queries=len(queries), **latency.model_dump())


def evaluate_retriever(
    retriever: BaseRetriever,
    queries: Sequence[EvalQuery],
    ks: Sequence[int] = DEFAULT_KS,
    *,
    progress: Callable[[Iterable[EvalQuery]], Iterable[EvalQuery]] | None = None,
) -> ModeReport:
    """Ask every question once, as a new question (nothing cached about it: the retriever forgets
    it first), after one untimed search that loads the models. Its latency is the wall-clock time of
    each whole ``search()`` call, the question's embedding included, with its parts."""
    depth = max(ks)
    retriever.search("which models does a search load?", k=depth)
    rankings = []
    for query in progress(queries) if progress else queries:
        retriever.forget(query.question)
        result = retriever.search(query.question, k=depth)
        labels = [document_label(doc.id, doc.source, query.by_file) for doc in result.documents]
        rankings.append(Ranking(labels, result.timings))
    return score(queries, rankings, ks)


# -- which gold documents the store holds ---------------------------------------------------------


class StoredDocument(BaseModel):
    key: str
    source: str


class GoldCoverage(BaseModel):
    """Gold documents the questions name that no stored document matches (each should be 0)."""

    documents: int = Field(description="documents in the store")
    gold: int = Field(description="distinct gold documents the questions name")
    not_found: list[str] = Field(description="gold file names or ids no stored document matches")
    failed_to_load: dict[str, str] = Field(default_factory=dict, description="of those, the files that failed to load, with the reason")

    def describe(self) -> str:
        text = f"gold documents not among the {self.documents} stored: {len(self.not_found)} of {self.gold}"
        if self.not_found:
            why = [f"{name} ({self.failed_to_load[name]})" if name in self.failed_to_load else name for name in self.not_found[:10]]
            text += ": " + "; ".join(why) + (" ..." if len(self.not_found) > 10 else "")
        return text


def gold_coverage(store: SurrealStore, queries: Sequence[EvalQuery], failures: Sequence[LoadFailure] = ()) -> GoldCoverage:
    by_file = queries[0].by_file
    [rows] = store.query("document_sources")
    documents = [StoredDocument.model_validate(row) for row in rows]
    labels = {document_label(d.key, d.source, by_file) for d in documents}
    gold = set().union(*(q.gold for q in queries))
    missing = sorted(gold - labels)
    failed = {}
    if by_file:
        failed = {file_name(f.source): f"failed to load: {f.reason}" for f in failures if file_name(f.source) in missing}
    return GoldCoverage(documents=len(documents), gold=len(gold), not_found=missing, failed_to_load=failed)


# -- the report -----------------------------------------------------------------------------------


class EvalReport(BaseModel):
    corpus: str | None = None
    queries_file: str | None = None
    format: Literal["files", "records"] = "records"
    modes: dict[str, ModeReport]
    baselines: dict[str, ModeReport] = Field(default_factory=dict, description="the same scoring over the same chunks")
    baseline_notes: dict[str, str] = Field(default_factory=dict, description="why a baseline could not run")
    coverage: GoldCoverage | None = None

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "corpus": self.corpus,
            "queries": self.queries_file,
            "format": self.format,
            "latency": LATENCY_NOTE,
            "modes": {mode: report.flat() for mode, report in self.modes.items()},
            "baselines": {name: report.flat() for name, report in self.baselines.items()},
        }
        out["baselines"].update({name: {"note": note} for name, note in self.baseline_notes.items()})
        if self.coverage is not None:
            out["gold_not_found"] = len(self.coverage.not_found)
            out["coverage"] = self.coverage.model_dump()
        return out

    def systems(self) -> dict[str, ModeReport]:
        return {**self.modes, **self.baselines}

    def table(self) -> str:
        """The figures as aligned text: one row per system, then one block per question type."""
        systems = self.systems()
        ks = sorted({k for r in systems.values() for k in r.recall})
        width = max(10, *(len(name) + 2 for name in systems))
        parts = [part for part in Timings.PARTS if any(r.parts_p50_ms.get(part) for r in systems.values())]
        head = f"{'system':<{width}}" + "".join(f"{f'recall@{k}':>11}" for k in ks)
        lines = [head + f"{'p50 ms':>9}{'p95 ms':>9}  p50 of parts: " + "".join(f"{part:>9}" for part in parts)]
        for name, r in systems.items():
            lines.append(
                f"{name:<{width}}" + "".join(f"{r.recall[k]:>11.1f}" for k in ks) + f"{r.p50_ms:>9.1f}{r.p95_ms:>9.1f}"
                + " " * 16 + "".join(f"{r.parts_p50_ms.get(part, 0.0):>9.1f}" for part in parts)
            )
        types = sorted({t for r in systems.values() for t in r.by_type})
        for name in types:
            count = next(r.by_type[name].queries for r in systems.values() if name in r.by_type)
            lines.append(f"\ntype {name} ({count} questions)")
            lines.append(f"{'system':<{width}}" + "".join(f"{f'recall@{k}':>11}" for k in ks))
            for system, r in systems.items():
                if name in r.by_type:
                    lines.append(f"{system:<{width}}" + "".join(f"{r.by_type[name].recall[k]:>11.1f}" for k in ks))
        lines += [f"{name}: could not run: {note}" for name, note in self.baseline_notes.items()]
        if self.coverage is not None:
            lines.append(self.coverage.describe())
        lines.append(LATENCY_NOTE)
        return "\n".join(lines)


def plot_report(report: EvalReport, path: str | Path) -> Path:
    """Bar chart of recall@k per mode and baseline, with p50 wall-clock latency in the labels (needs matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise LoaderError("the chart needs matplotlib: pip install 'surreal-kgrag[eval]'") from exc
    systems = report.systems()
    names = list(systems)
    ks = sorted({k for r in systems.values() for k in r.recall})
    width = 0.8 / len(ks)
    fig, ax = plt.subplots(figsize=(1.6 + 1.4 * len(names), 4))
    for i, k in enumerate(ks):
        xs = [m + (i - (len(ks) - 1) / 2) * width for m in range(len(names))]
        bars = ax.bar(xs, [systems[name].recall.get(k, 0) for name in names], width, label=f"recall@{k}")
        ax.bar_label(bars, fmt="%.1f", fontsize=8)
    ax.set_xticks(range(len(names)), [f"{m}\np50 {systems[m].p50_ms:.1f} ms wall" for m in names], fontsize=8)
    ax.set_ylabel("recall (%)")
    ax.set_ylim(0, 100)
    ax.set_title(Path(report.corpus.split(", ")[0]).parent.name if report.corpus else "retrieval")
    ax.legend(loc="lower right")
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
