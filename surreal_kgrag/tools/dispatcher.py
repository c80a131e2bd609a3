"""``ToolDispatcher``: publishes the tools' JSON schemas and answers calls, sync and async."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from ..db import SurrealStore
from ..embed import Embedder, resolve_embedder
from ..errors import ConfigurationError, KGRagError, validation_problems
from ..llm.readonly import ReadonlyLimits
from ..retrieval import BaseRetriever, Scope, make_retriever
from ..retrieval import plan as plans
from ..retrieval.filters import MAX_FILTER_DEPTH
from .catalogue import RUN_SURQL, TOOLS, Tool
from .errors import InvalidArgumentsError, UnknownToolError, error_payload
from .models import DEFAULT_MAX_EDGES, ToolArguments

logger = logging.getLogger(__name__)


class ToolDispatcher:
    """Runs the tools over one store, inside one scope.

    ``search_chunks`` uses ``retriever`` when given (any mode: chunk, concept, hybrid, graph...; it
    must be on ``store``), otherwise ``make_retriever(mode, store, embedder=embedder)``. Every tool
    reads within the retriever's scope narrowed by ``scope`` (see :class:`~surreal_kgrag.Scope`):
    a dispatcher can restrict what its retriever sees, never widen it. ``tools`` limits the
    catalogue to some names. ``allow_surql=True`` also offers ``run_surql``, which runs a
    read-only SurrealQL statement the model writes, within ``surql_limits``; a scoped dispatcher
    runs it only where the database enforces the scope (a record-user store), and refuses
    otherwise. A concept tool reads at most ``max_edges`` of a concept's edges, however many
    chunks mention it: the answer says ``truncated`` where it had more. Nothing touches the
    database until the first call.
    """

    def __init__(
        self,
        store: SurrealStore,
        *,
        embedder: Embedder | Any = None,
        retriever: BaseRetriever | None = None,
        mode: str = "chunk",
        tools: Iterable[str] | None = None,
        scope: Scope | None = None,
        allow_surql: bool = False,
        surql_limits: ReadonlyLimits | None = None,
        max_edges: int = DEFAULT_MAX_EDGES,
    ) -> None:
        if retriever is not None and retriever.store is not store:
            raise ConfigurationError("the retriever given to ToolDispatcher must be on the dispatcher's store")
        if isinstance(max_edges, bool) or not isinstance(max_edges, int) or max_edges < 1:
            raise ConfigurationError(f"max_edges must be a positive integer, got {max_edges!r}")
        self.store = store
        self.retriever = retriever if retriever is not None else make_retriever(mode, store, embedder=embedder)
        self.embedder = self.retriever.embedder if embedder is None else resolve_embedder(embedder)
        self.scope = self.retriever.scope.narrow(scope)
        self.max_edges = max_edges
        self.surql_limits = surql_limits or ReadonlyLimits()
        catalogue = {tool.name: tool for tool in (*TOOLS, RUN_SURQL) if allow_surql or tool is not RUN_SURQL}
        wanted = list(catalogue) if tools is None else list(tools)
        unknown = sorted(set(wanted) - set(catalogue))
        if unknown:
            hint = " (run_surql needs allow_surql=True)" if RUN_SURQL.name in unknown and not allow_surql else ""
            raise ConfigurationError(f"unknown tools {unknown}: choose from {list(catalogue)}{hint}")
        self.tools = {name: catalogue[name] for name in wanted}

    def __repr__(self) -> str:
        return f"ToolDispatcher({self.store!r}, tools={list(self.tools)}, scope={self.scope!r})"

    def schemas(self) -> list[dict[str, Any]]:
        """The tools in OpenAI's function-calling format, for ``tools=`` of a chat completion."""
        return [tool.schema() for tool in self.tools.values()]

    # -- typed calls: return the result model, raise ToolError / KGRagError -----------------------

    def invoke(self, name: str, arguments: str | Mapping[str, Any] | BaseModel | None = None) -> BaseModel:
        """Run a tool and return its typed result; a bad call raises :class:`ToolError` (or another
        :class:`~surreal_kgrag.errors.KGRagError` from the store or the embedder)."""
        tool, args = self._parse(name, arguments)
        return plans.run(self.store, tool.plan(self, args))

    async def ainvoke(self, name: str, arguments: str | Mapping[str, Any] | BaseModel | None = None) -> BaseModel:
        tool, args = self._parse(name, arguments)
        return await plans.arun(self.store, tool.plan(self, args))

    # -- agent-loop calls: always return JSON -----------------------------------------------------

    def call(self, name: str, arguments: str | Mapping[str, Any] | None = None) -> str:
        """Run a tool call and return its result as JSON, or an error JSON the model can act on."""
        try:
            return self.invoke(name, arguments).model_dump_json()
        except Exception as error:
            return _error_json(name, error)

    async def acall(self, name: str, arguments: str | Mapping[str, Any] | None = None) -> str:
        try:
            return (await self.ainvoke(name, arguments)).model_dump_json()
        except Exception as error:
            return _error_json(name, error)

    # -- internals --------------------------------------------------------------------------------

    def _parse(self, name: str, arguments: str | Mapping[str, Any] | BaseModel | None) -> tuple[Tool, ToolArguments]:
        tool = self.tools.get(name) if isinstance(name, str) else None
        if tool is None:
            raise UnknownToolError(f"there is no tool named {name!r}", {"available": list(self.tools)})
        if isinstance(arguments, tool.arguments):
            return tool, arguments
        if isinstance(arguments, BaseModel):
            arguments = arguments.model_dump()
        if arguments is None or arguments == "":
            arguments = {}
        if isinstance(arguments, (str, bytes)):
            try:
                arguments = json.loads(arguments)
            except RecursionError:
                raise InvalidArgumentsError(
                    f"the arguments for {name} are nested too deeply to read; a filter nests at most {MAX_FILTER_DEPTH} levels", {}
                ) from None
            except json.JSONDecodeError as error:
                raise InvalidArgumentsError(
                    f"the arguments for {name} are not valid JSON ({error.msg} at line {error.lineno} column {error.colno}); "
                    "send a JSON object",
                    {"position": error.pos},
                ) from error
            except ValueError as error:  # bytes that are not UTF-8, an integer of more than 4,300 digits
                reason = str(error).split(";")[0]
                raise InvalidArgumentsError(f"the arguments for {name} cannot be read as JSON: {reason}; send a JSON object", {}) from None
        if not isinstance(arguments, Mapping):
            raise InvalidArgumentsError(
                f"the arguments for {name} must be a JSON object, got {type(arguments).__name__}", {}
            )
        try:
            args = tool.arguments.model_validate(dict(arguments))
        except ValidationError as error:
            problems = [{"field": field or "(arguments)", "problem": problem} for field, problem in validation_problems(error)]
            summary = "; ".join(f"{p['field']}: {p['problem']}" for p in problems)
            raise InvalidArgumentsError(f"invalid arguments for {name}: {summary}", {"errors": problems}) from error
        return tool, args


def _error_json(name: str, error: Exception) -> str:
    """The one place where every failure of a call becomes an answer for the model. Errors the
    package raises on purpose carry their type; anything else is a bug, logged with its traceback
    and reported as ``internal_error`` so the agent loop can go on."""
    if isinstance(error, KGRagError):
        payload = error_payload(error)
    else:
        logger.exception("tool %r failed unexpectedly", name)
        payload = {"error": {"type": "internal_error", "message": f"{type(error).__name__}: {error}", "details": {}}}
    return json.dumps(payload, ensure_ascii=False)
