"""A search, prepared and checked: the question, k, the scope and filter, and the question's embedding
(a caller's checked, or the call that computes it)."""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from ..errors import ConfigurationError
from ..surql import CompiledFilter
from .plan import Call
from .results import EMBED
from .scope import Scope


class Request(BaseModel):
    """One search, prepared: what every retriever's plan works from."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    query: str
    k: int
    fetch: int = Field(description="documents the plan ranks: k, or the rerank pool")
    scope: Scope = Field(description="what the caller may read")
    filter: CompiledFilter = Field(description="the scope ANDed with the call's filter")
    embedding: list[float] | None = Field(description="the query's embedding; None while it is being computed")
    embedding_started: Any = Field(None, description="the embedding's call (plan.Start), when it runs beside the plan")
    concepts: list[str] = Field(default_factory=list)

    @property
    def vector(self) -> np.ndarray:
        """The embedding as float32: the embedded engine's encoder packs it in one step. A plan
        reads it after ``yield from retriever.embedded(request)``."""
        if self.embedding is None:
            raise RuntimeError("the query's embedding is still being computed: yield from embedded(request) first")
        return np.asarray(self.embedding, dtype=np.float32)




def embedding_call(embedder: Any, text: str) -> Call:
    """The call that embeds ``text`` as a question (blocking and async), timed as ``embed``."""
    return Call(partial(embedder.embed_query, text), partial(embedder.aembed_query, text), EMBED)


def check_query(query: Any, max_chars: int) -> None:
    if not isinstance(query, str) or not query.strip():
        raise ConfigurationError(f"the query must be a non-empty string, got {query!r}")
    if len(query) > max_chars:
        raise ConfigurationError(
            f"the query has {len(query):,} characters, more than max_query_chars={max_chars:,} (RetrieverConfig); "
            "ask a shorter question"
        )
    try:
        query.encode("utf-8")
    except UnicodeEncodeError as error:
        raise ConfigurationError(
            f"the query holds {query[error.start]!r} at character {error.start}, which is not valid Unicode text "
            "(a lone surrogate); fix the text"
        ) from None


def checked_embedding(embedding: Any, dimension: int | None) -> list[float]:
    """A caller's query embedding as floats, checked before it reaches a query: finite numbers, as
    many as the embedder's dimension."""
    size = len(embedding) if hasattr(embedding, "__len__") and not isinstance(embedding, (str, bytes)) else None
    if size is None or (dimension is not None and size != dimension) or size == 0:
        expected = f"{dimension} numbers" if dimension is not None else "a non-empty list of numbers"
        got = f"{size:,} values" if size is not None else type(embedding).__name__
        raise ConfigurationError(f"the query embedding must be {expected} (the embedder's dimension), got {got}")
    try:
        vector = np.asarray(embedding, dtype=np.float64)
    except (TypeError, ValueError):
        raise ConfigurationError("the query embedding must be a list of numbers; it holds something else") from None
    if vector.ndim != 1 or not np.isfinite(vector).all():
        raise ConfigurationError("the query embedding must be a flat list of finite numbers (no NaN or infinity)")
    return as_list(vector)


def as_list(vector: np.ndarray) -> list[float]:
    return np.asarray(vector, dtype=np.float32).reshape(-1).tolist()
