"""The PDF loader's child process, bounded in memory and time (:mod:`.pdf_reader` is its side).

One child reads every PDF, one at a time: it starts with the first PDF (in about 0.1 s: it imports
only pypdfium2) and serves the next ones, so 20 filings pay for one start. A PDF that needs more than
``max_pdf_memory`` bytes of address space, takes longer than ``pdf_timeout`` seconds, or crashes
pdfium, ends the child and is reported; the next PDF gets a new one. The child is ``python -c``, as
the embedding child is (:mod:`surreal_kgrag.embed.process`): nothing of the caller's ``__main__``
runs in it. It exits when its stdin closes: when the parent exits, however abruptly, or lets it go.
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from ..deadline import kill_after
from .pdf_reader import FRAME, receive

_CHILD = "import runpy, sys; runpy.run_path(sys.argv[1])['serve']()"
_START_TIMEOUT = 60.0  # seconds for a new child to import pypdfium2


class _Worker:
    def __init__(self) -> None:
        self._lock = threading.Lock()  # one PDF at a time (pdfium is not thread-safe, and one child reads)
        self._child: subprocess.Popen[bytes] | None = None
        self._owner = os.getpid()

    def read(self, data: bytes, max_pages: int, max_chars: int, max_memory: int, timeout: float) -> dict[str, Any] | str:
        """What :func:`.pdf_reader.read` returns for ``data``, read in the child; or why not, also
        when the child ran out of memory or time, or crashed."""
        options = json.dumps({"max_pages": max_pages, "max_chars": max_chars, "max_memory": max_memory}).encode()
        with self._lock:
            child = self._running()
            if isinstance(child, str):
                return child
            try:
                reply = _exchange(child, FRAME.pack(b"R", len(options) + 1 + len(data)) + options + b"\n" + data, timeout)
            except BaseException:
                self._stop()  # interrupted (Ctrl-C) between a request and its reply
                raise
            if reply is not None and reply[0] in (b"D", b"F"):
                return json.loads(reply[1]) if reply[0] == b"D" else reply[1].decode(errors="replace")
            self._stop()
        if reply is None:
            return f"PDF took longer than {timeout:g} s to read (pdf_timeout); not loaded (raise pdf_timeout to load it)"
        if reply[0] == b"M" or child.returncode == -signal.SIGABRT:  # pdfium aborts when an allocation fails
            return (
                f"PDF needed more than {max_memory / (1 << 20):,.0f} MB to read (max_pdf_memory); not loaded "
                "(raise max_pdf_memory to load it)"
            )
        return f"pdfium crashed reading the PDF ({_exit_status(child.returncode)}); not loaded"

    def close(self) -> None:
        """Let the child go: it exits at the end of its stdin."""
        with self._lock:
            child, self._child = self._child, None
        if child is not None and os.getpid() == self._owner:
            _end(child, wait=5.0)

    def _running(self) -> subprocess.Popen[bytes] | str:
        """The child, started if need be (also in a forked process: the child's pipes are the parent's)."""
        if os.getpid() != self._owner:
            self._child, self._owner = None, os.getpid()
        if self._child is not None and self._child.poll() is None:
            return self._child
        try:
            child = subprocess.Popen(
                [sys.executable, "-c", _CHILD, str(Path(__file__).with_name("pdf_reader.py"))],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)},
            )
        except OSError as exc:
            return f"could not start the PDF reader process: {exc}"
        if _exchange(child, b"", _START_TIMEOUT) != (b"+", b""):
            _end(child)
            return f"the PDF reader process did not start within {_START_TIMEOUT:g} s ({_exit_status(child.returncode)})"
        self._child = child
        return child

    def _stop(self) -> None:
        child, self._child = self._child, None
        if child is not None:
            _end(child)


def _exchange(child: subprocess.Popen[bytes], request: bytes, timeout: float) -> tuple[bytes, bytes] | None:
    """Send ``request`` and read the reply: (kind, payload); (b"", b"") when the child ended first;
    None when ``timeout`` seconds passed first (the child is killed)."""
    with kill_after(child, timeout) as late:
        try:
            assert child.stdin is not None
            if request:
                child.stdin.write(request)
                child.stdin.flush()
            reply = receive(child.stdout)
        except OSError:
            reply = None
    if reply is None and late.is_set():
        return None
    if reply is None:
        child.wait()
    return reply or (b"", b"")


def _end(child: subprocess.Popen[bytes], wait: float = 0.0) -> None:
    """Close the child's stdin (it exits), kill it if it has not within ``wait`` seconds, reap it."""
    try:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=wait)
    except (OSError, subprocess.TimeoutExpired):
        pass
    child.kill()
    child.wait()
    if child.stdout is not None:
        child.stdout.close()


def _exit_status(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit status {code}"


WORKER = _Worker()
atexit.register(WORKER.close)
