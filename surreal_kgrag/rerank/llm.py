"""An OpenAI-compatible chat model orders numbered passages."""

from __future__ import annotations

import asyncio
import json
import warnings
import weakref
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import BaseModel, ValidationError

from ..db import checked_int
from ..embed import openai_client
from ..errors import ConfigurationError
from ..retrieval import RetrievedDocument
from .base import Ranking, RankingReranker, RerankWarning, input_order, passage_text

if TYPE_CHECKING:
    import openai

_LLM_SYSTEM_PROMPT = (
    "You rank passages by how well they answer a search query. Reply with a JSON object only, of the "
    'form {"ranking": [passage numbers, most relevant first]}, listing every passage number once.'
)


class _LLMRanking(BaseModel):
    ranking: list[int]


class LLMReranker(RankingReranker):
    """Asks an OpenAI-compatible chat model to order numbered passages, as JSON ``{"ranking": [...]}``.

    Unknown and repeated numbers in the reply are ignored; passages it leaves out follow in input
    order. Reranked documents score ``(n - position) / n``. On any failure (HTTP error, timeout,
    a reply that is not JSON or not that shape) the input order and scores are kept and a
    :class:`RerankWarning` gives the reason. ``api_key`` defaults to the SDK's ``OPENAI_API_KEY``.
    ``json_mode`` sends ``response_format={"type": "json_object"}`` (for servers that support it).
    """

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = 60.0,
        max_retries: int = 2,
        temperature: float = 0.0,
        chunks: int = 1,
        title: bool = True,
        max_passage_chars: int = 2000,
        json_mode: bool = False,
        system_prompt: str = _LLM_SYSTEM_PROMPT,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ConfigurationError(f"model must be a non-empty string, got {model!r}")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
            raise ConfigurationError(f"timeout must be a positive number of seconds, got {timeout!r}")
        self.model = model
        self.base_url = base_url
        self.timeout = float(timeout)
        self.max_retries = checked_int("max_retries", max_retries, minimum=0)
        self.temperature = float(temperature)
        self.chunks = checked_int("chunks", chunks)
        self.title = bool(title)
        self.max_passage_chars = checked_int("max_passage_chars", max_passage_chars, maximum=1_000_000)
        self.json_mode = bool(json_mode)
        self.system_prompt = system_prompt
        self._api_key = api_key
        self._client: openai.OpenAI | None = None
        # httpx async clients are bound to the event loop that first used them.
        self._async_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, openai.AsyncOpenAI] = (
            weakref.WeakKeyDictionary()
        )

    def _rank(self, query: str, documents: list[RetrievedDocument], query_embedding: np.ndarray | None) -> Ranking:
        import openai

        if self._client is None:
            self._client = openai_client(openai.OpenAI, self._client_options())
        try:
            response = self._client.chat.completions.create(**self._request(query, documents))
        except openai.APIError as exc:
            return self._fallback(documents, f"the request failed: {exc}")
        return self._ranking(response, documents)

    async def _arank(
        self, query: str, documents: list[RetrievedDocument], query_embedding: np.ndarray | None
    ) -> Ranking:
        import openai

        loop = asyncio.get_running_loop()
        client = self._async_clients.get(loop)
        if client is None:
            client = self._async_clients[loop] = openai_client(openai.AsyncOpenAI, self._client_options())
        try:
            response = await client.chat.completions.create(**self._request(query, documents))
        except openai.APIError as exc:
            return self._fallback(documents, f"the request failed: {exc}")
        return self._ranking(response, documents)

    def close(self) -> None:
        """Close the synchronous HTTP client (async clients close with their event loop)."""
        if self._client is not None:
            self._client.close()
            self._client = None

    def _client_options(self) -> dict[str, Any]:
        # None lets the SDK use OPENAI_API_KEY / OPENAI_BASE_URL, then its defaults
        return {"api_key": self._api_key, "base_url": self.base_url, "timeout": self.timeout, "max_retries": self.max_retries}

    def _request(self, query: str, documents: list[RetrievedDocument]) -> dict[str, Any]:
        passages = "\n\n".join(
            f"[{i}] {passage_text(doc, chunks=self.chunks, title=self.title)[: self.max_passage_chars]}"
            for i, doc in enumerate(documents, start=1)
        )
        request: dict[str, Any] = {
            "model": self.model,
            "temperature": self.temperature,
            "messages": [
                {"role": "system", "content": self.system_prompt},
                {"role": "user", "content": f"Query: {query}\n\nPassages:\n{passages}"},
            ],
        }
        if self.json_mode:
            request["response_format"] = {"type": "json_object"}
        return request

    def _ranking(self, response: Any, documents: list[RetrievedDocument]) -> Ranking:
        choices = getattr(response, "choices", None) or []
        content = choices[0].message.content if choices else None
        if not content:
            return self._fallback(documents, "the reply had no content")
        try:
            numbers = _LLMRanking.model_validate(_json_object(content)).ranking
        except (json.JSONDecodeError, ValidationError) as exc:
            return self._fallback(documents, f"the reply is not JSON of the form {{\"ranking\": [numbers]}}: {exc}")
        order = list(dict.fromkeys(n - 1 for n in numbers if 1 <= n <= len(documents)))
        if not order:
            return self._fallback(documents, f"the reply named no passage number between 1 and {len(documents)}")
        n = len(documents)
        named = set(order)
        order += [i for i in range(n) if i not in named]
        return [(i, (n - position) / n) for position, i in enumerate(order)]

    def _fallback(self, documents: list[RetrievedDocument], reason: str) -> Ranking:
        warnings.warn(f"{self!r} kept the input order: {reason}", RerankWarning, stacklevel=4)
        return input_order(documents)

    def __repr__(self) -> str:
        return f"LLMReranker({self.model!r})"


def _json_object(text: str) -> Any:
    """Parse a reply that should be JSON, also when the model wrapped it in prose or a code fence."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        start, end = text.find("{"), text.rfind("}")
        if start < 0 or end <= start:
            raise
        return json.loads(text[start : end + 1])
