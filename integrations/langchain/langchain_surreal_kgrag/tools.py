"""An agent tool over :class:`SurrealKGRetriever` that returns text for the model and the
``Document``s as the ``ToolMessage`` artifact (``response_format="content_and_artifact"``)."""

from __future__ import annotations

from langchain_core.documents import Document
from langchain_core.tools import StructuredTool
from pydantic import BaseModel, Field

from .retrievers import SurrealKGRetriever

DEFAULT_DESCRIPTION = (
    "Search the knowledge graph of documents for passages relevant to a question. "
    "Returns numbered passages with their titles and sources."
)


class KnowledgeGraphSearchInput(BaseModel):
    """Arguments the model fills in."""

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


def create_kg_search_tool(
    retriever: SurrealKGRetriever,
    *,
    name: str = "search_knowledge_graph",
    description: str = DEFAULT_DESCRIPTION,
) -> StructuredTool:
    """A ``StructuredTool`` whose content is :func:`format_documents` of the results and whose
    artifact is the list of ``Document``s (with ids, scores, concepts and chunk ids)."""

    def search(query: str, k: int | None = None) -> tuple[str, list[Document]]:
        documents = retriever.invoke(query, k=k)
        return format_documents(documents), documents

    async def asearch(query: str, k: int | None = None) -> tuple[str, list[Document]]:
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
