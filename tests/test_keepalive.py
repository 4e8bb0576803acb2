"""No call goes out on a connection the server may be closing: every client of a run (the Letta
SDK's, the HTTP target's, the LLM path's aiohttp session and its httpx fallback) reuses an idle
connection for ``IDLE_REUSE_S`` at most, below the servers' keep-alive.

With the clients' old 5 s, equal to uvicorn's (the Letta server's) keep-alive, a request could
go out on a connection in the instant the server closed it; CI's real-server tests saw it once
("Server disconnected without sending a response"). :class:`KeepAliveServer` drops every request
that arrives on a connection idle for ``CUT_S`` (a server whose keep-alive is that long, firing
as the request arrives): a client keeping the connection longer than that fails these tests.
"""

from __future__ import annotations

import asyncio

import pytest

from ci_evals._util.netcause import IDLE_REUSE_S
from tests.fakes.keepalive import KeepAliveServer

CUT_S = 1.6
"""The fake server's keep-alive: longer than ci-evals' reuse, shorter than the SDKs' 5 s."""
IDLE_S = 1.7
"""How long the client waits between its two calls: past the server's keep-alive."""


def test_the_reuse_bound_is_below_the_servers_keep_alive():
    assert IDLE_REUSE_S < CUT_S < IDLE_S < 2.0  # gunicorn's 2 s, uvicorn's 5 s


def twice(body: dict, call, close) -> KeepAliveServer:
    """``call(url)`` twice, ``IDLE_S`` apart, against the fake server, then ``close()`` (both
    async)."""
    with KeepAliveServer(CUT_S, body) as server:

        async def main() -> list:
            try:
                first = await call(server.url)
                await asyncio.sleep(IDLE_S)
                return [first, await call(server.url)]
            finally:
                await close()

        server.results = asyncio.run(main())
    return server


def test_the_letta_client_opens_a_new_connection_after_an_idle_spell():
    from ci_evals.letta.client import LettaServer, make_client

    client = None

    async def health(url: str):
        nonlocal client
        client = client or make_client(LettaServer(base_url=url, api_key="k"))
        return (await client.health()).version

    async def close():
        await client.close()

    server = twice({"version": "0.16.8", "status": "ok"}, health, close)
    assert (server.results, server.connections, server.answered, server.dropped) == (
        ["0.16.8", "0.16.8"],
        2,
        2,
        0,
    )


def test_the_http_target_opens_a_new_connection_after_an_idle_spell(tmp_path):
    from ci_evals.config.specs import Context
    from ci_evals.core.sample import Sample
    from ci_evals.targets.http import HttpSpec, HttpTarget

    target = None

    async def run(url: str):
        nonlocal target
        if target is None:
            target = HttpTarget(HttpSpec(kind="http", url=url), Context(tmp_path))
            await target.start()
        return (await target.run(Sample(id=1, input="q"))).assistant_texts()

    async def close():
        await target.aclose()

    server = twice({"output": "Lima"}, run, close)
    assert (server.results, server.connections, server.dropped) == ([["Lima"], ["Lima"]], 2, 0)


@pytest.mark.parametrize("aiohttp", [True, False], ids=["aiohttp", "httpx"])
def test_the_llm_client_opens_a_new_connection_after_an_idle_spell(monkeypatch, aiohttp):
    from ci_evals.llm import transport

    monkeypatch.setattr(transport, "USE_AIOHTTP", aiohttp)
    client = None
    answer = {"choices": [{"message": {"role": "assistant", "content": "Lima"}}]}

    async def post(url: str):
        nonlocal client
        client = client or transport.make_client(url, "k", 30)
        data, _ = await transport.post(client, "/chat/completions", {"model": "m"}, url, 30)
        return data["choices"][0]["message"]["content"]

    async def close():
        await transport.close_client(client)

    server = twice(answer, post, close)
    assert (server.results, server.connections, server.dropped) == (["Lima", "Lima"], 2, 0)
    assert transport.has_session(client) is aiohttp  # the path named in the test's id was taken


def test_limits_come_from_the_sdks_own_http_library_else_httpx():
    import httpx
    import openai

    from ci_evals._util.netcause import sdk_limits

    base = openai.DefaultAsyncHttpxClient.__mro__[1]  # httpx2.AsyncClient since openai 2.x
    limits = sdk_limits(openai.DefaultAsyncHttpxClient, 1000, 100)
    assert type(limits).__module__.split(".")[0] == base.__module__.split(".")[0]
    assert (limits.max_connections, limits.keepalive_expiry) == (1000, IDLE_REUSE_S)

    class NoLibrary:  # no base from a library with Limits: httpx's
        pass

    assert type(sdk_limits(NoLibrary, None, 5)) is httpx.Limits
