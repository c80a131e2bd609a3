"""The embedding child process's side (:mod:`.process` is the parent's), and the framing both
sides use on the child's stdin and stdout."""

from __future__ import annotations

import json
import signal
import struct
import sys
from typing import IO, Any

import numpy as np

HEADER = struct.Struct("<cI")  # a reply: its kind (b"R"eady, b"V"ectors, b"E"rror) and payload length
LENGTH = struct.Struct("<I")  # a request: the payload length (0: stop)


def read_reply(stream: IO[bytes] | None) -> tuple[bytes, bytes]:
    assert stream is not None
    kind, length = HEADER.unpack(_read_exactly(stream, HEADER.size))
    return kind, _read_exactly(stream, length)


def _read_exactly(stream: IO[bytes], size: int) -> bytes:
    data = stream.read(size)
    if len(data) != size:
        raise EOFError("the embedding child process exited")
    return data


def serve(spec: dict[str, Any]) -> None:
    """The child: load the model, say ready, then answer requests until told to stop or stdin closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's: it finishes its write, then closes us
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing a library prints may get into the replies

    def reply(kind: bytes, payload: bytes) -> None:
        stdout.write(HEADER.pack(kind, len(payload)) + payload)
        stdout.flush()

    try:
        from .local import SentenceTransformerEmbedder

        embedder = SentenceTransformerEmbedder(**spec)
        embedder.embed_documents(["ready"])
    except Exception as error:  # reported to the parent, which embeds by itself
        reply(b"E", f"{type(error).__name__}: {error}".encode())
        return
    reply(b"R", b"")
    while True:
        header = stdin.read(LENGTH.size)
        if len(header) < LENGTH.size:
            return
        (length,) = LENGTH.unpack(header)
        if length == 0:
            return
        try:
            texts = json.loads(stdin.read(length))
            vectors = embedder.embed_query(texts["query"])[None, :] if isinstance(texts, dict) else embedder.embed_documents(texts)
            reply(b"V", np.ascontiguousarray(vectors, dtype=np.float32).tobytes())
        except Exception as error:
            reply(b"E", f"{type(error).__name__}: {error}".encode())
