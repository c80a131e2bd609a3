"""An MCP server exposing the agent tools (optional extra: ``pip install 'surreal-kgrag[mcp]'``).

    surreal-kgrag-mcp --db surrealkv://kg          # or: python -m surreal_kgrag.mcp_server

It serves over stdio the same tools, with the same JSON schemas, as :class:`ToolDispatcher`;
a bad call comes back as a tool result with ``isError`` set and the dispatcher's error JSON as text.
``--access public,staff`` and ``--filter '{"tenant": "acme"}'`` bound everything the tools can read
(see :class:`~surreal_kgrag.Scope`). ``--allow-surql`` adds ``run_surql`` (read-only SurrealQL the
client's model writes; refused for a scope the database does not enforce itself). ``--max-edges``:
how many of a concept's edges a concept tool reads (``ToolDispatcher(max_edges=...)``), at most
:data:`MAX_EDGES_FLAG`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from contextlib import ExitStack
from typing import Any

try:
    import anyio
    from mcp import types
    from mcp.server import Server, ServerRequestContext
    from mcp.server.stdio import stdio_server
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError("the MCP server needs the `mcp` package (2.x): pip install 'surreal-kgrag[mcp]'") from error

from pydantic import ValidationError

from . import __version__
from .db import DEFAULT_URL, StoreConfig, SurrealStore
from .embed import in_own_process, resolve_embedder
from .errors import KGRagError
from .retrieval import RETRIEVERS, Scope
from .retrieval.options import access_labels, filter_spec
from .tools import ToolDispatcher
from .tools.models import DEFAULT_MAX_EDGES

#: The largest ``--max-edges``: a concept tool's call reads and joins up to that many edges, and
#: its time grows with them (ten times the default).
MAX_EDGES_FLAG = 10_000

INSTRUCTIONS = (
    "Knowledge-graph retrieval over documents, chunks and concepts. Start with search_chunks; use "
    "search_concepts to find concept names, then chunks_for_concept, documents_for_concept, "
    "related_concepts and concept_relations to follow them, and get_document to read a document."
)


def build_server(dispatcher: ToolDispatcher, *, name: str = "surreal-kgrag") -> Server[Any]:
    """An MCP ``Server`` whose tools are the dispatcher's; run it on any MCP transport."""
    tools = [
        types.Tool(name=f["name"], description=f["description"], input_schema=f["parameters"])
        for f in (schema["function"] for schema in dispatcher.schemas())
    ]

    async def list_tools(ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        answer = await dispatcher.acall(params.name, params.arguments or {})
        payload = json.loads(answer)
        return types.CallToolResult(
            content=[types.TextContent(text=answer)],
            structured_content=payload,
            is_error=set(payload) == {"error"},
        )

    return Server(name, version=__version__, instructions=INSTRUCTIONS, on_list_tools=list_tools, on_call_tool=call_tool)


async def serve_stdio(server: Server[Any]) -> None:
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def edge_count(text: str) -> int:
    """``--max-edges``: a whole number from 1 to :data:`MAX_EDGES_FLAG`."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= MAX_EDGES_FLAG:
        raise argparse.ArgumentTypeError(f"must be a whole number from 1 to {MAX_EDGES_FLAG:,}, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="surreal-kgrag-mcp", description="Serve surreal-kgrag's agent tools over MCP (stdio).")
    parser.add_argument("--db", help=f"database URL (default: $SURREAL_KGRAG_URL or {DEFAULT_URL})")
    parser.add_argument("--ns", help="namespace (default: $SURREAL_KGRAG_NS or kgrag)")
    parser.add_argument("--database", help="database (default: $SURREAL_KGRAG_DB or kgrag)")
    parser.add_argument("--user", help="root user name (default: $SURREAL_KGRAG_USER)")
    parser.add_argument("--password", help="password (default: $SURREAL_KGRAG_PASS)")
    parser.add_argument(
        "--mode", choices=sorted(RETRIEVERS), default="chunk", help="retriever behind search_chunks (default: chunk)"
    )
    parser.add_argument(
        "--access", type=access_labels, default=None,
        help="comma-separated access labels: serve only documents carrying one of them ('' serves nothing; "
        "default: no label restriction)",
    )
    parser.add_argument("--filter", type=filter_spec, default=None, help="JSON filter every served document must match")
    parser.add_argument(
        "--allow-surql", action="store_true",
        help="also offer run_surql: one read-only SurrealQL SELECT written by the client's model, with a row and "
        "time limit (with --access or --filter only on a store signed in as a record user; see the README)",
    )
    parser.add_argument(
        "--max-edges", type=edge_count, default=DEFAULT_MAX_EDGES,
        help=f"how many of a concept's edges (chunks mentioning it) a concept tool reads, at most {MAX_EDGES_FLAG:,}; "
        f"an answer about a concept with more says truncated (default: {DEFAULT_MAX_EDGES})",
    )
    parser.add_argument(
        "--embedder", default=None,
        help="the embedder the store was built with: sentence-transformers name or path, or openai:<model> "
        "(default: all-MiniLM-L6-v2)",
    )
    parser.add_argument(
        "--embedding-process", action="store_true",
        help="embed questions with the local model in a child process of its own (0.5 GB more memory for MiniLM), so "
        "a search runs its queries that need no vector meanwhile (surreal_kgrag.embed.in_own_process)",
    )
    return parser


def build_dispatcher(store: SurrealStore, args: argparse.Namespace, embedder: Any) -> ToolDispatcher:
    """The dispatcher the parsed command line asks for, over ``store``."""
    return ToolDispatcher(
        store,
        mode=args.mode,
        embedder=embedder,
        scope=Scope(access=args.access, filters=args.filter),
        allow_surql=args.allow_surql,
        max_edges=args.max_edges,
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        config = StoreConfig.from_env(
            url=args.db, namespace=args.ns, database=args.database, username=args.user, password=args.password
        )
        with SurrealStore(config=config) as store, ExitStack() as stack:
            embedder = resolve_embedder(args.embedder)
            if args.embedding_process:
                if args.mode == "chunk":
                    print("surreal-kgrag-mcp: --embedding-process gains nothing with --mode chunk (its first query needs the "
                          "vector, so it embeds here); use --mode hybrid, graph or concept", file=sys.stderr)
                embedder = stack.enter_context(in_own_process(embedder))
            server = build_server(build_dispatcher(store, args, embedder))
            anyio.run(serve_stdio, server)
    except (KGRagError, ValidationError) as error:
        print(f"surreal-kgrag-mcp: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
