"""What every embedder is: the ``Embedder`` protocol, and the checks and normalisation the
adapters share.

Every adapter returns L2-normalised float32 numpy arrays: ``(n, d)`` for documents, ``(d,)`` for a
query (an all-zero vector stays zero). An empty document list gives ``(0, d)`` when the dimension is
already known and ``(0, 0)`` otherwise, so an empty batch never loads a model or calls an API.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from .. import checks
from ..errors import ConfigurationError, KGRagError

_PROBE_TEXT = "dimension probe"


class Embedder(Protocol):
    """What the ingest pipeline and the retrievers need from an embedding model."""

    @property
    def name(self) -> str: ...

    @property
    def dimension(self) -> int: ...

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray: ...

    def embed_query(self, text: str) -> np.ndarray: ...

    async def aembed_documents(self, texts: Sequence[str]) -> np.ndarray: ...

    async def aembed_query(self, text: str) -> np.ndarray: ...



class BaseEmbedder:
    """Input checks, output checks and normalisation shared by the adapters."""

    _dimension: int | None = None
    #: Whether embedding a text leaves this interpreter free (a remote service, a child process), so
    #: a search runs the parts that need no vector while it waits (``Start`` in
    #: :mod:`surreal_kgrag.retrieval.plan`). A model run in this process holds the interpreter
    #: for much of its time, and running it beside the engine's queries was slower, not faster.
    embeds_elsewhere: bool = False

    @property
    def name(self) -> str:
        raise NotImplementedError

    @property
    def dimension(self) -> int:
        """Vector size; found by embedding a probe text when the backend can't say otherwise."""
        if self._dimension is None:
            self.embed_query(_PROBE_TEXT)
        assert self._dimension is not None
        return self._dimension

    def _empty(self) -> np.ndarray:
        return np.zeros((0, self._dimension or 0), dtype=np.float32)

    def _finish(self, vectors: Any, rows: int) -> np.ndarray:
        """Check a backend's output ((rows, d), finite, consistent d) and L2-normalise it."""
        try:
            array = np.asarray(vectors, dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise KGRagError(f"embedding model {self.name} returned something that is not a matrix of numbers: {exc}") from exc
        if array.ndim != 2 or array.shape[0] != rows or array.shape[1] == 0:
            raise KGRagError(f"embedding model {self.name} returned shape {array.shape} for {rows} texts; expected ({rows}, d)")
        if self._dimension is not None and array.shape[1] != self._dimension:
            raise KGRagError(
                f"embedding model {self.name} returned {array.shape[1]}-dimensional vectors after "
                f"{self._dimension}-dimensional ones"
            )
        if not np.isfinite(array).all():
            raise KGRagError(f"embedding model {self.name} returned NaN or infinite values")
        self._dimension = int(array.shape[1])
        return l2_normalise(array)

    def embed_query(self, text: str) -> np.ndarray:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"



def embeds_elsewhere(embedder: Any) -> bool:
    """Whether ``embedder`` leaves this interpreter free while it embeds (see ``BaseEmbedder``); an
    embedder of another library's making is taken not to."""
    return bool(getattr(embedder, "embeds_elsewhere", False))


def in_this_process(embedder: Any) -> Any:
    """The embedder to ask when nothing runs beside the embedding: a child process's own copy of
    the model in this process (``ProcessEmbedding.in_process``), otherwise ``embedder`` itself."""
    return getattr(embedder, "in_process", embedder)


def has_attributes(obj: Any, *names: str) -> bool:
    # getattr_static: looking must not run a property (``dimension`` may load a model or call an API)
    sentinel = object()
    return all(inspect.getattr_static(obj, name, sentinel) is not sentinel for name in names)


def check_texts(texts: Sequence[str]) -> list[str]:
    return checks.check_texts(texts, call="embed_documents()", single="use embed_query() for one text")


def check_text(text: str) -> str:
    if not isinstance(text, str):
        raise ConfigurationError(f"query must be a str, not {type(text).__name__}")
    return text


def positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(f"{name} must be a positive integer, got {value!r}")
    return value


def l2_normalise(array: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    return np.divide(array, norms, out=np.zeros_like(array), where=norms > 0)

