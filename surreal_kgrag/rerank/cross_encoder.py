"""A sentence-transformers cross-encoder scores (query, passage) pairs."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import numpy as np

from ..db import checked_int
from ..errors import ConfigurationError, ModelNotAvailableError
from ..retrieval import RetrievedDocument
from .base import Ranking, RankingReranker, by_score, passage_text

if TYPE_CHECKING:
    from sentence_transformers import CrossEncoder

class CrossEncoderReranker(RankingReranker):
    """Scores (query, passage) pairs with a sentence-transformers ``CrossEncoder``, in batches.

    ``model`` is a loaded ``CrossEncoder`` or a model name / local folder, loaded on first use with
    ``device``, ``local_files_only`` and ``model_kwargs`` (passed to ``CrossEncoder(...)``). The
    passage is :func:`passage_text` (title and the ``chunks`` best chunks). Scores become
    ``model.predict`` outputs (after the model's activation, e.g. a sigmoid).
    """

    def __init__(
        self,
        model: str | CrossEncoder,
        *,
        batch_size: int = 32,
        chunks: int = 1,
        title: bool = True,
        device: str | None = None,
        local_files_only: bool = False,
        model_kwargs: dict[str, Any] | None = None,
    ) -> None:
        if isinstance(model, str):
            if not model.strip():
                raise ConfigurationError("model name must not be empty")
            self._model: CrossEncoder | None = None
        elif callable(getattr(model, "predict", None)):
            self._model = model
        else:
            raise ConfigurationError(f"model must be a CrossEncoder or a model name, not {type(model).__name__}")
        self._source = model if isinstance(model, str) else None
        self.batch_size = checked_int("batch_size", batch_size)
        self.chunks = checked_int("chunks", chunks)
        self.title = bool(title)
        self.device = device
        self.local_files_only = bool(local_files_only)
        self.model_kwargs = dict(model_kwargs or {})
        # A fast tokenizer fails ("Already borrowed") when two threads use it at once.
        self._lock = threading.Lock()

    @property
    def model(self) -> CrossEncoder:
        """The loaded model (loads it on first access)."""
        with self._lock:
            if self._model is None:
                self._model = self._load()
            return self._model

    def _load(self) -> CrossEncoder:
        from sentence_transformers import CrossEncoder

        try:
            return CrossEncoder(
                self._source, device=self.device, local_files_only=self.local_files_only, **self.model_kwargs
            )
        except OSError as exc:
            raise ModelNotAvailableError(
                f"cross-encoder {self._source!r} is not available: {exc}. Pass a local model folder, a loaded "
                "CrossEncoder, or a model name that can be downloaded."
            ) from exc

    def _rank(self, query: str, documents: list[RetrievedDocument], query_embedding: np.ndarray | None) -> Ranking:
        pairs = [(query, passage_text(doc, chunks=self.chunks, title=self.title)) for doc in documents]
        model = self.model
        with self._lock:
            scores = np.asarray(
                model.predict(pairs, batch_size=self.batch_size, show_progress_bar=False, convert_to_numpy=True)
            )
        if scores.ndim == 2 and scores.shape[1] == 1:
            scores = scores[:, 0]
        if scores.shape != (len(pairs),):
            raise ConfigurationError(
                f"cross-encoder returned scores of shape {scores.shape} for {len(pairs)} pairs; a reranking "
                "model must give one score per pair (num_labels=1)"
            )
        return by_score(scores)

    def __repr__(self) -> str:
        return f"CrossEncoderReranker({self._source or type(self._model).__name__!r})"
