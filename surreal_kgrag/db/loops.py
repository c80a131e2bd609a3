"""The one sync/async mechanism: sync calls run coroutines on an event loop of their thread.

- :func:`run_sync` runs a coroutine to completion from sync code: on the calling thread's own loop
  (created on first use, closed when the thread ends), or, when the thread already runs a loop, on
  one helper thread's loop.
- :func:`gather_or_cancel` runs awaitables at once; the first failure cancels the others.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Coroutine, Sequence
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")


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
