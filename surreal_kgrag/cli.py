"""``surreal-kgrag``: ingest documents, inspect a store, query it, keep its indexes fast.

Every command takes ``--db URL`` (default: ``$SURREAL_KGRAG_URL``, else an embedded ``surrealkv://``
store in the working directory), ``--ns`` and ``--database``, and prints JSON with ``--json``.

Exit codes (the README lists the same table):

    0   everything succeeded
    1   failed: nothing was done, or the command stopped (the message says why)
    2   bad command line (unknown option, missing argument)
    3   partial failure: some inputs failed (each reported on stderr), the rest were written
    4   no store at the path given (query, stats, delete and optimize never create one)
    130 interrupted (Ctrl-C)
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .cli_eval import add_eval_command, cmd_eval
from .cli_support import (
    CREATES_STORE,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_NO_STORE,
    EXIT_OK,
    EXIT_PARTIAL,
    EXIT_USAGE,
    MODES,
    emit,
    open_store,
)
from .db import DEFAULT_URL
from .errors import KGRagError, StoreNotFoundError, describe_validation
from .retrieval.config import DEFAULT_MODE
from .retrieval.options import access_labels, filter_spec

__all__ = [
    "CREATES_STORE", "EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_NO_STORE", "EXIT_OK", "EXIT_PARTIAL", "EXIT_USAGE",
    "MODES", "build_parser", "cmd_answer", "cmd_delete", "cmd_eval", "cmd_ingest", "cmd_optimize", "cmd_query",
    "cmd_stats", "main", "run",
]


def cmd_ingest(args: argparse.Namespace) -> int:
    from .chunking import SentenceChunker
    from .ingest import IngestConfig, IngestInterrupted, Ingestor

    if not any(os.path.lexists(path) for path in args.paths):  # a typo: say so before the models load
        print(f"surreal-kgrag ingest: nothing to ingest: no file or folder at {', '.join(args.paths)}", file=sys.stderr)
        return EXIT_FAILED
    config = IngestConfig(
        chunker=SentenceChunker(max_tokens=args.max_tokens, overlap_tokens=args.overlap),
        show_progress=False if args.no_progress or args.json else None,
    )
    with open_store(args) as store:
        ingestor = Ingestor(store, embedder=args.embedder, extractor=args.spacy_model, config=config)
        try:
            summary = ingestor.ingest(
                args.paths,
                glob=args.glob,
                follow_symlinks=args.follow_symlinks,
                max_file_bytes=args.max_file_bytes,
                max_line_bytes=args.max_line_bytes,
                max_pdf_pages=args.max_pdf_pages,
                max_pdf_chars=args.max_pdf_chars,
                max_pdf_memory=args.max_pdf_memory,
                pdf_timeout=args.pdf_timeout,
            )
        except IngestInterrupted as interrupted:
            for failure in interrupted.summary.failures:
                print(f"skipped {failure}", file=sys.stderr)
            print(f"surreal-kgrag ingest: {interrupted}", file=sys.stderr)
            return EXIT_INTERRUPTED
    for failure in summary.failures:
        print(f"skipped {failure}", file=sys.stderr)
    t = summary.timings
    stages = ", ".join(f"{stage} {seconds:.1f}s" for stage, seconds in t.items())
    emit(
        args,
        summary,
        f"added {summary.added}, updated {summary.updated}, skipped {summary.skipped} unchanged, "
        f"failed {summary.failed}; {summary.chunks} chunks, {summary.concepts} new concepts "
        f"({summary.concept_vectors} given a vector), {summary.edges} edges "
        f"in {summary.seconds:.1f}s (busy time per stage, the stages overlap: {stages})",
    )
    return EXIT_PARTIAL if summary.failed else EXIT_OK


def cmd_delete(args: argparse.Namespace) -> int:
    from .ingest import delete_documents

    keys = _delete_keys(args.keys)
    with open_store(args) as store:
        deleted = delete_documents(store, keys)
    emit(args, {"deleted": deleted}, f"deleted {deleted} of {len(args.keys)} documents")
    return EXIT_OK


def _delete_keys(keys: Sequence[str]) -> list[str]:
    """Each key as given, and a relative path also as the absolute path `ingest` stored it under
    (files are keyed by their resolved path); the file need not exist any more."""
    resolved = []
    for key in keys:
        resolved.append(key)
        if key.strip() and not os.path.isabs(key):
            with contextlib.suppress(OSError, RuntimeError, ValueError):
                resolved.append(Path(key).resolve().as_posix())
    return list(dict.fromkeys(resolved))


def cmd_stats(args: argparse.Namespace) -> int:
    from .stats import get_stats

    with open_store(args) as store:
        stats = get_stats(store)
    lines = [
        f"documents        {stats.documents}",
        f"chunks           {stats.chunks}",
        f"concepts         {stats.concepts} ({stats.shared_concepts} shared by more than one document)",
        f"mentions         {stats.mentions}",
        f"embeddings       {stats.embedding_dimension}-dim from {stats.embedder}",
        f"server           {stats.server_version}",
    ]
    lines += [f"index {name:<16} {state}" for name, state in stats.indexes.items()]
    emit(args, stats, "\n".join(lines))
    return EXIT_OK


def cmd_optimize(args: argparse.Namespace) -> int:
    with open_store(args) as store:
        report = store.optimize(force=args.force)
    lines = [f"rebuilt {', '.join(report.rebuilt) or 'nothing'} in {report.seconds:.1f}s" + (f" ({report.note})" if report.note else "")]
    lines += [f"index {key:<8} {state.name}: {state.indexed} rows, {state.pending} pending" for key, state in report.indexes.items()]
    if report.deferred:
        lines.append(f"still in use, removed by the next optimize: {', '.join(report.deferred)}")
    if report.failed:
        lines.append(f"not rebuilt (the engine did not finish the build; the live index is kept): {', '.join(report.failed)}")
    emit(args, report, "\n".join(lines))
    return EXIT_PARTIAL if report.failed else EXIT_OK


def _filters(args: argparse.Namespace) -> dict[str, Any] | None:
    if not args.filter:
        return None
    try:
        return filter_spec(args.filter)
    except argparse.ArgumentTypeError as error:
        raise KGRagError(f"--filter {error}") from None


def cmd_query(args: argparse.Namespace) -> int:
    from .retrieval import make_retriever
    from .retrieval.results import where

    with open_store(args) as store:
        retriever = make_retriever(args.mode, store, embedder=args.embedder, access=args.access)
        result = retriever.search(args.text, k=args.k, filters=_filters(args))
    lines = []
    for rank, doc in enumerate(result.documents, 1):
        lines.append(f"{rank}. {doc.title or doc.id}  score {doc.score:.3f}  ({doc.source})")
        if doc.chunks:
            snippet = " ".join(doc.chunks[0].content.split())
            if located := where(doc.chunks[0]):
                lines.append(f"   [{located}]")
            lines.append(f"   {snippet[:200]}{'...' if len(snippet) > 200 else ''}")
        if args.explain:
            lines += [f"   {path.describe()}" for path in doc.provenance]
    if not lines:
        lines.append("no results")
    lines.append(f"({result.timings.describe()}; the first load of the models included)")
    emit(args, result, "\n".join(lines))
    if args.graph:
        from .graph_view import write_graph

        try:
            print(f"graph view written to {write_graph(result, args.graph)}", file=sys.stderr)
        except OSError as error:
            print(f"error: the graph view could not be written to {args.graph}: {error.strerror or error}", file=sys.stderr)
            return EXIT_FAILED
    return EXIT_OK


# -- answer: retrieval + a cited answer from an OpenAI-compatible model (surreal_kgrag.llm) ---------


def cmd_answer(args: argparse.Namespace) -> int:
    import os

    from .llm import LLMSettings, answer
    from .retrieval import make_retriever

    model = args.model or os.environ.get("SURREAL_KGRAG_LLM_MODEL")
    if not model:
        raise KGRagError("answer needs a chat model: pass --model NAME or set SURREAL_KGRAG_LLM_MODEL (and OPENAI_API_KEY)")
    settings = LLMSettings(model=model, base_url=args.base_url, timeout=args.llm_timeout)
    with open_store(args) as store:
        retriever = make_retriever(args.mode, store, embedder=args.embedder)
        result = answer(args.text, retriever, settings, k=args.k, filters=_filters(args))
    lines = [result.answer]
    lines += [f"  - {title}: {sentence}" for title, sentence in result.supporting.items()]
    if result.dropped_citations:
        lines.append(f"({result.dropped_citations} citation(s) dropped: not found in the retrieved text)")
    lines.append(f"({result.usage.total_tokens} tokens, {len(result.retrieval.documents)} documents retrieved by {result.retrieval.mode})")
    emit(args, result, "\n".join(lines))
    return 0


def _add_loader_caps(ingest: argparse.ArgumentParser) -> None:
    """What one input may cost (LoaderOptions); an input past a cap is reported and skipped."""
    from .loaders.options import MAX_FILE_BYTES, MAX_LINE_BYTES, MAX_PDF_CHARS, MAX_PDF_MEMORY, MAX_PDF_PAGES, PDF_TIMEOUT

    ingest.add_argument(
        "--max-file-bytes", type=_byte_size, default=MAX_FILE_BYTES, metavar="SIZE",
        help="larger files read whole (JSON, HTML, PDF, Word, short text) are skipped unread; JSON Lines and long text, "
        f"read a line or a part at a time, may be larger; bytes, or with K, M or G (default: {MAX_FILE_BYTES >> 20}M)",
    )
    ingest.add_argument(
        "--max-line-bytes", type=_byte_size, default=MAX_LINE_BYTES, metavar="SIZE",
        help=f"longer JSON Lines lines are skipped (default: {MAX_LINE_BYTES >> 20}M)",
    )
    ingest.add_argument(
        "--max-pdf-pages", type=int, default=MAX_PDF_PAGES, metavar="N",
        help=f"PDFs with more pages are skipped before their text is read (default: {MAX_PDF_PAGES:,})",
    )
    ingest.add_argument(
        "--max-pdf-chars", type=int, default=MAX_PDF_CHARS, metavar="N",
        help=f"PDFs with more characters of text are skipped (default: {MAX_PDF_CHARS:,})",
    )
    pdf_memory = "PDFs that need more memory to read (in a process of their own) are skipped; bytes, or with K, M or G"
    ingest.add_argument(
        "--max-pdf-memory", type=_byte_size, default=MAX_PDF_MEMORY, metavar="SIZE", help=f"{pdf_memory} (default: {MAX_PDF_MEMORY >> 30}G)"
    )
    pdf_timeout = f"PDFs that take longer to read are skipped (default: {PDF_TIMEOUT:g})"
    ingest.add_argument("--pdf-timeout", type=float, default=PDF_TIMEOUT, metavar="SECONDS", help=pdf_timeout)


def _byte_size(text: str) -> int:
    """``268435456``, ``256M``, ``1G``, ``512k``: bytes, K/M/G counting in 1,024s."""
    value = text.strip().upper().removesuffix("IB").removesuffix("B")
    shift = {"K": 10, "M": 20, "G": 30}.get(value[-1:], 0)
    try:
        return int(value[:-1] if shift else value) << shift
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (bytes, or a number with K, M or G)") from None


def _add_answer_command(commands: Any, common: argparse.ArgumentParser) -> None:
    answer = commands.add_parser("answer", parents=[common], help="answer a question with citations checked against the retrieved text")
    answer.add_argument("text", help="the question")
    answer.add_argument("--mode", choices=MODES, default=DEFAULT_MODE, help=f"retrieval mode (default: {DEFAULT_MODE})")
    answer.add_argument("-k", type=int, default=5, help="documents retrieved (default: 5)")
    answer.add_argument("--filter", help="JSON filter, as for query")
    answer.add_argument("--model", help="chat model (default: $SURREAL_KGRAG_LLM_MODEL); the API key is read from $OPENAI_API_KEY")
    answer.add_argument("--base-url", help="OpenAI-compatible endpoint, e.g. http://localhost:11434/v1 (default: $OPENAI_BASE_URL)")
    answer.add_argument("--llm-timeout", type=float, default=60.0, help="seconds per model request (default: 60)")
    answer.set_defaults(func=cmd_answer)


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--db", help=f"database URL (default: $SURREAL_KGRAG_URL or {DEFAULT_URL})")
    common.add_argument("--ns", help="namespace (default: $SURREAL_KGRAG_NS or kgrag)")
    common.add_argument("--database", help="database (default: $SURREAL_KGRAG_DB or kgrag)")
    common.add_argument("--user", help="root user name (default: $SURREAL_KGRAG_USER)")
    common.add_argument("--password", help="password (default: $SURREAL_KGRAG_PASS)")
    common.add_argument("--json", action="store_true", help="print JSON")
    common.add_argument(
        "--embedder", default=None,
        help="sentence-transformers model name or path, or openai:<model> (default: all-MiniLM-L6-v2)",
    )

    parser = argparse.ArgumentParser(prog="surreal-kgrag", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)

    ingest = commands.add_parser("ingest", parents=[common], help="load, chunk, extract, embed and store documents")
    ingest.add_argument("paths", nargs="+", help="files or folders (txt, md, html, pdf, json, jsonl)")
    ingest.add_argument("--glob", default="**/*", help="pattern for files inside folders (default: **/*)")
    ingest.add_argument("--max-tokens", type=int, default=200, help="chunk budget in tokens (default: 200)")
    ingest.add_argument("--overlap", type=int, default=32, help="overlap between chunks in tokens (default: 32)")
    ingest.add_argument("--spacy-model", default=None, help="spaCy pipeline for concepts (default: best installed)")
    ingest.add_argument("--no-progress", action="store_true", help="no progress bar")
    ingest.add_argument(
        "--follow-symlinks", action="store_true", help="read symlinks inside folders that point outside them"
    )
    _add_loader_caps(ingest)
    ingest.set_defaults(func=cmd_ingest)

    delete = commands.add_parser(
        "delete", parents=[common], help="delete documents by key (file path, relative or absolute, or record id)"
    )
    delete.add_argument("keys", nargs="+")
    delete.set_defaults(func=cmd_delete)

    query = commands.add_parser("query", parents=[common], help="retrieve the documents that best answer a question")
    query.add_argument("text", help="the question")
    query.add_argument("--mode", choices=MODES, default=DEFAULT_MODE, help=f"retrieval mode (default: {DEFAULT_MODE})")
    query.add_argument("-k", type=int, default=5, help="documents to return (default: 5)")
    query.add_argument("--filter", help='JSON filter, e.g. \'{"metadata.year": {"$gte": 2000}}\'')
    query.add_argument(
        "--access", type=access_labels, default=None,
        help="comma-separated access labels: only documents carrying one of them ('' finds nothing; "
        "default: no label restriction)",
    )
    query.add_argument("--explain", action="store_true", help="show the paths (query -> concept -> chunk -> document)")
    query.add_argument("--graph", metavar="OUT.html", help="also write the result as a graph page (self-contained HTML)")
    query.set_defaults(func=cmd_query)

    add_eval_command(commands, common)

    stats = commands.add_parser("stats", parents=[common], help="counts and index state")
    stats.set_defaults(func=cmd_stats)

    optimize = commands.add_parser(
        "optimize", parents=[common], help="rebuild the search indexes that have pending updates (queries go on meanwhile)"
    )
    optimize.add_argument("--force", action="store_true", help="rebuild every search index, pending updates or not")
    optimize.set_defaults(func=cmd_optimize)
    _add_answer_command(commands, common)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns its exit code (the table in this module's docstring)."""
    parser = build_parser()
    for argument in sys.argv[1:] if argv is None else argv:
        try:
            argument.encode("utf-8")
        except UnicodeEncodeError:  # argparse would fail printing it back in its error message
            print(f"surreal-kgrag: argument {argument!r} is not valid UTF-8 text", file=sys.stderr)
            return EXIT_USAGE
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # argparse: --help (0) or a bad command line (2)
        return int(exit_.code or 0)
    try:
        return int(args.func(args))
    except StoreNotFoundError as error:
        print(f"surreal-kgrag {args.command}: {error}", file=sys.stderr)
        return EXIT_NO_STORE
    except ValidationError as error:  # a setting the command line gave, in a config model
        print(f"surreal-kgrag {args.command}: {describe_validation(error)}", file=sys.stderr)
        return EXIT_FAILED
    except (KGRagError, ValueError) as error:
        print(f"surreal-kgrag {args.command}: {error}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print(f"surreal-kgrag {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def run(argv: Sequence[str] | None = None) -> None:
    """The console script: ``main(argv)``, then leave without running the interpreter's shutdown.

    The SDK's embedded engine keeps worker threads that can still be finishing with Python objects
    when a short-lived process shuts down; in about one run in five that aborted the process
    (SIGABRT, exit 134) after its output was complete. Every store is closed by then and the
    output flushed, so the process ends here with the command's own exit code instead.
    """
    code = main(argv)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    run()
