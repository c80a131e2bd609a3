"""A local model's embedding in a process of its own, for long ingest runs and busy retrievers.

In one process, the model's forward pass waits for the GIL between operations, and during an ingest
spaCy's Python and the embedded engine's queries hold it (the engine's blocking connection does not
release it while a query runs). In a process of its own the model never waits for them: the 20 sec10q
filings ingested in 257.8 s against 351.5 s in one process (the same script, a quiet machine).

A retriever gains the same way: while the child embeds a question, the search reads it (spaCy in
hybrid mode, its n-grams) and runs the queries that need no vector (BM25, the names it contains),
instead of doing one after the other (:func:`in_own_process`; ``benchmarks/query_profile.py
--embedding-process``).

The child is ``python -c`` running :func:`.child.serve`: it loads the same model (by name or folder,
on the same device, with the same batch size) and answers lists of texts, or one question, with
their vectors over its stdin and stdout. Nothing of the caller's ``__main__`` runs in it, so a
script without an ``if __name__ == "__main__"`` guard is safe. The parent keeps its own copy of the
model for the texts it embeds before the child is ready, and for every text after the child failed
(logged once): an ingest or a search never fails because the child did. A child that does not answer
in time (stopped, or stuck) is stopped the same way, so it cannot hold a search for long.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from functools import partial
from typing import Any

import numpy as np

from ..db.loops import to_thread_begun
from ..deadline import kill_after
from ..errors import ConfigurationError
from .base import check_texts
from .child import LENGTH, read_reply

logger = logging.getLogger(__name__)

#: The child holds a second copy of the model and its working memory (about 0.5 GB for MiniLM), so
#: ``auto`` starts it only where the machine, or the container's memory limit, has this much.
MIN_MEMORY = 4 * 1024**3
#: ``auto`` starts the child once a run has embedded this many texts: a short run would pay the
#: child's start (a few seconds of CPU, importing torch and loading the model) and gain nothing.
MIN_TEXTS = 512

# The child's program: child.serve, and nothing of the caller's __main__. It imports what
# the parent imported (PYTHONPATH is the parent's sys.path) and prints no progress bars. Its OpenMP
# threads sleep when they wait instead of spinning (unless the caller chose otherwise): they share the
# cores with the parent's spaCy and engine, and spinning burned the CPU those needed (the 20 filings,
# same script: 296.7 s spinning, 257.8 s passive).
_CHILD = "import json, sys; from surreal_kgrag.embed.child import serve; serve(json.loads(sys.argv[1]))"
_CHILD_ENV = {
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "TRANSFORMERS_VERBOSITY": "error",
    "TQDM_DISABLE": "1",
    "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE"),
}
_WATCH_PERIOD = 0.25  # seconds between two looks at a pending request's deadline
_LOCK_POLL = 0.005  # seconds between two looks, while a question waits for the pipes, at whether a batch holds them
#: The seconds a child may take to load the model (it then says it is ready); a child that takes
#: longer is stopped and the texts are embedded in this process.
LOAD_TIMEOUT = 300.0


class ProcessEmbedding:
    """``embedder`` with its documents and questions embedded by a child process once the child is ready.

    ``start``: ``"now"`` starts the child at once, ``"auto"`` after :data:`MIN_TEXTS` texts;
    ``threads``: the child model's threads (default: torch's); ``timeout``: the seconds a question
    may wait for the child (a batch of texts: that much again for every 10 texts). The name and
    dimension are the parent's embedder's. Use it as a context manager (or call :meth:`close`): the
    child ends with it, and also when the parent dies (its stdin closes). A text the child cannot
    embed is embedded here (which raises the model's own error); a child that dies, breaks the
    protocol, answers late or does not load the model within :data:`LOAD_TIMEOUT` is stopped and
    every later text is embedded here. A question asked while the child embeds a batch of documents
    is embedded here rather than wait for the batch. A process forked from this one embeds
    everything itself (the child's pipes are this process's).
    """

    def __init__(self, embedder: Any, spec: dict[str, Any], start: str = "auto", threads: int | None = None, timeout: float = 10.0) -> None:
        if not timeout > 0:
            raise ConfigurationError(f"timeout must be a positive number of seconds, got {timeout!r}")
        self._embedder = embedder
        self._spec = spec
        self._threads = threads
        self._timeout = timeout
        self._lock = threading.Lock()  # one request at a time on the pipes
        self._child: subprocess.Popen[bytes] | None = None
        self._owner = os.getpid()
        self._ready = threading.Event()  # the child has loaded the model
        self._settled = threading.Event()  # ... or failed to
        self._failed = False
        self._batch = False  # the child is embedding documents (under the lock)
        self._requests = 0
        # The request being answered (its deadline and number) and whether the watch found one late;
        # the watch reads and changes them under _watch_lock, so it never stops the child for a
        # request that was answered meanwhile.
        self._pending: tuple[float, int] | None = None
        self._late = False
        self._watch_lock = threading.Lock()
        self._texts = 0
        if start == "now":
            self._start()

    def __enter__(self) -> ProcessEmbedding:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def name(self) -> str:
        return str(self._embedder.name)

    @property
    def dimension(self) -> int:
        return int(self._embedder.dimension)

    @property
    def in_child(self) -> bool:
        """Whether texts and questions are embedded by the child now."""
        return self._ready.is_set() and not self._failed and os.getpid() == self._owner

    def wait_until_ready(self, timeout: float | None = None) -> bool:
        """Wait until the child has loaded the model or failed to (at most ``timeout`` seconds);
        whether texts and questions now go to it."""
        if self._child is not None:
            self._settled.wait(timeout)
        return self.in_child

    @property
    def in_process(self) -> Any:
        """The embedder this process keeps: a search with nothing to run beside the embedding
        embeds its question here rather than hand it to the child and wait."""
        return self._embedder

    @property
    def embeds_elsewhere(self) -> bool:
        """Whether a question is embedded by the child now: a search then runs its other parts while
        it waits (``Start`` in :mod:`surreal_kgrag.retrieval.plan`)."""
        return self.in_child

    def embed_query(self, text: str) -> np.ndarray:
        give_up = time.monotonic() + self._timeout
        if self.in_child and self._lock_for_question(give_up):
            try:
                if self.in_child:  # (the child may have failed while this question waited)
                    return self._ask({"query": text}, max(give_up - time.monotonic(), min(self._timeout, 1.0)))[0]
            except _Refused:
                pass  # this text: embedded here, where the model raises its own error
            except (OSError, EOFError, ValueError, RuntimeError) as error:
                self._fail(error)
            finally:
                self._lock.release()
        return self._embedder.embed_query(text)

    async def aembed_query(self, text: str) -> np.ndarray:
        if self.in_child:
            return await to_thread_begun(partial(self.embed_query, text))
        return await self._embedder.aembed_query(text)

    async def aembed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return await asyncio.to_thread(self.embed_documents, texts)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        texts = check_texts(texts)
        if os.getpid() != self._owner:
            return self._embedder.embed_documents(texts)
        with self._lock:
            self._texts += len(texts)
            if self._child is None and not self._failed and self._texts >= MIN_TEXTS:
                self._start()
            if texts and self.in_child:
                self._batch = True
                try:
                    return self._ask(texts, self._timeout * (1 + len(texts) / 10))
                except _Refused:
                    pass  # these texts: embedded here, where the model raises its own error
                except (OSError, EOFError, ValueError, RuntimeError) as error:
                    self._fail(error)
                finally:
                    self._batch = False
        return self._embedder.embed_documents(texts)

    def close(self) -> None:
        if os.getpid() != self._owner:
            return  # a forked process: the child is its parent's to end
        with self._lock:
            child, self._child = self._child, None
            self._failed = True  # quietly: nothing goes to the child from now on
        if child is None:
            return
        if self._ready.is_set():  # let it finish its reply and exit; a loading child has nothing to finish
            try:
                assert child.stdin is not None
                child.stdin.write(LENGTH.pack(0))
                child.stdin.close()
                child.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                pass
        _end(child)

    def _lock_for_question(self, give_up: float) -> bool:
        """Take the pipes for a question: at once after another question, never behind a batch
        of documents (False: the question is embedded here), at most until ``give_up``."""
        while not self._lock.acquire(timeout=_LOCK_POLL):
            if self._batch or time.monotonic() > give_up:
                return False
        return True

    def _start(self) -> None:
        try:
            self._child = subprocess.Popen(
                [sys.executable, "-c", _CHILD, json.dumps(self._spec)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env={**os.environ, **_CHILD_ENV, **self._thread_env(), "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)},
            )
        except OSError as error:
            self._fail(error)
            return
        threading.Thread(target=self._watch, args=(self._child,), name="kgrag-embed-child", daemon=True).start()

    def _thread_env(self) -> dict[str, str]:
        return {} if self._threads is None else {"OMP_NUM_THREADS": str(self._threads), "MKL_NUM_THREADS": str(self._threads)}

    def _watch(self, child: subprocess.Popen[bytes]) -> None:
        """Read the child's first reply (it loads the model meanwhile; texts go to it after), then
        stop it if a reply is late: the caller waiting for it then reads the end of the pipe."""
        with kill_after(child, LOAD_TIMEOUT) as too_slow:
            try:
                kind, payload = read_reply(child.stdout)
            except (OSError, EOFError, ValueError) as error:
                kind, payload = b"E", str(error).encode()
        if kind == b"R":
            self._ready.set()
        else:
            if too_slow.is_set():
                payload = f"the embedding child process did not load the model within {LOAD_TIMEOUT:g} s".encode()
            with self._lock:
                self._fail(RuntimeError(payload.decode(errors="replace")))
        self._settled.set()
        while self._child is child and child.poll() is None:
            pending = self._pending
            if pending is not None and time.monotonic() > pending[0]:
                with self._watch_lock:
                    if self._pending is pending:  # still unanswered
                        self._late = True
                        child.kill()
                        return
            time.sleep(_WATCH_PERIOD)

    def _ask(self, texts: list[str] | dict[str, str], limit: float) -> np.ndarray:
        """The child's vectors for a list of documents, or for ``{"query": text}``, within ``limit`` seconds."""
        child = self._child
        assert child is not None and child.stdin is not None
        request = json.dumps(texts).encode()
        self._requests += 1
        self._pending = (time.monotonic() + limit, self._requests)
        try:
            child.stdin.write(LENGTH.pack(len(request)) + request)
            child.stdin.flush()
            kind, payload = read_reply(child.stdout)
        except (OSError, EOFError) as error:
            if self._late:
                raise TimeoutError(f"the embedding child process did not answer within {limit:.1f} s") from error
            raise
        except BaseException as error:
            # Interrupted between the request and its reply (Ctrl-C), the reply would be read as the
            # next request's: the child is stopped instead.
            self._fail(error)
            raise
        finally:
            with self._watch_lock:
                self._pending = None
        if kind == b"E":
            raise _Refused(payload.decode(errors="replace"))
        if kind != b"V":
            raise RuntimeError(f"the embedding child process replied {kind!r}")
        rows = 1 if isinstance(texts, dict) else len(texts)
        vectors = np.frombuffer(payload, dtype=np.float32)
        if vectors.size % rows:
            raise ValueError(f"the child returned {vectors.size} floats for {rows} texts")
        return vectors.reshape(rows, -1).copy()

    def _fail(self, error: BaseException) -> None:
        """Embed in the parent from now on; stop the child (under the lock, or before another thread
        can use the child)."""
        if not self._failed:
            logger.warning("embedding in a child process failed (%s); embedding in this process from now on", error)
        self._failed = True
        child, self._child = self._child, None
        if child is not None and os.getpid() == self._owner:
            _end(child)


def _end(child: subprocess.Popen[bytes]) -> None:
    """Kill the child (if it has not exited), reap it and close its pipes."""
    child.kill()
    child.wait()
    for stream in (child.stdin, child.stdout):
        try:
            if stream is not None:
                stream.close()
        except OSError:
            pass  # a request half-written to a dead child: nothing more to send


class _Refused(RuntimeError):
    """The child could not embed these texts (it goes on serving others)."""


def start_mode(embedder: Any, setting: bool | None) -> str | None:
    """How a run uses a child for ``embedder``: ``"now"``, ``"auto"``, or None (not at all).

    ``setting`` is ``IngestConfig.embedding_process``: True starts one at once, False never, None
    (the default) once a run is long, where the memory is there (:data:`MIN_MEMORY`)."""
    if setting is False or _spec_of(embedder) is None:
        return None
    if setting is True:
        return "now"
    return "auto" if available_memory() >= MIN_MEMORY else None


def in_child_process(embedder: Any, setting: bool | None) -> Any:
    """``embedder`` wrapped in a :class:`ProcessEmbedding` when :func:`start_mode` says so."""
    mode = start_mode(embedder, setting)
    spec = _spec_of(embedder)
    return embedder if mode is None or spec is None else ProcessEmbedding(embedder, spec, mode)


def in_own_process(embedder: Any, timeout: float = 10.0) -> ProcessEmbedding:
    """``embedder`` (a local model loaded by name) with its questions and documents embedded by a
    child process started now; use it as a context manager, or call ``close``, to end the child.

    For a retriever that answers many questions: while the child embeds a question, the hybrid and
    graph modes read it and run their queries that need no vector, so the embedding's time is
    spent beside theirs. The child holds a second copy of the model (about 0.5 GB for MiniLM) and
    takes a few seconds to load it; questions asked meanwhile are embedded in this process. It
    runs the model on one thread: a question is a small batch, and the other cores are the
    search's (on two cores, a child with two threads took 26.6 ms a question where this process
    took 19.8, and the searches beside it lost more than one thread did; HotpotQA, 100
    questions). A child that takes more than ``timeout`` seconds to answer a question is stopped,
    and that question and every later one are embedded in this process."""
    spec = _spec_of(embedder)
    if spec is None:
        raise ConfigurationError(
            f"{embedder!r} cannot be loaded in another process: pass a SentenceTransformerEmbedder made from a model "
            "name or folder, not from a loaded model object"
        )
    return ProcessEmbedding(embedder, spec, "now", threads=1, timeout=timeout)


def available_memory() -> int:
    """The memory this process may use: the machine's, or its cgroup's limit when that is lower;
    0 where the platform does not say (no ``os.sysconf``: ``auto`` then starts no child)."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return 0
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path) as file:
                limit = file.read().strip()
        except OSError:
            continue
        if limit.isdigit():
            total = min(total, int(limit))
    return total


def _spec_of(embedder: Any) -> dict[str, Any] | None:
    spec = getattr(embedder, "process_spec", None)
    return spec() if callable(spec) else None
