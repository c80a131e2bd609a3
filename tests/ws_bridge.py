"""A SurrealDB RPC endpoint over a real WebSocket, answered by the real embedded engine.

The SDK's ws:// client sends CBOR-encoded RPC requests (``use``, ``signin``, ``query``, ``version``)
and the embedded engine takes exactly those requests (``execute``), so passing frames between the
two gives the remote code path a real server where no SurrealDB binary or Docker engine exists.
One engine session serves every socket (enough for one namespace and database). The bridge counts
the sockets it has seen and the ones still open.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import surrealdb
import websockets


class SurrealWebSocketBridge:
    def __init__(self) -> None:
        self.opened = 0
        self.open = 0
        self.url = ""
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, name="ws-bridge", daemon=True)

    def __enter__(self) -> SurrealWebSocketBridge:
        self._thread.start()
        if not self._ready.wait(60):
            raise RuntimeError("the WebSocket bridge did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._stop is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(60)

    def _run(self) -> None:
        self._loop.run_until_complete(self._serve())

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        db = surrealdb.AsyncSurreal("mem://")
        await db.connect()
        engine: Any = db._db  # the engine's RPC entry point: CBOR request in, CBOR response out

        async def answer(socket: Any, frame: bytes) -> None:
            await socket.send(await engine.execute(frame))

        async def handler(socket: Any) -> None:
            self.opened += 1
            self.open += 1
            tasks: set[asyncio.Task[None]] = set()
            try:
                async for frame in socket:
                    task = asyncio.create_task(answer(socket, frame))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
            except websockets.ConnectionClosed:
                pass
            finally:
                self.open -= 1

        async with websockets.serve(handler, "127.0.0.1", 0, subprotocols=[websockets.Subprotocol("cbor")], max_size=None) as server:
            port = next(iter(server.sockets)).getsockname()[1]
            self.url = f"ws://127.0.0.1:{port}"
            self._ready.set()
            await self._stop.wait()
        await db.close()

    def wait_for(self, predicate: Any, timeout: float = 10.0) -> bool:
        """Poll a condition on the bridge's counters (sockets close asynchronously)."""
        deadline = time.monotonic() + timeout
        event = threading.Event()
        while not predicate():
            if time.monotonic() > deadline:
                return False
            event.wait(0.02)
        return True
