"""Settings of the chat model every LLM feature talks to, and the token counts they report."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

ReplyFormat = Literal["json_schema", "json_object", "text"]


class LLMSettings(BaseModel):
    """An OpenAI-compatible chat endpoint (OpenAI, Azure OpenAI, Ollama, vLLM, LM Studio...).

    ``base_url`` and ``api_key`` left as None are read by the ``openai`` SDK when the client is
    first used (``OPENAI_BASE_URL``, ``OPENAI_API_KEY``), never at import. A local server that does
    not check keys still needs a non-empty one: pass ``api_key="local"``.

    Retries: a reply with HTTP 408, 409, 429 or 5xx, a timeout or a dropped connection is tried
    again up to ``max_retries`` times, waiting ``backoff * 2**attempt`` seconds (at most
    ``max_backoff``, or the server's ``Retry-After`` when it is shorter), with jitter. Other HTTP
    errors (400, 401, 404...) fail at once: trying again would not change them.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str = Field(min_length=1, description="model name as the endpoint knows it, e.g. gpt-4o-mini or llama3.1")
    base_url: str | None = Field(None, description="e.g. http://localhost:11434/v1 for Ollama; None: $OPENAI_BASE_URL or OpenAI")
    api_key: SecretStr | None = Field(None, description="None: $OPENAI_API_KEY, read when the client is created")
    timeout: float = Field(60.0, gt=0, le=3600, description="seconds per request")
    max_retries: int = Field(3, ge=0, le=20, description="extra attempts after a 408/409/429/5xx reply, a timeout or a connection error")
    backoff: float = Field(0.5, ge=0, le=60, description="first wait between attempts, doubled each time")
    max_backoff: float = Field(20.0, ge=0, le=600, description="longest wait between attempts")
    max_concurrency: int = Field(4, ge=1, le=256, description="requests in flight at once (extraction of many chunks)")
    temperature: float = Field(0.0, ge=0, le=2)
    max_tokens: int | None = Field(None, ge=1, description="completion token cap per request; None: the endpoint's default")
    reply_format: ReplyFormat = Field(
        "json_schema",
        description="json_schema sends the reply's JSON schema (structured outputs); json_object asks for any JSON "
        "object (older servers); text asks in the prompt only. Replies are validated by pydantic in every case.",
    )

    @field_validator("model")
    @classmethod
    def _strip_model(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("model must not be blank")
        return value.strip()


class LLMUsage(BaseModel):
    """What a run cost: requests sent, tokens the endpoint reported, attempts that were retried."""

    requests: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = Field(0.0, description="time spent waiting for the endpoint, summed over requests")

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def add(self, other: LLMUsage) -> None:
        self.requests += other.requests
        self.retries += other.retries
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.seconds = round(self.seconds + other.seconds, 6)
