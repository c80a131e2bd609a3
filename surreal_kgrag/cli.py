"""``surreal-kgrag``: ingest documents, inspect a store, query it.

Every command takes ``--db URL`` (default: ``$SURREAL_KGRAG_URL``, else an embedded ``surrealkv://``
store in the working directory), ``--ns`` and ``--database``, and prints JSON with ``--json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ValidationError

from .errors import KGRagError
from .store import DEFAULT_URL, StoreConfig, SurrealStore


def _store(args: argparse.Namespace) -> SurrealStore:
    config = StoreConfig.from_env(url=args.db, namespace=args.ns, database=args.database, username=args.user, password=args.password)
    return SurrealStore(config=config)


def _emit(args: argparse.Namespace, payload: BaseModel | dict[str, Any], text: str) -> None:
    if args.json:
        data = payload.model_dump(mode="json") if isinstance(payload, BaseModel) else payload
        print(json.dumps(data, ensure_ascii=False, indent=2))
    else:
        print(text)


def cmd_ingest(args: argparse.Namespace) -> int:
    from .chunking import SentenceChunker
    from .ingest import IngestConfig, Ingestor

    config = IngestConfig(
        chunker=SentenceChunker(max_tokens=args.max_tokens, overlap_tokens=args.overlap),
        show_progress=False if args.no_progress else None,
    )
    with _store(args) as store:
        ingestor = Ingestor(store, embedder=args.embedder, extractor=args.spacy_model, config=config)
        summary = ingestor.ingest(args.paths, glob=args.glob)
    for failure in summary.failures:
        print(f"skipped {failure}", file=sys.stderr)
    t = summary.timings
    _emit(
        args,
        summary,
        f"added {summary.added}, updated {summary.updated}, skipped {summary.skipped} unchanged, "
        f"failed {summary.failed}; {summary.chunks} chunks, {summary.concepts} new concepts, {summary.edges} edges "
        f"in {summary.seconds:.1f}s (extract {t.get('extract', 0):.1f}s, embed {t.get('embed', 0):.1f}s, "
        f"write {t.get('write', 0):.1f}s, index {t.get('index', 0):.1f}s)",
    )
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    from .ingest import delete_documents

    with _store(args) as store:
        deleted = delete_documents(store, args.keys)
    _emit(args, {"deleted": deleted}, f"deleted {deleted} of {len(args.keys)} documents")
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    from .stats import get_stats

    with _store(args) as store:
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
    _emit(args, stats, "\n".join(lines))
    return 0


def cmd_query(args: argparse.Namespace) -> int:
    from .retrieve import make_retriever

    with _store(args) as store:
        retriever = make_retriever(args.mode, store, embedder=args.embedder)
        result = retriever.search(args.text, k=args.k)
    lines = []
    for rank, doc in enumerate(result.documents, 1):
        lines.append(f"{rank}. {doc.title or doc.id}  score {doc.score:.3f}  ({doc.source})")
        best = doc.chunks[0]
        snippet = " ".join(best.content.split())
        lines.append(f"   {snippet[:200]}{'...' if len(snippet) > 200 else ''}")
        if args.explain:
            for concept in doc.concepts:
                lines.append(f"   via concept '{concept.name}' (similarity {concept.score:.3f})")
    if not lines:
        lines.append("no results")
    _emit(args, result, "\n".join(lines))
    return 0


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
    ingest.set_defaults(func=cmd_ingest)

    delete = commands.add_parser("delete", parents=[common], help="delete documents by key (file path or record id)")
    delete.add_argument("keys", nargs="+")
    delete.set_defaults(func=cmd_delete)

    query = commands.add_parser("query", parents=[common], help="retrieve the documents that best answer a question")
    query.add_argument("text", help="the question")
    query.add_argument("--mode", choices=["chunk", "concept"], default="chunk", help="retrieval mode (default: chunk)")
    query.add_argument("-k", type=int, default=5, help="documents to return (default: 5)")
    query.add_argument("--explain", action="store_true", help="show the concepts that led to each document")
    query.set_defaults(func=cmd_query)

    stats = commands.add_parser("stats", parents=[common], help="counts and index state")
    stats.set_defaults(func=cmd_stats)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (KGRagError, ValidationError) as error:
        print(f"surreal-kgrag {args.command}: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
