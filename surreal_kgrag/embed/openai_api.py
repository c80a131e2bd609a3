"""OpenAI's embeddings endpoint, or any OpenAI-compatible server."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..checks import batches
from ..errors import ConfigurationError, KGRagError
from .base import BaseEmbedder, check_text, check_texts, positive_int

if TYPE_CHECKING:
    import openai


class OpenAIEmbedder(BaseEmbedder):
    """OpenAI's embeddings endpoint, or any OpenAI-compatible server (``base_url``).

    Requests hold at most ``batch_size`` texts. ``api_key`` defaults to the SDK's own lookup
    (``OPENAI_API_KEY``) when the first request is made. The dimension is ``dimensions`` when set,
    otherwise learned from the first response (``.dimension`` makes a probe request if needed).
    """

    #: The service embeds while this process waits on a socket: a search runs its other parts meanwhile.
    embeds_elsewhere = True

    def __init__(
        self,
        model: str = "text-embedding-3-small",
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        dimensions: int | None = None,
        batch_size: int = 256,
        timeout: float = 60.0,
        max_retries: int = 2,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ConfigurationError(f"model must be a non-empty string, got {model!r}")
        if dimensions is not None:
            dimensions = positive_int("dimensions", dimensions)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
            raise ConfigurationError(f"timeout must be a positive number of seconds, got {timeout!r}")
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise ConfigurationError(f"max_retries must be a non-negative integer, got {max_retries!r}")
        self.model = model
        self.base_url = base_url
        self.dimensions = dimensions
        self.batch_size = positive_int("batch_size", batch_size)
        self.timeout = float(timeout)
        self.max_retries = max_retries
        self._api_key = api_key
        self._dimension = dimensions
        self._client: openai.OpenAI | None = None
        # httpx async clients are bound to the event loop that first used them.
        self._async_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, openai.AsyncOpenAI] = (
            weakref.WeakKeyDictionary()
        )

    @property
    def name(self) -> str:
        return f"openai/{self.model}"

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        texts = check_texts(texts)
        if not texts:
            return self._empty()
        client = self._sync_client()
        vectors: list[list[float]] = []
        for batch in batches(texts, self.batch_size):
            vectors.extend(self._parse(client.embeddings.create(**self._request(batch)), len(batch)))
        return self._finish(vectors, len(texts))

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_documents([check_text(text)])[0]

    async def aembed_documents(self, texts: Sequence[str]) -> np.ndarray:
        texts = check_texts(texts)
        if not texts:
            return self._empty()
        client = self._async_client()
        vectors: list[list[float]] = []
        for batch in batches(texts, self.batch_size):
            response = await client.embeddings.create(**self._request(batch))
            vectors.extend(self._parse(response, len(batch)))
        return self._finish(vectors, len(texts))

    async def aembed_query(self, text: str) -> np.ndarray:
        return (await self.aembed_documents([check_text(text)]))[0]

    def close(self) -> None:
        """Close the synchronous HTTP client. An async client is closed by :meth:`aclose` on its
        loop; one whose loop has ended is dropped with it (its connections cannot be closed there)."""
        if self._client is not None:
            self._client.close()
            self._client = None

    async def aclose(self) -> None:
        """Close the synchronous client and this event loop's async client."""
        self.close()
        client = self._async_clients.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.close()

    def _request(self, batch: list[str]) -> dict[str, Any]:
        # "float" explicitly: the SDK otherwise asks for base64, which some compatible servers lack.
        request: dict[str, Any] = {"model": self.model, "input": batch, "encoding_format": "float"}
        if self.dimensions is not None:
            request["dimensions"] = self.dimensions
        return request

    def _parse(self, response: Any, rows: int) -> list[list[float]]:
        data = sorted(getattr(response, "data", None) or [], key=lambda item: item.index)
        if len(data) != rows:
            raise KGRagError(f"{self.name} returned {len(data)} embeddings for {rows} inputs")
        return [item.embedding for item in data]

    def _client_options(self) -> dict[str, Any]:
        options: dict[str, Any] = {"timeout": self.timeout, "max_retries": self.max_retries}
        if self._api_key is not None:
            options["api_key"] = self._api_key
        if self.base_url is not None:
            options["base_url"] = self.base_url
        return options

    def _sync_client(self) -> openai.OpenAI:
        if self._client is None:
            import openai

            self._client = openai_client(openai.OpenAI, self._client_options())
        return self._client

    def _async_client(self) -> openai.AsyncOpenAI:
        loop = asyncio.get_running_loop()
        client = self._async_clients.get(loop)
        if client is None:
            import openai

            client = self._async_clients[loop] = openai_client(openai.AsyncOpenAI, self._client_options())
        return client


def openai_client(cls: Any, options: dict[str, Any], *, where: str = "") -> Any:
    """``cls(**options)`` for ``openai.OpenAI`` or ``openai.AsyncOpenAI``, with missing credentials
    reported as a :class:`ConfigurationError` that says what to pass (``where``: e.g. " in LLMSettings")."""
    import openai

    try:
        return cls(**options)
    except openai.OpenAIError as exc:  # raised for missing credentials
        raise ConfigurationError(
            f"cannot create the OpenAI client: {exc}. Pass api_key=...{where} (any non-empty string for a "
            "local server that doesn't check keys) or set OPENAI_API_KEY."
        ) from exc
