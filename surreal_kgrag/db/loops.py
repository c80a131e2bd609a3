"""The one sync/async mechanism: sync calls run coroutines on an event loop of their thread.

- :func:`run_sync` runs a coroutine to completion from sync code: on the calling thread's own loop
  (created on first use, closed when the thread ends), or, when the thread already runs a loop, on
  one helper thread's loop.
- :func:`gather_or_cancel` runs awaitables at once; the first failure cancels the others.
- :func:`submit_begun` and :func:`to_thread_begun` hand work to a thread and return once it has
  begun, so the engine call that follows does not hold it back.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from concurrent.futures import Executor, Future
from typing import Any, TypeVar

T = TypeVar("T")

#: The longest a caller waits for a thread it handed work to to begin it (seconds).
HANDOFF_SECONDS = 0.05


async def gather_or_cancel(awaitables: Sequence[Awaitable[T]]) -> list[T]:
    """``asyncio.gather`` that, when one fails, cancels the others and waits for them to end
    before raising the first error (a caller's lease, lock or connection outlives none of them)."""
    tasks = [asyncio.ensure_future(awaitable) for awaitable in awaitables]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


def submit_begun(executor: Executor, fn: Callable[[], T]) -> Future[T]:
    """``executor.submit(fn)``, returned once the thread has begun ``fn`` (at most
    :data:`HANDOFF_SECONDS`). The caller's next step is often a query on the embedded engine, which
    holds the GIL until it answers: a thread that had not begun by then would start only after it
    (a question sent to an embedding child 7.6 ms late at p50, graph mode on HotpotQA). Begun, it
    runs to its first blocking call, such as sending its request, before the caller goes on."""
    run, begun = _signalling(fn)
    future = executor.submit(run)
    begun.wait(HANDOFF_SECONDS)
    return future


async def to_thread_begun(fn: Callable[[], T]) -> T:
    """``asyncio.to_thread(fn)`` whose thread has begun ``fn`` before the loop goes on (as
    :func:`submit_begun`). The loop waits for it, microseconds in practice: an awaited start would
    let the plan send its next query first. When the executor's threads are all busy the wait is
    bounded by :data:`HANDOFF_SECONDS`; on the embedded engine they are busy holding or waiting
    for the GIL, without which the loop could not run either."""
    run, begun = _signalling(fn)
    future = asyncio.get_running_loop().run_in_executor(None, contextvars.copy_context().run, run)
    begun.wait(HANDOFF_SECONDS)
    return await future


def _signalling(fn: Callable[[], T]) -> tuple[Callable[[], T], threading.Event]:
    begun = threading.Event()

    def run() -> T:
        begun.set()
        return fn()

    return run, begun


class _ThreadLoop:
    """The event loop sync calls of one thread run on; closed when the thread ends (its
    thread-local storage, which alone holds this object, is released then)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()

    def __del__(self) -> None:
        self.loop.close()


_thread_loops = threading.local()
_background_lock = threading.Lock()
_background_loop: asyncio.AbstractEventLoop | None = None


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from sync code, also when this thread already runs a loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        holder: _ThreadLoop | None = getattr(_thread_loops, "holder", None)
        if holder is None or holder.loop.is_closed():
            holder = _thread_loops.holder = _ThreadLoop()
        task = holder.loop.create_task(coro)
        try:
            return holder.loop.run_until_complete(task)
        except BaseException:
            # Ctrl-C stops the loop with the task still waiting: cancel it and let it finish, so its
            # `finally` blocks run now (a rebuild's gate on the store's writes is released).
            if not task.done():
                task.cancel()
                with contextlib.suppress(BaseException):
                    holder.loop.run_until_complete(task)
            raise
    # Sync API called from inside a running loop (a notebook, an async framework calling sync
    # code): hand the coroutine to a helper thread instead of nesting loops.
    future: Future[T] = asyncio.run_coroutine_threadsafe(coro, _helper_loop())
    return future.result()


def _helper_loop() -> asyncio.AbstractEventLoop:
    global _background_loop
    with _background_lock:
        if _background_loop is None:
            _background_loop = asyncio.new_event_loop()
            threading.Thread(target=_background_loop.run_forever, name="surreal-kgrag-loop", daemon=True).start()
        return _background_loop
