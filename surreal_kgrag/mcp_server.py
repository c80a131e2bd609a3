"""An MCP server exposing the agent tools (optional extra: ``pip install 'surreal-kgrag[mcp]'``).

    surreal-kgrag-mcp --db surrealkv://kg          # or: python -m surreal_kgrag.mcp_server

It serves over stdio the same tools, with the same JSON schemas, as :class:`ToolDispatcher`;
a bad call comes back as a tool result with ``isError`` set and the dispatcher's error JSON as text.
``--access public,staff`` and ``--filter '{"tenant": "acme"}'`` bound everything the tools can read
(see :class:`~surreal_kgrag.Scope`). ``--allow-surql`` adds ``run_surql`` (read-only SurrealQL the
client's model writes; refused for a scope the database does not enforce itself). ``--max-edges``:
how many of a concept's edges a concept tool reads (``ToolDispatcher(max_edges=...)``), at most
:data:`MAX_EDGES_FLAG`.

A stdin line that is not a JSON-RPC message is answered with JSON-RPC's error for it, ``id`` null
unless the line is JSON whose ``id`` can be read: -32700 "Parse error" for one that is not JSON (or
longer than :data:`MAX_LINE_BYTES`, skipped unread), -32600 "Invalid Request" for JSON that is no
request, notification or response; ``data`` says what was wrong. The server serves on.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from typing import Any, BinaryIO, NamedTuple

try:
    import anyio
    from mcp import types
    from mcp.server import Server, ServerRequestContext
    from mcp.shared.message import SessionMessage
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError("the MCP server needs the `mcp` package (2.x): pip install 'surreal-kgrag[mcp]'") from error

import pydantic_core
from pydantic import ValidationError

from . import __version__
from .db import DEFAULT_URL, StoreConfig, SurrealStore
from .embed import in_own_process, resolve_embedder
from .errors import KGRagError, describe_validation
from .retrieval import RETRIEVERS, Scope
from .retrieval.options import access_labels, filter_spec
from .tools import ToolDispatcher
from .tools.models import DEFAULT_MAX_EDGES

#: The largest ``--max-edges``: a concept tool's call reads and joins up to that many edges, and
#: its time grows with them (ten times the default).
MAX_EDGES_FLAG = 10_000

#: The longest stdin line (one JSON-RPC message) the server reads, in bytes; a longer one is read
#: through without being kept and answered with a parse error. The largest tool call, with a filter
#: of 1,000,000 characters of text (``MAX_FILTER_CHARS``), fits.
MAX_LINE_BYTES = 16 * 1024 * 1024

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
    """Serve ``server`` over stdin and stdout, one JSON-RPC message a line, until stdin ends.

    The SDK's ``stdio_server`` passes a line it cannot validate to the server as an exception, which
    the server drops, so the client would wait for an answer forever; here such a line is answered
    (``_unreadable_line``) and never reaches the server.
    """
    to_server, from_wire = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    to_wire, from_server = anyio.create_memory_object_stream[SessionMessage](0)
    answers = to_wire.clone()

    with _stdio_wire() as (wire_in, wire_out):

        async def read() -> None:
            async with to_server, answers:
                while (line := await anyio.to_thread.run_sync(_read_line, wire_in, abandon_on_cancel=True)) is not None:
                    if isinstance(line, Overlong):
                        detail = f"a line of {line.length:,} bytes, more than the {MAX_LINE_BYTES:,} this server reads"
                        await answers.send(SessionMessage(_error(None, types.PARSE_ERROR, "Parse error", detail)))
                        continue
                    if not line.strip():  # a blank line carries no message
                        continue
                    text = line.decode("utf-8", "replace")  # as the SDK's stdio_server decodes
                    try:
                        message = types.jsonrpc_message_adapter.validate_json(text, by_name=False)
                    except ValidationError as error:
                        await answers.send(SessionMessage(_unreadable_line(text, error)))
                    else:
                        await to_server.send(SessionMessage(message))

        async def write() -> None:
            async with from_server:
                async for item in from_server:
                    data = item.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                    await anyio.to_thread.run_sync(_write, wire_out, data.encode())

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(read)
            tasks.start_soon(write)
            await server.run(from_wire, to_wire, server.create_initialization_options())


_JSON_KINDS = {list: "an array", str: "a string", bool: "true or false", type(None): "null"}


def _unreadable_line(text: str, error: ValidationError) -> types.JSONRPCError:
    """The answer to a line that failed to validate as a JSON-RPC message with ``error``: -32700 if
    it is not JSON, else -32600 with the line's ``id`` where it has a valid one. Its ``data`` is the
    first of the validation errors, without the input."""
    first = error.errors(include_url=False, include_input=False)[0]
    if first["type"] == "json_invalid":
        return _error(None, types.PARSE_ERROR, "Parse error", first["msg"])
    value = pydantic_core.from_json(text)  # JSON, or it would have been json_invalid
    request_id = value.get("id") if isinstance(value, dict) else None
    if isinstance(request_id, bool) or not isinstance(request_id, (int, str)):
        request_id = None
    if isinstance(value, dict):
        where = ".".join(str(part) for part in first["loc"])
        detail = f"{where}: {first['msg']}"
    else:
        detail = f"a JSON-RPC message is a JSON object, not {_JSON_KINDS.get(type(value), 'a number')}"
    return _error(request_id, types.INVALID_REQUEST, "Invalid Request", detail[:500])


def _error(request_id: int | str | None, code: int, message: str, data: str) -> types.JSONRPCError:
    return types.JSONRPCError(jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=message, data=data))


class Overlong(NamedTuple):
    """A line longer than :data:`MAX_LINE_BYTES`, read to its end without being kept."""

    length: int


def _read_line(wire: BinaryIO) -> bytes | Overlong | None:
    """The next line of ``wire``, None at its end."""
    line = wire.readline(MAX_LINE_BYTES + 1)
    if len(line) <= MAX_LINE_BYTES or line.endswith(b"\n"):
        return line or None
    length = len(line)
    while (rest := wire.readline(1 << 20)) and not rest.endswith(b"\n"):
        length += len(rest)
    return Overlong(length + len(rest))


def _write(wire: BinaryIO, data: bytes) -> None:
    wire.write(data)
    wire.flush()


@contextmanager
def _stdio_wire() -> Iterator[tuple[BinaryIO, BinaryIO]]:
    """Stdin and stdout as the wire, on duplicates of descriptors 0 and 1 that child processes do not
    inherit; meanwhile 0 reads the null device and 1 writes to stderr, so what a library or a child
    process reads or prints stays off the wire (as the SDK's ``stdio_server`` does). The duplicates
    stay open: a reading thread may still wait on one after the server stops."""
    sys.stdout.flush()
    wire_in, wire_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    try:
        yield open(wire_in, "rb", closefd=False), open(wire_out, "wb", closefd=False)  # noqa: SIM115 - never closed
    finally:
        os.dup2(wire_in, 0)
        os.dup2(wire_out, 1)


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
    except ValidationError as error:
        print(f"surreal-kgrag-mcp: {describe_validation(error)}", file=sys.stderr)
        return 1
    except KGRagError as error:
        print(f"surreal-kgrag-mcp: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
