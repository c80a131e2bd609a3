"""An agent tool over :class:`SurrealKGRetriever` that returns text for the model and the
``Document``s as the ``ToolMessage`` artifact (``response_format="content_and_artifact"``).

The arguments are checked as strictly as the core's agent tools (``surreal_kgrag.tools``): ``k`` is
an integer, not ``True`` or ``"3"``, and unknown arguments are refused. A query the core refuses
(empty, longer than ``max_query_chars``) raises a ``ToolException`` with the core's message, which an
agent built with ``handle_tool_error=True`` hands back to the model."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from langchain_core.documents import Document
from langchain_core.tools import StructuredTool, ToolException
from pydantic import Field

from surreal_kgrag.errors import ConfigurationError
from surreal_kgrag.tools import ToolArguments

from .retrievers import SurrealKGRetriever

DEFAULT_DESCRIPTION = (
    "Search the knowledge graph of documents for passages relevant to a question. "
    "Returns numbered passages with their titles and sources."
)


class KnowledgeGraphSearchInput(ToolArguments):
    """Arguments the model fills in: strict (no coercion of ``"3"`` or ``True`` to an integer), unknown
    fields refused, surrounding whitespace dropped, as the core's tool arguments."""

    query: str = Field(description="a question or keywords to look up")
    k: int | None = Field(None, ge=1, le=20, description="number of documents to return (default: the retriever's k)")


def format_documents(documents: list[Document]) -> str:
    """Numbered passages with title and source, so the model can cite them."""
    if not documents:
        return "No relevant documents found."
    blocks = []
    for number, doc in enumerate(documents, 1):
        title = doc.metadata.get("title") or doc.metadata.get("document_id")
        blocks.append(f"[{number}] {title} ({doc.metadata.get('source')})\n{doc.page_content}")
    return "\n\n".join(blocks)


@contextmanager
def _refusal_as_tool_exception() -> Iterator[None]:
    """A request the core refuses (``ConfigurationError``: the caller's arguments, which the model can
    fix) as a ``ToolException`` with the core's message; store and model failures pass through."""
    try:
        yield
    except ConfigurationError as error:
        raise ToolException(str(error)) from error


def create_kg_search_tool(
    retriever: SurrealKGRetriever,
    *,
    name: str = "search_knowledge_graph",
    description: str = DEFAULT_DESCRIPTION,
) -> StructuredTool:
    """A ``StructuredTool`` whose content is :func:`format_documents` of the results and whose
    artifact is the list of ``Document``s (with ids, scores, concepts and chunk ids).

    Invalid arguments raise pydantic's ``ValidationError`` (``handle_validation_error`` turns it into
    a message); a query the core refuses raises ``ToolException`` (``handle_tool_error``)."""

    def search(query: str, k: int | None = None) -> tuple[str, list[Document]]:
        with _refusal_as_tool_exception():
            documents = retriever.invoke(query, k=k)
        return format_documents(documents), documents

    async def asearch(query: str, k: int | None = None) -> tuple[str, list[Document]]:
        with _refusal_as_tool_exception():
            documents = await retriever.ainvoke(query, k=k)
        return format_documents(documents), documents

    return StructuredTool(
        name=name,
        description=description,
        func=search,
        coroutine=asearch,
        args_schema=KnowledgeGraphSearchInput,
        response_format="content_and_artifact",
    )
