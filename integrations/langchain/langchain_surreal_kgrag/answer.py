"""``create_answer_runnable``: the core's cited answers (``surreal_kgrag.llm.answer``) as a LangChain runnable."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.runnables import Runnable, RunnableLambda

from surreal_kgrag.llm import Answer, AnswerConfig, LLMClient, LLMSettings, aanswer, answer


def create_answer_runnable(
    retriever: Any, llm: LLMSettings | LLMClient, *, k: int | None = None, config: AnswerConfig | None = None
) -> Runnable[str | Mapping[str, Any], Answer]:
    """A runnable that answers a question with checked citations.

    ``retriever``: a :class:`~langchain_surreal_kgrag.SurrealKGRetriever`, a core retriever or a store
    (it is resolved, and its store opened, on the first call). Input: the question, or
    ``{"question": ..., "k": ..., "filters": ...}``. Output: the core's ``Answer`` (``answer``,
    ``supporting``, ``citations``, ``dropped_citations``, ``retrieval``). ``ainvoke`` is native async.
    """
    client = llm if isinstance(llm, LLMClient) else LLMClient(llm)

    def options(value: str | Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        if isinstance(value, str):
            return value, {"k": k, "config": config}
        return str(value["question"]), {"k": value.get("k", k), "filters": value.get("filters"), "config": config}

    def run(value: str | Mapping[str, Any]) -> Answer:
        question, kwargs = options(value)
        return answer(question, retriever, client, **kwargs)

    async def arun(value: str | Mapping[str, Any]) -> Answer:
        question, kwargs = options(value)
        return await aanswer(question, retriever, client, **kwargs)

    return RunnableLambda(run, afunc=arun, name="surreal_kgrag_answer")
