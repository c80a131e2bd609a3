"""A scripted OpenAI-compatible chat endpoint on 127.0.0.1, for tests and offline examples. It is
not a model: a function you give it decides every reply.

>>> with ScriptedChatServer(lambda request: '{"answer": "", "supporting": []}') as server:
...     settings = LLMSettings(model="scripted", base_url=server.base_url, api_key="local")

The responder receives the request body (``model``, ``messages``, ``response_format``...) and
returns the reply's text, or a :class:`Reply` to choose the HTTP status, a ``Retry-After`` header, a
delay before answering (to provoke timeouts) or the token counts. Without explicit counts, usage is
estimated at 4 characters per token, so token figures measured against it are estimates.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    content: str = ""
    status: int = 200
    delay: float = 0.0
    retry_after: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


Responder = Callable[[dict[str, Any]], "Reply | str"]


@dataclass
class ScriptedChatServer:
    responder: Responder
    requests: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                with server._lock:
                    server.requests.append(body)
                reply = server.responder(body)
                reply = reply if isinstance(reply, Reply) else Reply(content=reply)
                time.sleep(reply.delay)
                payload = server._payload(body, reply)
                data = json.dumps(payload).encode()
                try:
                    self.send_response(reply.status, HTTPStatus(reply.status).phrase)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    if reply.retry_after is not None:
                        self.send_header("Retry-After", str(reply.retry_after))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout): nothing to answer

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="scripted-chat", daemon=True)
        self._thread.start()

    @staticmethod
    def _payload(body: dict[str, Any], reply: Reply) -> dict[str, Any]:
        if reply.status != 200:
            return {"error": {"message": reply.content or HTTPStatus(reply.status).phrase, "type": "scripted_error"}}
        prompt = sum(len(str(m.get("content", ""))) for m in body.get("messages", []))
        prompt_tokens = reply.prompt_tokens if reply.prompt_tokens is not None else max(1, prompt // 4)
        completion_tokens = reply.completion_tokens if reply.completion_tokens is not None else max(1, len(reply.content) // 4)
        return {
            "id": "chatcmpl-scripted",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", "scripted"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": reply.content}, "finish_reason": "stop"}],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> ScriptedChatServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def last_user_message(request: dict[str, Any]) -> str:
    """The text of the request's last user message (what a responder usually keys its reply on)."""
    return next((str(m.get("content", "")) for m in reversed(request.get("messages", [])) if m.get("role") == "user"), "")


def first_user_message(request: dict[str, Any]) -> str:
    return next((str(m.get("content", "")) for m in request.get("messages", []) if m.get("role") == "user"), "")
