"""Retrieval evaluation: recall@k and latency per mode on a corpus/queries pair.

The files follow the benchmark format: ``corpus.jsonl`` lines ``{"id", "title", "text", ...}`` and
``queries.jsonl`` lines ``{"id", "question", "gold_ids": [corpus ids], ...}``. Recall is computed as
HippoRAG does: per query, the fraction of gold passages whose document is among the top-k retrieved
documents, averaged over queries, in percent.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from .errors import LoaderError
from .retrieval import BaseRetriever


class EvalQuery(BaseModel):
    id: str
    question: str
    gold_ids: list[str] = Field(min_length=1)
    answer: Any = None


class ModeReport(BaseModel):
    recall: dict[int, float] = Field(description="recall@k in percent, by k")
    p50_ms: float = Field(description="median retrieval latency, query embedding excluded")
    p95_ms: float
    p50_with_embedding_ms: float = Field(description="median latency including a fresh query embedding")
    p95_with_embedding_ms: float
    queries: int

    def flat(self) -> dict[str, float | int]:
        """The GUIDE's JSON shape: ``recall@k`` keys next to the latency figures."""
        row: dict[str, float | int] = {f"recall@{k}": round(v, 1) for k, v in sorted(self.recall.items())}
        row.update(
            p50_ms=round(self.p50_ms, 2),
            p95_ms=round(self.p95_ms, 2),
            p50_with_embedding_ms=round(self.p50_with_embedding_ms, 2),
            p95_with_embedding_ms=round(self.p95_with_embedding_ms, 2),
            queries=self.queries,
        )
        return row


class EvalReport(BaseModel):
    corpus: str | None = None
    queries_file: str | None = None
    modes: dict[str, ModeReport]

    def as_json(self) -> dict[str, Any]:
        return {
            "corpus": self.corpus,
            "queries": self.queries_file,
            "modes": {mode: report.flat() for mode, report in self.modes.items()},
        }


def load_queries(path: str | Path) -> list[EvalQuery]:
    path = Path(path)
    queries = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise LoaderError(f"cannot read queries file {path}: {exc.strerror or exc}") from exc
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            queries.append(EvalQuery.model_validate({**record, "id": str(record.get("id", number))}))
        except (json.JSONDecodeError, ValidationError, AttributeError) as exc:
            raise LoaderError(
                f"{path}:{number}: expected a JSON object with 'question' and a non-empty 'gold_ids' list ({exc})"
            ) from exc
    if not queries:
        raise LoaderError(f"{path} holds no queries")
    return queries


def recall_at(retrieved: Sequence[str], gold: Iterable[str], k: int) -> float:
    gold = set(gold)
    return len(gold.intersection(retrieved[:k])) / len(gold)


def _percentile(values: list[float], q: float) -> float:
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[round(q) - 1]


def evaluate_retriever(
    retriever: BaseRetriever,
    queries: Sequence[EvalQuery],
    ks: Sequence[int] = (2, 5),
    *,
    progress: Callable[[Iterable[EvalQuery]], Iterable[EvalQuery]] | None = None,
) -> ModeReport:
    """Run every query twice: once with a fresh embedding (end-to-end latency), once with the
    embedding cached (database latency alone); recall comes from the second run."""
    depth = max(ks)
    sums = dict.fromkeys(ks, 0.0)
    search_ms: list[float] = []
    total_ms: list[float] = []
    for query in progress(queries) if progress else queries:
        first = retriever.search(query.question, k=depth)
        total_ms.append(first.embed_ms + first.search_ms)
        result = retriever.search(query.question, k=depth)
        search_ms.append(result.search_ms)
        ids = [doc.id for doc in result.documents]
        for k in ks:
            sums[k] += recall_at(ids, query.gold_ids, k)
    n = len(queries)
    return ModeReport(
        recall={k: 100 * s / n for k, s in sums.items()},
        p50_ms=_percentile(search_ms, 50),
        p95_ms=_percentile(search_ms, 95),
        p50_with_embedding_ms=_percentile(total_ms, 50),
        p95_with_embedding_ms=_percentile(total_ms, 95),
        queries=n,
    )


def plot_report(report: EvalReport, path: str | Path) -> Path:
    """Bar chart of recall@k per mode, with p50 latency in the labels (needs matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise LoaderError("the chart needs matplotlib: pip install 'surreal-kgrag[eval]'") from exc
    modes = list(report.modes)
    ks = sorted({k for r in report.modes.values() for k in r.recall})
    width = 0.8 / len(ks)
    fig, ax = plt.subplots(figsize=(1.6 + 1.4 * len(modes), 4))
    for i, k in enumerate(ks):
        xs = [m + (i - (len(ks) - 1) / 2) * width for m in range(len(modes))]
        bars = ax.bar(xs, [report.modes[mode].recall.get(k, 0) for mode in modes], width, label=f"recall@{k}")
        ax.bar_label(bars, fmt="%.1f", fontsize=8)
    ax.set_xticks(range(len(modes)), [f"{m}\np50 {report.modes[m].p50_ms:.1f} ms" for m in modes])
    ax.set_ylabel("recall (%)")
    ax.set_ylim(0, 100)
    ax.set_title(Path(report.corpus).parent.name if report.corpus else "retrieval")
    ax.legend(loc="lower right")
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
