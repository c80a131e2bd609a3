"""Errors a tool reports back to the model, and their JSON form."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from ..errors import (
    ConfigurationError,
    KGRagError,
    ModelNotAvailableError,
    QueryExecutionError,
    SchemaMismatchError,
    StoreConnectionError,
)
from ..llm.guard import ReadonlyQueryError


class ToolError(KGRagError):
    """A tool call that cannot be answered; ``type`` and ``details`` go into the error JSON."""

    type: ClassVar[str] = "tool_failed"

    def __init__(self, message: str, details: Mapping[str, Any] | None = None) -> None:
        super().__init__(message)
        self.details = dict(details or {})


class UnknownToolError(ToolError):
    type = "unknown_tool"


class InvalidArgumentsError(ToolError, ValueError):
    type = "invalid_arguments"


class NotFoundError(ToolError, LookupError):
    type = "not_found"


class UnsupportedArgumentError(ToolError):
    type = "unsupported"


_ERROR_TYPES: tuple[tuple[type[KGRagError], str], ...] = (
    (ConfigurationError, "invalid_arguments"),
    (QueryExecutionError, "query_failed"),
    (StoreConnectionError, "store_unavailable"),
    (SchemaMismatchError, "store_mismatch"),
    (ModelNotAvailableError, "model_unavailable"),
)


def error_payload(error: KGRagError) -> dict[str, Any]:
    """``{"error": {"type", "message", "details"}}`` for an error raised by a tool."""
    if isinstance(error, ToolError):
        kind, details = error.type, error.details
    elif isinstance(error, ReadonlyQueryError):  # run_surql: the rule the statement broke
        kind, details = "query_refused", {"code": error.code}
    else:
        kind = next((name for cls, name in _ERROR_TYPES if isinstance(error, cls)), ToolError.type)
        details = {}
    return {"error": {"type": kind, "message": str(error), "details": details}}


