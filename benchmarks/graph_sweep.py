"""Recall of the graph (or concept) mode under other settings, on stores the ingest built.

    .venv/bin/python benchmarks/graph_sweep.py ../shared/bench/hotpotqa ../shared/bench/musique \\
        --store-dir /tmp/kg-bench --mode graph --vary damping=0.7,0.9 own_share=0.7,1.0 max_df=10

How the defaults in the README's "Defaults and the measurements behind them" are checked: each
``--vary`` setting moves alone from the defaults (or from ``--base``) and prints recall@2 / recall@5
per folder next to the defaults'. Settings that only change the walk, the question-concept weights
or the fusion are replayed client-side on each question's captured subgraph (milliseconds per
question); any other (``max_df``, ``candidates``, ``text_max_df``, ...) runs the retriever again.
Choose a default on one folder and confirm it on the other: a setting that gains on one set only
is not a default. Nothing here reads a dataset's name, ids or question templates.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from surreal_kgrag import SurrealStore
from surreal_kgrag.embed import resolve_embedder
from surreal_kgrag.evaluate import EvalQuery, document_label, load_queries, recall_at
from surreal_kgrag.retrieval.config import ConceptConfig, GraphConfig
from surreal_kgrag.retrieval.fusion import Hit
from surreal_kgrag.retrieval.graph import GraphRetriever, QuestionConcept, question_concepts

#: Settings replayed on a captured subgraph: they change neither the seeds nor the subgraph.
REPLAYED = {
    "damping", "iterations", "own_share", "np_weight", "gamma", "relation_share", "dense_reset",
    "dense_temperature", "question_np", "question_lowercase", "question_rarity", "weights", "rrf_k", "fusion",
}


@dataclass
class Capture:
    """What one question's search computed before the walk."""

    request: Any
    sub: Any
    out: dict[str, Any]
    spans: Any
    rows: list[dict[str, Any]]
    chunk_total: int
    text: list[Hit]
    vector: list[Hit]
    document: list[Hit]


class CapturingRetriever(GraphRetriever):
    """The graph retriever, keeping each search's inputs to the walk and fusion (one search at a time)."""

    captured: Capture | None = None

    def _names(self, spans: Any, rows: list[dict[str, Any]], chunk_total: int) -> dict[str, QuestionConcept]:
        self._matched = (spans, rows)
        return super()._names(spans, rows, chunk_total)

    def _walk(self, request: Any, sub: Any, out: dict[str, Any], names: Any, chunk_total: int) -> list[Hit]:
        self._last = (request, sub, out, chunk_total)
        return super()._walk(request, sub, out, names, chunk_total)

    def fuse(self, channels: Any) -> list[tuple[str, float]]:
        request, sub, out, chunk_total = self._last
        spans, rows = self._matched
        self.captured = Capture(
            request, sub, out, spans, rows, chunk_total, channels.get("text", []), channels.get("vector", []), channels.get("document", [])
        )
        return super().fuse(channels)


#: The default embedder, the one the ingest used (loaded on first use).
EMBEDDER = resolve_embedder(None)


def replay(capture: Capture, retriever: GraphRetriever) -> list[str]:
    """The documents the search would rank under ``retriever``'s settings, from its captured subgraph."""
    config = retriever.config
    names = question_concepts(capture.spans, capture.rows, capture.chunk_total, config)
    walked = retriever._walk(capture.request, capture.sub, capture.out, names, capture.chunk_total)
    channels = {"document": capture.document, "graph": walked, "text": capture.text, "vector": capture.vector}
    ranking = retriever.fuse(channels)
    return [doc for doc, _ in ranking]


def search(
    store: SurrealStore, config: GraphConfig, queries: list[EvalQuery], vectors: Any
) -> tuple[list[Capture], list[list[str]]]:
    """Each query searched for real under ``config``: its capture and its top 5 documents."""
    retriever = CapturingRetriever(store, embedder=EMBEDDER, config=config)
    captures, ranked = [], []
    for query, vector in zip(queries, vectors):
        result = retriever.search(query.question, k=5, embedding=[float(x) for x in vector])
        assert retriever.captured is not None
        captures.append(retriever.captured)
        ranked.append([doc.id for doc in result.documents])
    return captures, ranked


def score(ranked: list[list[str]], queries: list[EvalQuery], sources: dict[str, str]) -> tuple[float, float, float]:
    """Recall@1, @2 and @5 in %, a document labelled by its key or, for a ``gold_files`` folder, its file name."""
    labels = [[document_label(key, sources.get(key, ""), q.by_file) for key in ids] for ids, q in zip(ranked, queries)]
    r1, r2, r5 = (round(100 * float(np.mean([recall_at(ids, q.gold, k) for ids, q in zip(labels, queries)])), 1) for k in (1, 2, 5))
    return r1, r2, r5


def parse_value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def variants(vary: list[str], grid: bool = False) -> list[tuple[str, dict[str, Any]]]:
    """``name=v1,v2`` -> one variant per value; ``weights={"graph":4,"text":1}`` takes JSON. With
    ``grid``, every combination of the values instead."""
    axes: list[list[tuple[str, Any]]] = []
    for item in vary:
        name, _, values = item.partition("=")
        if values.startswith("{"):
            axes.append([(name, json.loads(values))])
        else:
            axes.append([(name, parse_value(value)) for value in values.split(",")])
    one_at_a_time = [{name: value} for axis in axes for name, value in axis]
    combos = [dict(combo) for combo in itertools.product(*axes)] if grid else one_at_a_time
    return [(" ".join(f"{k}={json.dumps(v)}" for k, v in combo.items()), combo) for combo in combos]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--store-dir", type=Path, required=True, help="where retrieval_benchmark.py built the stores")
    parser.add_argument("--mode", choices=["graph", "concept"], default="graph")
    parser.add_argument("--base", default="{}", help="JSON settings the variants start from (default: the defaults)")
    parser.add_argument("--vary", nargs="*", default=[], help="name=v1,v2 ... (JSON values)")
    parser.add_argument("--grid", action="store_true", help="every combination of the --vary values (replayed settings only)")
    parser.add_argument("--top", type=int, default=0, help="with --grid: print only the best N by the sum over folders")
    parser.add_argument("--limit", type=int, default=None)
    args = parser.parse_args(argv)

    config_class = GraphConfig if args.mode == "graph" else ConceptConfig
    base = json.loads(args.base)
    runs = variants(args.vary, args.grid)
    if args.grid and any(not set(settings) <= REPLAYED for _, settings in runs):
        parser.error(f"--grid takes replayed settings only ({', '.join(sorted(REPLAYED))})")
    table: dict[str, dict[str, tuple[float, float, float]]] = {}
    for folder in args.folders:
        queries = load_queries(folder / "queries.jsonl")[: args.limit]
        vectors = EMBEDDER.embed_documents([q.question for q in queries])
        with SurrealStore(f"surrealkv://{args.store_dir / folder.resolve().name}") as store:
            sources = {row["key"]: row["source"] for row in store.query("document_sources")[-1]}
            t = time.perf_counter()
            captures, ranked = search(store, config_class(**base), queries, vectors)
            rows = {"defaults" if not base else f"base {args.base}": score(ranked, queries, sources)}
            print(f"{folder}: captured {len(captures)} searches in {time.perf_counter() - t:.0f}s", file=sys.stderr)
            for label, settings in runs:
                config = config_class(**{**base, **settings})
                if set(settings) <= REPLAYED:
                    retriever = GraphRetriever(store, config=config)
                    ranked = [replay(capture, retriever)[:5] for capture in captures]
                else:
                    _, ranked = search(store, config, queries, vectors)
                rows[label] = score(ranked, queries, sources)
                if not args.grid:
                    print(f"  {label}: {rows[label]}", file=sys.stderr)
            table[folder.resolve().name] = rows
    names = list(table)
    labels = list(next(iter(table.values())))
    if args.top:
        first, *rest = labels
        rest.sort(key=lambda label: -sum(table[n][label][2] for n in names))
        labels = [first, *rest[: args.top]]
        for n in names:  # tune on one folder, confirm on the others
            best = max(rest, key=lambda label: table[n][label][2])
            others = ", ".join(f"{m} {table[m][best][2]}" for m in names if m != n)
            print(f"best recall@5 on {n} alone: {best} -> {n} {table[n][best][2]}; {others}")
    print("| setting | " + " | ".join(f"{n} R@1 / R@2 / R@5" for n in names) + " |")
    print("|---|" + "---|" * len(names))
    for label in labels:
        cells = [" / ".join(str(r) for r in table[n][label]) for n in names]
        print(f"| {label} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
