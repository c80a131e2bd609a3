"""What ``scale_benchmark.py`` measures at each size, and how it is printed and charted.

A kept store grows a size at a time (``--store-dir``), one run after another, each run reporting the
sizes it built (``--json``). This prints and charts the sizes of several such reports together:

    .venv/bin/python benchmarks/scale_report.py run-to-30k.json run-to-100k.json [--chart scale.png]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

MODES = ("chunk", "concept", "hybrid", "graph")


@dataclass
class SizeFigures:
    size: int
    chunks: int = 0
    documents: int = 0
    text_bytes: int = 0
    written_chunks: int = 0
    written_edges: int = 0
    written_rows: int = 0
    prepare_s: float = 0.0
    write_s: float = 0.0
    concept_vectors_s: float = 0.0
    index_s: float = 0.0
    write_chunks_per_s: float = 0.0
    write_edges_per_s: float = 0.0
    write_rows_per_s: float = 0.0
    load_chunks_per_s: float = 0.0
    disk_bytes: int = 0
    disk_bytes_per_chunk: float = 0.0
    disk_bytes_per_text_byte: float = 0.0
    disk_bytes_after_optimize: int = 0
    peak_rss_mb: float = 0.0
    open_s: float = 0.0
    optimize_s: float = 0.0
    settle_s: float = 0.0
    latency: dict[str, dict[str, float]] = field(default_factory=dict)  # in the process that wrote the store
    reader: dict = field(default_factory=dict)  # scale_retime.py's figures: open_s, settle_s, latency, peak_rss_mb
    rows: dict[str, int] = field(default_factory=dict)
    rows_per_chunk: dict[str, float] = field(default_factory=dict)
    table_bytes_per_chunk: dict[str, float] = field(default_factory=dict)  # --table-bytes only


def format_size(f: SizeFigures, embed_ms: float) -> str:
    lines = [
        f"== {f.chunks:,} chunks ({f.documents:,} documents, {f.text_bytes / 1e6:.1f} MB of chunk text)",
        f"  write (database, Writer): {f.write_chunks_per_s:,.1f} chunks/s, {f.write_edges_per_s:,.0f} edges/s, "
        f"{f.write_rows_per_s:,.0f} rows/s ({f.written_chunks:,} chunks, {f.written_edges:,} edges, "
        f"{f.written_rows:,} rows in {f.write_s:.1f} s)",
        f"  load (prepare {f.prepare_s:.1f} s + write + concept vectors {f.concept_vectors_s:.1f} s + index {f.index_s:.1f} s): "
        f"{f.load_chunks_per_s:,.1f} chunks/s",
        f"  disk: {f.disk_bytes / 1e6:,.1f} MB = {f.disk_bytes_per_chunk / 1024:,.1f} KB/chunk, "
        f"{f.disk_bytes_per_text_byte:,.1f} bytes per byte of text "
        f"({f.disk_bytes_after_optimize / 1e6:,.1f} MB after optimize and queries)",
        f"  open {f.open_s:.2f} s, optimize {f.optimize_s:.1f} s (then {f.settle_s:.0f} s until the engine was idle), "
        f"peak RSS {f.peak_rss_mb:,.0f} MB",
        f"  latency, ms (wall-clock of search(), question embedding EXCLUDED; MiniLM embeds one question in ~{embed_ms:.0f} ms here):",
    ]
    lines += latency_lines(f.latency, "in the process that wrote the store")
    if f.reader:
        lines += latency_lines(
            f.reader["latency"],
            f"in a new process that only reads it (open {f.reader['open_s']:.2f} s, engine idle after "
            f"{f.reader['settle_s']:.0f} s, peak RSS {f.reader['peak_rss_mb']:,.0f} MB)",
        )
    lines.append("  rows per chunk: " + ", ".join(f"{t} {r:g}" for t, r in f.rows_per_chunk.items() if f.rows.get(t)))
    if f.table_bytes_per_chunk:
        total = sum(b for t, b in f.table_bytes_per_chunk.items() if " without " not in t)
        lines.append(
            f"  bytes on disk per chunk by table (each copied alone, indexes included; sum {total:,.0f} vs "
            f"{f.disk_bytes_after_optimize / max(1, f.chunks):,.0f} for the store): "
            + ", ".join(f"{t} {b:,.0f}" for t, b in sorted(f.table_bytes_per_chunk.items(), key=lambda kv: -kv[1]))
        )
    return "\n".join(lines)


def latency_lines(latency: dict[str, dict[str, float]], where: str) -> list[str]:
    return [f"   {where}:"] + [
        f"    {mode:8s} wall p50 {v['wall_p50_ms']:7.1f}  p95 {v['wall_p95_ms']:7.1f}   "
        f"database p50 {v['db_p50_ms']:7.1f}  p95 {v['db_p95_ms']:7.1f}"
        for mode, v in latency.items()
    ]


def reader_latency(r: SizeFigures) -> dict[str, dict[str, float]]:
    """What a serving process waits: the new process's figures when the run took them."""
    return r.reader["latency"] if r.reader else r.latency


CHART_FIGURES = (
    ("write_chunks_per_s", "database writes, chunks/s"),
    ("write_rows_per_s", "database writes, rows/s"),
    ("disk_bytes_per_chunk", "bytes on disk per chunk"),
    ("disk_bytes_per_text_byte", "bytes on disk per byte of text"),
    ("peak_rss_mb", "peak RSS, MB"),
    ("open_s", "open, s"),
    ("optimize_s", "optimize, s"),
)


def chart(results: list[SizeFigures], path: Path, log: Callable[[str], None] = print) -> Path:
    """Each figure against size (log x), latency per mode in one panel; a CSV beside it when
    matplotlib is missing."""
    sizes = [r.chunks for r in results]
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        csv = path.with_suffix(".csv")
        header = ["chunks"] + [k for k, _ in CHART_FIGURES] + [f"{m}_{p}" for m in MODES for p in ("wall_p50_ms", "db_p50_ms")]
        rows = [
            [str(r.chunks)]
            + [f"{getattr(r, k):.3f}" for k, _ in CHART_FIGURES]
            + [str(reader_latency(r).get(m, {}).get(p, "")) for m in MODES for p in ("wall_p50_ms", "db_p50_ms")]
            for r in results
        ]
        csv.write_text("\n".join(",".join(row) for row in [header, *rows]) + "\n")
        log(f"matplotlib is not installed: wrote {csv} instead of a chart")
        return csv
    fig, axes = plt.subplots(3, 3, figsize=(13, 10))
    for ax, (key, label) in zip(axes.flat, CHART_FIGURES):
        ax.plot(sizes, [getattr(r, key) for r in results], marker="o")
        ax.set_xscale("log")
        ax.set_title(label, fontsize=10)
    readers = all(r.reader for r in results)
    for ax, part in zip(list(axes.flat)[len(CHART_FIGURES) :], ("wall", "db")):
        for i, mode in enumerate(MODES):
            color = f"C{i}"
            if all(mode in reader_latency(r) for r in results):
                ax.plot(sizes, [reader_latency(r)[mode][f"{part}_p50_ms"] for r in results], marker="o", color=color, label=mode)
            if readers and all(mode in r.latency for r in results):
                ax.plot(sizes, [r.latency[mode][f"{part}_p50_ms"] for r in results], linestyle="--", color=color)
        ax.set_xscale("log")
        where = "a new process (dashed: the writing one)" if readers else "the writing process"
        ax.set_title(f"{'wall-clock' if part == 'wall' else 'database'} p50, ms, no embedding:\n{where}", fontsize=9)
        ax.legend(fontsize=8)
    for ax in axes.flat:
        ax.set_xlabel("chunks", fontsize=8)
        ax.set_xticks(sizes, [f"{size:,}" for size in sizes], fontsize=8)  # the sizes measured, not log-scale minor ticks
        ax.minorticks_off()
    fig.suptitle("surreal-kgrag on the embedded engine: figures against store size")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def load_reports(paths: Sequence[Path]) -> tuple[float, list[SizeFigures]]:
    """The sizes of ``scale_benchmark.py --json`` reports, smallest first (a size two reports hold
    is taken from the later one), and the question embedding time of the last report."""
    by_size: dict[int, SizeFigures] = {}
    embed_ms = 0.0
    for path in paths:
        report = json.loads(path.read_text())
        embed_ms = float(report["question_embed_ms"])
        for size in report["sizes"]:
            figures = SizeFigures(**size)
            by_size[figures.chunks] = figures
    return embed_ms, [by_size[chunks] for chunks in sorted(by_size)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="print and chart the sizes of scale_benchmark.py --json reports together")
    parser.add_argument("reports", nargs="+", type=Path, help="scale_benchmark.py --json files, of runs that grew one store")
    parser.add_argument("--chart", type=Path, default=None)
    args = parser.parse_args(argv)
    embed_ms, results = load_reports(args.reports)
    for figures in results:
        print(format_size(figures, embed_ms))
    if args.chart and results:
        print(f"chart: {chart(results, args.chart)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
