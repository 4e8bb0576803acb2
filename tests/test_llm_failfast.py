"""Failing fast on what waiting cannot fix, over real HTTP through the CLI: an endpoint that only
ever answers "overloaded", and an https:// base URL on a server that speaks plain HTTP."""

from __future__ import annotations

import asyncio
import http.server
import re
import threading
import time

import pytest

from ci_evals.llm import scheduler
from ci_evals.llm import transport as llm_transport
from tests.fakes.openai_server import FakeOpenAI, Fault
from tests.test_request_engine import KEY, endpoint, key_env, llm_suite, timed_run  # noqa: F401

SCHEME = "is the base_url scheme right (https vs http)?"
TLS_HINT = "check the scheme of base_url (or OPENAI_BASE_URL)"


@pytest.fixture
def give_up_fast(monkeypatch):
    monkeypatch.setattr(scheduler, "OVERLOADED_GIVE_UP", 1.0)


@pytest.mark.parametrize("status", ["503", "529"])
def test_an_endpoint_that_never_answers_but_overloaded_is_stopped(
    sd, key_env, give_up_fast, capsys, status
):
    with FakeOpenAI() as server:
        server.fault(status, retry_after="0.3", message="upstream unavailable")
        code, elapsed, sent = timed_run(sd, server, 20, "--max-concurrent", "4", judge=False)
    summary = sd.summary()
    assert (code, summary["verdict"], summary["errors"]["total"]) == (1, "errored", 20)
    assert 1.0 < elapsed < 8
    line = endpoint(summary)["stopped"]
    assert re.fullmatch(
        rf"stopped calling {re.escape(server.url)}: the server kept answering overloaded \(HTTP "
        rf"{status}\) for 1 s, (\d+) answers and not one success \(check that the server is up and "
        r"can serve this model\)",
        line,
    ), line
    assert int(line.split(" answers")[0].rsplit(" ", 1)[1]) == sent
    assert summary["verdict_reason"].startswith(line)
    messages = [r["error"]["message"] for r in sd.results()]
    assert sum(m.endswith(f": not sent: {line}") for m in messages) >= 20 - 4
    assert any(f"HTTP {status}: upstream unavailable; {line}" in m for m in messages)
    assert capsys.readouterr().err.count(f"error: {line}") == 1


def test_overload_after_a_success_is_waited_out_and_never_stops_the_endpoint(
    sd, key_env, give_up_fast
):
    replies = iter(["4"])
    with FakeOpenAI(
        responder=lambda req: next(replies, None) or Fault("503", retry_after="0.3")
    ) as server:
        llm_suite(sd, 2, base_url=server.url, judge=False)
        code = sd.run("--max-concurrent", "1", "--max-wait", "2")
    summary = sd.summary()
    assert (code, summary["errors"]["total"]) == (1, 1)
    assert "stopped" not in endpoint(summary)
    failed = [r for r in sd.results() if r.get("error")]
    assert failed[0]["error"]["message"].endswith(
        "rate limited: still throttled after 2 s (max_wait 2 s)"
    )


class _HangUp(threading.Thread):
    """A TCP server that reads what comes and closes: an HTTP server meeting a TLS hello it cannot read."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()

    def run(self) -> None:
        async def serve():
            async def handle(reader, writer):
                await reader.read(100)
                writer.close()

            self.server = await asyncio.start_server(handle, "127.0.0.1", 0)
            self.port = self.server.sockets[0].getsockname()[1]
            self.ready.set()
            await self.server.serve_forever()

        try:
            self.loop.run_until_complete(serve())
        except asyncio.CancelledError:
            pass

    def __enter__(self):
        self.start()
        self.ready.wait(5)
        return self

    def __exit__(self, *exc):
        self.loop.call_soon_threadsafe(self.server.close)


def run_tls(sd, url: str) -> tuple[int, dict, float]:
    llm_suite(sd, 20, base_url=url, judge=False)
    t0 = time.monotonic()
    code = sd.run("--max-concurrent", "4")
    return code, sd.summary(), time.monotonic() - t0


def assert_tls_stop(code, summary, elapsed, cause: str, url: str) -> None:
    """``cause``: a regular expression (OpenSSL's messages end with a source line number)."""
    line = endpoint(summary)["stopped"]
    assert re.fullmatch(
        re.escape(f"stopped calling {url} after its first calls all failed: ")
        + cause
        + re.escape(f" ({TLS_HINT})"),
        line,
    ), line
    assert (code, summary["verdict"], summary["errors"]["total"]) == (1, "errored", 20)
    assert elapsed < 10


@pytest.mark.parametrize("http_lib", ["aiohttp", "httpx"])
def test_https_on_a_server_that_hangs_up_is_a_tls_error_with_the_scheme_hint(
    sd, key_env, monkeypatch, http_lib
):
    monkeypatch.setattr(llm_transport, "USE_AIOHTTP", http_lib == "aiohttp")
    with _HangUp() as server:
        url = f"https://127.0.0.1:{server.port}/v1"
        code, summary, elapsed = run_tls(sd, url)
    where = f"TLS failed with 127.0.0.1:{server.port}: "
    cause = (
        re.escape(f"{where}the server closed the connection during the TLS handshake ({SCHEME})")
        if http_lib == "aiohttp"
        else re.escape(where)
        + r"(\[SSL: UNEXPECTED_EOF_WHILE_READING\] EOF occurred in violation of protocol"
        r"|TLS/SSL connection has been closed \(EOF\)) "  # OpenSSL 3.x words it so; Debian 12's 3.0 so
         + r"\(_ssl\.c:\d+\) " + re.escape(f"({SCHEME})")
    )
    assert_tls_stop(code, summary, elapsed, cause, url)


def test_https_on_a_plain_http_server_is_a_tls_error_with_the_scheme_hint(sd, key_env):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"https://127.0.0.1:{server.server_address[1]}/v1"
        code, summary, elapsed = run_tls(sd, url)
    finally:
        server.shutdown()
    cause = (
        re.escape(
            f"TLS failed with 127.0.0.1:{server.server_address[1]}: [SSL: WRONG_VERSION_NUMBER] wrong "
            "version number "
        )
        + r"\(_ssl\.c:\d+\) "
        + re.escape(f"({SCHEME})")
    )
    assert_tls_stop(code, summary, elapsed, cause, url)
