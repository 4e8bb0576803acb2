"""A server that closes a connection left idle too long, the way uvicorn's keep-alive timer does.

uvicorn (the Letta server, FastAPI services) closes a connection 5 s after its last answer. A
client that keeps idle connections just as long can send its next request on a connection in the
very instant the server closes it, and gets "Server disconnected without sending a response".
That instant is a race; this server makes it certain: a request that arrives on a connection idle
for ``cut_s`` or longer is dropped (the connection closed, nothing answered), as if the timer had
fired as it arrived. Every other request gets ``200`` with :attr:`KeepAliveServer.body`.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any


class KeepAliveServer:
    """Serve on 127.0.0.1 in a thread of its own; ``url`` once started. Counts ``connections``,
    ``answered`` and ``dropped`` requests."""

    def __init__(self, cut_s: float, body: Any) -> None:
        self.cut_s = cut_s
        self.body = json.dumps(body).encode()
        self.connections = 0
        self.answered = 0
        self.dropped = 0
        self.url = ""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        last: float | None = None  # when this connection last answered
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                if last is not None and time.monotonic() - last >= self.cut_s:
                    self.dropped += 1
                    return  # the keep-alive timer fired as the request arrived
                length = 0
                for line in head.decode("latin-1").split("\r\n")[1:]:
                    name, _, value = line.partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value)
                await reader.readexactly(length)
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                    + f"content-length: {len(self.body)}\r\n\r\n".encode()
                    + self.body
                )
                await writer.drain()
                self.answered += 1
                last = time.monotonic()
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        finally:
            writer.close()

    def __enter__(self) -> KeepAliveServer:
        self._thread.start()
        server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, "127.0.0.1", 0), self._loop
        ).result(10)
        self._server = server
        self.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        return self

    def __exit__(self, *exc: object) -> None:
        async def stop() -> None:
            self._server.close()

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


def sync_letta(base_url: str, api_key: str) -> Any:
    """The tests' own client of a real Letta server: no retries (a failure shows), and idle
    connections reused no longer than ci-evals' clients reuse them (IDLE_REUSE_S), for the same
    reason."""
    from letta_client import DefaultHttpxClient, Letta

    from ci_evals._util.netcause import sdk_limits

    return Letta(
        base_url=base_url,
        api_key=api_key,
        timeout=300,
        max_retries=0,
        http_client=DefaultHttpxClient(
            timeout=300, limits=sdk_limits(DefaultHttpxClient, None, 20)
        ),
    )
