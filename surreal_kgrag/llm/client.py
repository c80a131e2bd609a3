"""A thin wrapper over the ``openai`` SDK: one chat request, retried on transient failures, with its
token counts. Replies are parsed and validated by the callers (pydantic models of their own).
"""

from __future__ import annotations

import asyncio
import json
import random
import threading
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache, partial
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ValidationError

from ..embed.openai_api import openai_client
from ..errors import ConfigurationError, KGRagError, describe_validation
from ..retrieval.plan import Call, Plan, arun, run
from .settings import LLMSettings, LLMUsage

if TYPE_CHECKING:
    import openai

M = TypeVar("M", bound=BaseModel)
Message = dict[str, str]

_RETRY_STATUS = frozenset({408, 409, 429})


class LLMError(KGRagError):
    """Base class of the LLM layer's errors."""


class LLMCallError(LLMError):
    """The endpoint did not answer: an HTTP error, or transient failures past ``max_retries``.
    ``status`` is the HTTP status when there was one."""

    def __init__(self, message: str, status: int | None = None, usage: LLMUsage | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.usage = usage or LLMUsage()


class LLMReplyError(LLMError):
    """The model answered, but not with what was asked (not JSON, or not the expected shape)."""


@dataclass(frozen=True)
class ChatReply:
    content: str
    usage: LLMUsage


def parse_reply(content: str, model: type[M]) -> M:
    """Validate a reply against ``model``: JSON, also when the model wrapped it in a code fence or
    a sentence. Raises :class:`LLMReplyError` saying what was wrong, for the model to correct."""
    text = content.strip()
    if not text:
        raise LLMReplyError("the reply is empty")
    try:
        return model.model_validate_json(text)
    except ValidationError as first:
        start, end = text.find("{"), text.rfind("}")
        if start < 0 or end <= start:
            raise LLMReplyError(f"the reply is not a JSON object: {describe_validation(first, limit=5)}") from first
        try:
            return model.model_validate_json(text[start : end + 1])
        except ValidationError as second:
            raise LLMReplyError(f"the reply does not match the expected JSON: {describe_validation(second, limit=5)}") from second




#: The timing bucket of chat requests in a plan's timings.
CHAT = "llm"


def chat(client: LLMClient, messages: Sequence[Message], reply: type[BaseModel] | None = None) -> Call:
    """One chat request (with the client's retries) as a plan step; its answer is a :class:`ChatReply`."""
    messages = tuple(messages)
    return Call(partial(client.chat, messages, reply), partial(client.achat, messages, reply), CHAT)


class LLMClient:
    """Chat requests to the endpoint in ``settings``; one instance is safe to share between threads.

    The sync client is created on first use; async clients are created per event loop (an httpx
    async client belongs to the loop that opened it).
    """

    def __init__(self, settings: LLMSettings) -> None:
        if not isinstance(settings, LLMSettings):
            raise ConfigurationError(f"LLMClient takes LLMSettings, got {type(settings).__name__}")
        self.settings = settings
        self._lock = threading.Lock()
        self._client: openai.OpenAI | None = None
        self._async_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, openai.AsyncOpenAI] = weakref.WeakKeyDictionary()

    def __repr__(self) -> str:
        return f"LLMClient(model={self.settings.model!r}, base_url={self.settings.base_url!r})"

    # -- requests ----------------------------------------------------------------------------------

    def chat(self, messages: Sequence[Message], reply: type[BaseModel] | None = None) -> ChatReply:
        """One chat completion; ``reply`` is the pydantic model the answer must match (sent as a
        JSON schema or JSON mode, as configured)."""
        return run(None, self.chat_plan(messages, reply))

    async def achat(self, messages: Sequence[Message], reply: type[BaseModel] | None = None) -> ChatReply:
        return await arun(None, self.chat_plan(messages, reply))

    def chat_plan(self, messages: Sequence[Message], reply: type[BaseModel] | None = None) -> Plan[ChatReply]:
        """One chat completion with the retry policy, as a plan: a failed attempt is thrown back
        here, judged, and either retried after a wait or raised as :class:`LLMCallError`."""
        import openai

        request = self._request(messages, reply)
        usage = LLMUsage()
        for attempt in range(self.settings.max_retries + 1):
            started = time.perf_counter()
            try:
                response = yield Call(partial(self._create, request), partial(self._acreate, request), CHAT)
            except openai.OpenAIError as error:
                usage.requests += 1
                usage.seconds += time.perf_counter() - started
                delay = self._retry_delay(error, attempt)
                if delay is None:
                    raise _call_error(error, attempt, usage) from error
                usage.retries += 1
                yield Call(partial(time.sleep, delay), partial(asyncio.sleep, delay), CHAT)
                continue
            return self._reply(response, usage, started)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _create(self, request: dict[str, Any]) -> Any:
        return self._sync_client().chat.completions.create(**request)

    async def _acreate(self, request: dict[str, Any]) -> Any:
        return await self._async_client().chat.completions.create(**request)

    def close(self) -> None:
        """Close the sync HTTP client (async clients close with their event loop)."""
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()

    # -- internals ---------------------------------------------------------------------------------

    def _options(self) -> dict[str, Any]:
        s = self.settings
        return {
            "api_key": s.api_key.get_secret_value() if s.api_key else None,
            "base_url": s.base_url,
            "timeout": s.timeout,
            "max_retries": 0,  # retried here, so that every attempt is counted and the backoff is ours
        }

    def _sync_client(self) -> openai.OpenAI:
        import openai

        with self._lock:
            if self._client is None:
                self._client = openai_client(openai.OpenAI, self._options(), where=" in LLMSettings")
            return self._client

    def _async_client(self) -> openai.AsyncOpenAI:
        import openai

        loop = asyncio.get_running_loop()
        with self._lock:
            client = self._async_clients.get(loop)
            if client is None:
                client = self._async_clients[loop] = openai_client(openai.AsyncOpenAI, self._options(), where=" in LLMSettings")
            return client

    def _request(self, messages: Sequence[Message], reply: type[BaseModel] | None) -> dict[str, Any]:
        s = self.settings
        request: dict[str, Any] = {"model": s.model, "messages": [dict(m) for m in messages], "temperature": s.temperature}
        if s.max_tokens is not None:
            request["max_tokens"] = s.max_tokens
        if reply is not None and s.reply_format == "json_schema":
            request["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": reply.__name__, "schema": _schema(reply), "strict": False},
            }
        elif reply is not None and s.reply_format == "json_object":
            request["response_format"] = {"type": "json_object"}
        return request

    def _retry_delay(self, error: Exception, attempt: int) -> float | None:
        """Seconds to wait before the next attempt, or None when this error is final."""
        import openai

        if attempt >= self.settings.max_retries:
            return None
        if isinstance(error, openai.APIStatusError):
            if error.status_code not in _RETRY_STATUS and error.status_code < 500:
                return None
        elif not isinstance(error, (openai.APITimeoutError, openai.APIConnectionError)):
            return None
        delay = min(self.settings.max_backoff, self.settings.backoff * 2**attempt) * (0.5 + random.random() / 2)
        retry_after = _retry_after(error)
        if retry_after is not None:
            delay = min(self.settings.max_backoff, retry_after)
        return delay

    def _reply(self, response: Any, usage: LLMUsage, started: float) -> ChatReply:
        usage.requests += 1
        usage.seconds = round(usage.seconds + time.perf_counter() - started, 6)
        reported = getattr(response, "usage", None)
        if reported is not None:
            usage.prompt_tokens += int(getattr(reported, "prompt_tokens", 0) or 0)
            usage.completion_tokens += int(getattr(reported, "completion_tokens", 0) or 0)
        choices = getattr(response, "choices", None) or []
        content = choices[0].message.content if choices else None
        return ChatReply(content=content or "", usage=usage)  # an empty reply fails the caller's validation


@cache
def _schema(model: type[BaseModel]) -> dict[str, Any]:
    """A reply model's JSON schema, built once: pydantic takes several milliseconds per call."""
    return model.model_json_schema()


def _retry_after(error: Exception) -> float | None:
    response = getattr(error, "response", None)
    value = response.headers.get("retry-after") if response is not None else None
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def _call_error(error: Exception, attempt: int, usage: LLMUsage) -> LLMCallError:
    import openai

    tries = f" after {attempt + 1} attempts" if attempt else ""
    if isinstance(error, openai.APIStatusError):
        detail = _error_message(error)
        return LLMCallError(f"the model endpoint answered HTTP {error.status_code}{tries}: {detail}", error.status_code, usage)
    if isinstance(error, openai.APITimeoutError):
        return LLMCallError(f"the model endpoint did not answer in time{tries} (raise LLMSettings.timeout?)", None, usage)
    if isinstance(error, openai.APIConnectionError):
        return LLMCallError(f"could not reach the model endpoint{tries}: {error}", None, usage)
    return LLMCallError(f"the request to the model failed: {error}", None, usage)


def _error_message(error: Any) -> str:
    body = getattr(error, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
        return json.dumps(body)[:300]
    return str(error)[:300]
