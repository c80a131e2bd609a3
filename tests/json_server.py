"""An HTTP server on 127.0.0.1 that answers JSON POSTs with a function's replies: the tests' stand-in
for an OpenAI-compatible service (embeddings, chat completions with tool calls), where no model can
be reached. ``surreal_kgrag.llm.scripted`` is the chat endpoint the LLM layer's tests script."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: ``respond(path, body)``: the reply's status and JSON payload.
Responder = Callable[[str, dict[str, Any]], tuple[int, dict[str, Any]]]


class JsonServer:
    """Serves ``respond`` at ``base_url`` (``http://127.0.0.1:<port>/v1``) until closed, and records
    each request's body (``requests``) and headers (``headers``, case-insensitive)."""

    def __init__(self, respond: Responder) -> None:
        self.requests: list[dict[str, Any]] = []
        self.headers: list[Message] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(body)
                server.headers.append(self.headers)
                status, payload = respond(self.path, body)
                raw = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="json-server", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> JsonServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def embeddings_payload(vectors: Any, model: str, usage: dict[str, int] | None = None) -> dict[str, Any]:
    """An OpenAI ``/v1/embeddings`` answer with these vectors, in order."""
    data = [{"object": "embedding", "index": i, "embedding": [float(x) for x in v]} for i, v in enumerate(vectors)]
    return {"object": "list", "data": data, "model": model, "usage": usage or {}}


def chat_payload(message: dict[str, Any], model: str, finish_reason: str = "stop") -> dict[str, Any]:
    """An OpenAI ``/v1/chat/completions`` answer with this assistant message."""
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }
