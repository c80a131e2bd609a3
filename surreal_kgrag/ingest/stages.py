"""A line of worker threads joined by bounded queues: what makes the ingest stages overlap.

The source thread produces items, each step thread works on one item at a time and hands it on, the
sink thread takes them last. A queue holds at most ``queue_size`` items, so a fast stage waits for a
slow one instead of filling memory. A thread that fails stops the threads before it (their next hand-
over finds it gone); the threads after it finish the items already handed on, then the error is
raised. ``abort`` stops every thread at its next item (the sink finishes the one in progress).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

_END = object()
_POLL = 0.1  # seconds between checks for a stop while a thread waits on a queue


class StageLine:
    def __init__(self, queue_size: int) -> None:
        self.abort = threading.Event()
        self.queue_size = queue_size
        self.errors: list[BaseException] = []

    def run(
        self,
        source: Callable[[], Iterable[Any]],
        steps: Sequence[tuple[str, Callable[[Any], None]]],
        sink: Callable[[Any], None],
    ) -> None:
        """Run to the end (or the abort). A KeyboardInterrupt in the calling thread sets ``abort``,
        waits for the threads and is raised again; so is the first error of a thread."""
        queues: list[queue.Queue[Any]] = [queue.Queue(self.queue_size) for _ in range(len(steps) + 1)]
        threads: list[threading.Thread] = []

        def thread(index: int) -> threading.Thread | None:
            return threads[index] if 0 <= index < len(threads) else None

        def relay(i: int, work: Callable[[Any], None]) -> Callable[[], None]:
            return lambda: self._relay(queues[i - 1], thread(i - 1), work, queues[i], thread(i + 1))

        targets: list[tuple[str, Callable[[], None]]] = [("source", lambda: self._produce(source, queues[0], thread(1)))]
        targets += [(name, relay(i, work)) for i, (name, work) in enumerate(steps, start=1)]
        targets.append(("sink", lambda: self._consume(queues[-1], thread(len(steps)), sink)))
        # Waiting is on events, not Thread.join: a KeyboardInterrupt inside join() makes Python 3.11
        # mark a thread that is still running as stopped (gh-90882), so a later join() returned at
        # once and the store was closed under the write transaction in progress.
        finished = [threading.Event() for _ in targets]
        for (name, target), done in zip(targets, finished):
            threads.append(threading.Thread(target=self._guarded(target, done), name=f"kgrag-{name}", daemon=True))
        try:
            for t in threads:
                t.start()
            _join(threads, finished)
        except KeyboardInterrupt:
            self.abort.set()
            _join(threads, finished)
            raise
        if self.errors:
            raise self.errors[0]

    def _guarded(self, target: Callable[[], None], done: threading.Event) -> Callable[[], None]:
        def run() -> None:
            try:
                target()
            except BaseException as error:  # raised again by run() in the calling thread
                self.errors.append(error)
            finally:
                done.set()

        return run

    def _put(self, outbox: queue.Queue[Any], item: Any, consumer: threading.Thread | None) -> bool:
        """Hand ``item`` on; False when the line is aborted or the next thread has stopped."""
        while not self.abort.is_set():
            try:
                outbox.put(item, timeout=_POLL)
                return True
            except queue.Full:
                if consumer is None or not consumer.is_alive():
                    return False
        return False

    def _get(self, inbox: queue.Queue[Any], producer: threading.Thread | None) -> Any:
        """The next item, or _END when the thread before is done (or failed) or the line aborted."""
        while not self.abort.is_set():
            try:
                return inbox.get(timeout=_POLL)
            except queue.Empty:
                if (producer is None or not producer.is_alive()) and inbox.empty():
                    return _END
        return _END

    def _produce(self, source: Callable[[], Iterable[Any]], outbox: queue.Queue[Any], consumer: threading.Thread | None) -> None:
        for item in source():
            if not self._put(outbox, item, consumer):
                return
        self._put(outbox, _END, consumer)

    def _relay(
        self,
        inbox: queue.Queue[Any],
        producer: threading.Thread | None,
        work: Callable[[Any], None],
        outbox: queue.Queue[Any],
        consumer: threading.Thread | None,
    ) -> None:
        while (item := self._get(inbox, producer)) is not _END:
            work(item)
            if not self._put(outbox, item, consumer):
                return
        self._put(outbox, _END, consumer)

    def _consume(self, inbox: queue.Queue[Any], producer: threading.Thread | None, sink: Callable[[Any], None]) -> None:
        while (item := self._get(inbox, producer)) is not _END:
            sink(item)


def _join(threads: list[threading.Thread], finished: list[threading.Event]) -> None:
    for thread, done in zip(threads, finished):
        if thread.ident is not None:  # started
            while not done.wait(_POLL):
                pass
