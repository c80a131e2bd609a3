"""A child process killed when it takes too long: the caller reading its pipe then reads the end."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def kill_after(child: subprocess.Popen[bytes], seconds: float) -> Iterator[threading.Event]:
    """Kill ``child`` if the block has not ended within ``seconds``; the event says whether it was."""
    late = threading.Event()

    def stop() -> None:
        late.set()
        child.kill()

    timer = threading.Timer(seconds, stop)
    timer.daemon = True
    timer.start()
    try:
        yield late
    finally:
        timer.cancel()
