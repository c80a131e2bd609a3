"""``SurrealKGAnswerQueryEngine``: the core's cited answers (``surreal_kgrag.llm.answer``) as a LlamaIndex query engine."""

from __future__ import annotations

from typing import Any

from llama_index.core.base.base_query_engine import BaseQueryEngine
from llama_index.core.base.response.schema import Response
from llama_index.core.callbacks import CallbackManager
from llama_index.core.schema import NodeWithScore, QueryBundle

from surreal_kgrag.llm import Answer, AnswerConfig, LLMClient, LLMSettings, aanswer, answer

from .base import chunk_node


class SurrealKGAnswerQueryEngine(BaseQueryEngine):
    """Answers with citations checked against the retrieved chunks.

    ``retriever``: a :class:`SurrealKGRetriever`, a core retriever or a store (resolved on the first
    query). ``Response.response`` is the answer (or the "cannot answer" text); ``source_nodes`` are
    the chunks shown to the model (the best ``chunks_per_document`` of each document), the cited
    ones first with ``metadata["cited"] = True``, each related to its neighbours like the retriever's;
    ``Response.metadata`` holds ``supporting`` (title -> sentence), ``dropped_citations``,
    ``answered`` and the whole core ``answer``.
    """

    def __init__(
        self,
        retriever: Any,
        llm: LLMSettings | LLMClient,
        *,
        k: int | None = None,
        config: AnswerConfig | None = None,
        callback_manager: CallbackManager | None = None,
    ) -> None:
        super().__init__(callback_manager)
        self._retriever = retriever
        self._client = llm if isinstance(llm, LLMClient) else LLMClient(llm)
        self._k = k
        self._config = config

    def _get_prompt_modules(self) -> dict[str, Any]:
        return {}

    def _query(self, query_bundle: QueryBundle) -> Response:
        return _response(answer(query_bundle.query_str, self._retriever, self._client, k=self._k, config=self._config))

    async def _aquery(self, query_bundle: QueryBundle) -> Response:
        return _response(await aanswer(query_bundle.query_str, self._retriever, self._client, k=self._k, config=self._config))


def _response(result: Answer) -> Response:
    cited = {citation.chunk_id for citation in result.citations}
    retrieved = {chunk.id: (document, chunk) for document in result.retrieval.documents for chunk in document.chunks}
    nodes = []
    for chunk_id in result.shown:
        document, chunk = retrieved[chunk_id]
        node = chunk_node(document, chunk, result.retrieval.mode, document.chunk_count)
        node.metadata["cited"] = chunk_id in cited
        nodes.append(NodeWithScore(node=node, score=chunk.score))
    nodes.sort(key=lambda n: not n.node.metadata["cited"])  # stable: cited first, retrieval order kept
    metadata = {
        "answered": result.answered,
        "supporting": result.supporting,
        "dropped_citations": result.dropped_citations,
        "answer": result,
    }
    return Response(response=result.answer, source_nodes=nodes, metadata=metadata)
