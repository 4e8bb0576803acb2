"""The LLM client wrapper over real HTTP: retries, timeouts, keys, cache, usage, shared clients."""

from __future__ import annotations

import asyncio
import email.utils
import gzip
import json
import threading
import time

import pytest

import ci_evals.llm.client as llm_client
from ci_evals._util.errors import ConfigError
from ci_evals.llm import pool
from ci_evals.llm import transport as llm_transport
from ci_evals.llm.cache import ResponseCache, cache_key
from ci_evals.llm.client import LLM, retry_after_seconds
from ci_evals.llm.cost import LLMResult, Tally
from ci_evals.llm.errors import LLMError
from ci_evals.llm.openai_api import NO_KEY, effective_temperature, is_reasoning_model
from ci_evals.llm.pool import loop_state
from ci_evals.llm.prices import suite_price
from tests.fakes.openai_server import EMBEDDINGS, FakeOpenAI, embedding, openai_env, openai_server  # noqa: F401

KEY = "sk-test-secret-key-123456"
HELLO = [{"role": "user", "content": "hello there"}]


@pytest.fixture(autouse=True)
def fast_backoff(monkeypatch):
    """Backoff without a Retry-After stays short so retry tests run fast."""
    monkeypatch.setattr(llm_client, "BACKOFF_BASE", 0.01)


@pytest.fixture(params=["aiohttp", "httpx", "sdk-post"])
def transport(request, monkeypatch):
    """Run a test over both HTTP transports the SDK offers, aiohttp (used when installed) and httpx,
    and through the SDK's own ``post`` instead of the direct path over its HTTP client."""
    if request.param == "httpx":
        monkeypatch.setattr(llm_transport, "USE_AIOHTTP", False)
    if request.param == "sdk-post":
        monkeypatch.setattr(llm_transport, "DIRECT", False)
    return request.param


def chat(server: FakeOpenAI, *, cache_dir=None, repeat: int = 0, messages=HELLO, params=None, **kw):
    """One chat call through a fresh LLM (closed afterwards)."""

    async def go():
        kw.setdefault("base_url", server.url)
        llm = LLM(cache_dir=cache_dir, **kw)
        try:
            return await llm.chat(
                model="gpt-4o-mini", messages=messages, params=params, repeat=repeat
            )
        finally:
            await llm.aclose()

    return asyncio.run(go())


def chat_error(server: FakeOpenAI, **kw) -> LLMError:
    with pytest.raises(LLMError) as info:
        chat(server, **kw)
    return info.value


# --- basic calls --------------------------------------------------------------------------------


def test_chat_returns_content_and_usage(openai_env, transport):
    result = chat(openai_env)
    assert (result.content, result.usage, result.cache_hit, result.retries) == (
        "hello there",
        {"prompt_tokens": 2, "completion_tokens": 2},
        False,
        0,
    )


def test_request_body_has_model_messages_and_set_params_only(openai_env):
    chat(openai_env, params={"temperature": 0.0, "max_tokens": None, "seed": 7})
    assert openai_env.bodies() == [
        {"model": "gpt-4o-mini", "messages": HELLO, "temperature": 0.0, "seed": 7}
    ]


def test_key_from_openai_api_key_is_sent_as_bearer(openai_env):
    chat(openai_env)
    assert openai_env.requests[0].headers["authorization"] == f"Bearer {KEY}"


def test_api_key_env_names_the_variable_holding_the_key(openai_server, monkeypatch):
    monkeypatch.setenv("MY_GATEWAY_KEY", "gw-key-1")
    chat(openai_server, api_key_env="MY_GATEWAY_KEY")
    assert openai_server.requests[0].headers["authorization"] == "Bearer gw-key-1"


def test_base_url_from_environment(openai_env):
    async def go():
        llm = LLM()
        try:
            return await llm.chat(model="m", messages=HELLO)
        finally:
            await llm.aclose()

    assert asyncio.run(go()).content == "hello there"
    assert openai_env.count() == 1


def test_local_base_url_needs_no_key(openai_server, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    chat(openai_server)
    assert openai_server.requests[0].headers["authorization"] == f"Bearer {NO_KEY}"


def test_openai_without_a_key_is_a_config_error(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ConfigError) as info:
        asyncio.run(LLM(owner="graders.quality").start())
    assert str(info.value) == (
        "graders.quality: OPENAI_API_KEY is not set; set it, or point base_url / "
        "OPENAI_BASE_URL at an OpenAI-compatible server"
    )


def test_unset_api_key_env_is_a_config_error(openai_server, monkeypatch):
    monkeypatch.delenv("NOPE_KEY", raising=False)
    with pytest.raises(ConfigError) as info:
        asyncio.run(LLM(base_url=openai_server.url, api_key_env="NOPE_KEY", owner="target").start())
    assert str(info.value) == "target: environment variable NOPE_KEY (api_key_env) is not set"


def test_constructing_reads_nothing_and_opens_nothing(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    llm = LLM(api_key_env="UNSET_ANYWHERE")
    assert llm._client is None


# --- retries ------------------------------------------------------------------------------------


def test_429_is_waited_out_after_retry_after_seconds_without_using_a_retry(openai_env, transport):
    openai_env.fault("429", first=1, retry_after="1")
    t0 = time.monotonic()
    result = chat(openai_env, max_retries=0)
    elapsed = time.monotonic() - t0
    assert (result.content, result.retries, result.throttled, openai_env.count()) == (
        "hello there",
        0,
        1,
        2,
    )
    assert 0.95 <= elapsed < 3.0


def test_500_is_retried_with_backoff(openai_env, transport):
    openai_env.fault("500", first=2)
    result = chat(openai_env)
    assert (result.content, result.retries, openai_env.count()) == ("hello there", 2, 3)


def test_exhausted_retries_raise_with_the_count(openai_env, transport):
    openai_env.fault("502")
    err = chat_error(openai_env, max_retries=2)
    assert (err.message, err.status, err.retries, openai_env.count()) == (
        f"{openai_env.url}/chat/completions: HTTP 502: injected 502 (after 2 retries)",
        502,
        2,
        3,
    )


def test_client_errors_are_not_retried(openai_env):
    openai_env.fault("400", message="bad model")
    err = chat_error(openai_env)
    assert (err.message, err.retries, openai_env.count()) == (
        f"{openai_env.url}/chat/completions: HTTP 400: bad model",
        0,
        1,
    )


def test_hang_past_timeout_is_retried(openai_env, transport):
    openai_env.fault("hang", first=1)
    result = chat(openai_env, timeout=0.3)
    assert (result.content, result.retries, openai_env.count()) == ("hello there", 1, 2)


def test_timeouts_exhaust_retries(openai_env, transport):
    openai_env.fault("hang")
    t0 = time.monotonic()
    err = chat_error(openai_env, timeout=0.2, max_retries=1)
    assert (
        err.message == f"{openai_env.url}/chat/completions: timed out after 0.2 s (after 1 retries)"
    )
    assert time.monotonic() - t0 < 2.0


@pytest.mark.parametrize("kind", ["reset", "close", "truncated", "malformed"])
def test_broken_responses_are_retried(openai_env, transport, kind):
    openai_env.fault(kind, first=1)
    result = chat(openai_env)
    assert (result.content, result.retries, openai_env.count()) == ("hello there", 1, 2)


def test_malformed_body_without_retries_left_names_the_problem(openai_env):
    openai_env.fault("malformed")
    err = chat_error(openai_env, max_retries=0)
    assert err.message == f"{openai_env.url}/chat/completions: the response body is not valid JSON"


def test_connection_refused_names_host_and_port_and_is_not_retried_before_any_answer(
    openai_server, transport
):
    url = openai_server.url
    openai_server.stop()
    err = chat_error(openai_server, base_url=url, max_retries=3)
    port = url.split(":")[2].split("/")[0]
    assert err.message == (
        f"{url}/chat/completions: nothing listens on 127.0.0.1:{port} (connection refused)"
    )


def test_error_messages_never_contain_the_key(openai_env):
    openai_env.fault(
        "401", message=f"Incorrect API key provided: {KEY}. Other: sk-proj-abcdefgh1234"
    )
    err = chat_error(openai_env)
    assert err.message == (
        f"{openai_env.url}/chat/completions: HTTP 401: Incorrect API key provided: ***. "
        "Other: sk-***"
    )
    assert KEY not in str(err)


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "3"}, 3.0),
        ({"retry-after": "0.25"}, 0.25),
        ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5),
        ({"retry-after": "3600"}, 60.0),
        ({"retry-after": "soon"}, None),
        ({}, None),
    ],
)
def test_retry_after_header_forms(headers, expected):
    assert retry_after_seconds(headers) == expected


def test_retry_after_http_date():
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 28.0 <= retry_after_seconds({"retry-after": when}) <= 30.0


# --- the cache ----------------------------------------------------------------------------------


def test_second_identical_call_is_served_from_the_cache(openai_env, tmp_path):
    first = chat(openai_env, cache_dir=tmp_path)
    second = chat(openai_env, cache_dir=tmp_path)
    assert openai_env.count() == 1
    assert (second.cache_hit, second.usage, second.data) == (
        True,
        {"prompt_tokens": 0, "completion_tokens": 0},
        first.data,
    )
    assert first.cache_hit is False


def test_repeat_index_is_part_of_the_key(openai_env, tmp_path):
    chat(openai_env, cache_dir=tmp_path, repeat=0)
    chat(openai_env, cache_dir=tmp_path, repeat=1)
    again = chat(openai_env, cache_dir=tmp_path, repeat=1)
    assert (openai_env.count(), again.cache_hit) == (2, True)
    body = {"model": "m", "messages": HELLO}
    assert cache_key("u", body, 0) != cache_key("u", body, 1)


def test_any_parameter_change_misses_the_cache(openai_env, tmp_path):
    chat(openai_env, cache_dir=tmp_path, params={"temperature": 0.0})
    chat(openai_env, cache_dir=tmp_path, params={"temperature": 0.5})
    chat(
        openai_env,
        cache_dir=tmp_path,
        params={"temperature": 0.0},
        messages=[{"role": "user", "content": "x"}],
    )
    assert openai_env.count() == 3


def test_cache_key_is_canonical_and_endpoint_specific():
    a = {"model": "m", "messages": HELLO, "temperature": 0.0}
    b = {"temperature": 0.0, "messages": HELLO, "model": "m"}
    assert cache_key("http://a/v1/chat/completions", a) == cache_key(
        "http://a/v1/chat/completions", b
    )
    assert cache_key("http://a/v1/chat/completions", a) != cache_key(
        "http://b/v1/chat/completions", a
    )


def test_failed_calls_are_not_cached(openai_env, tmp_path):
    openai_env.fault("500", first=1)
    chat_error(openai_env, cache_dir=tmp_path, max_retries=0)
    assert chat(openai_env, cache_dir=tmp_path).cache_hit is False
    assert openai_env.count() == 2


def test_concurrent_identical_calls_make_one_request(openai_server, tmp_path):
    openai_server.latency = 0.05

    async def go():
        llm = LLM(base_url=openai_server.url, cache_dir=tmp_path)
        try:
            same = [llm.chat(model="m", messages=HELLO) for _ in range(40)]
            other = [
                llm.chat(model="m", messages=[{"role": "user", "content": f"q{i}"}])
                for i in range(10)
            ]
            return await asyncio.gather(*same, *other)
        finally:
            await llm.aclose()

    results = asyncio.run(go())
    assert openai_server.count() == 11
    assert sum(not r.cache_hit for r in results) == 11
    assert {json.dumps(r.data) for r in results[:40]} == {json.dumps(results[0].data)}
    files = sorted(p.name for p in tmp_path.rglob("*") if p.is_file())
    assert len(files) == 11 and all(f.endswith(".json") and not f.startswith(".") for f in files)


def test_cache_entries_stay_whole_under_concurrent_writers(tmp_path):
    cache = ResponseCache(tmp_path)
    payloads = [{"writer": i, "blob": "x" * 20000} for i in range(8)]
    bad: list = []

    def hammer(i: int) -> None:
        for _ in range(100):
            cache.put("k" * 64, payloads[i])
            got = cache.get("k" * 64)
            if got not in payloads:
                bad.append(got)

    threads = [threading.Thread(target=hammer, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert bad == []
    assert [p.name for p in tmp_path.rglob("*") if p.is_file()] == ["k" * 64 + ".json"]


def test_corrupt_cache_entry_is_a_miss(openai_env, tmp_path):
    chat(openai_env, cache_dir=tmp_path)
    (entry,) = [p for p in tmp_path.rglob("*.json")]
    entry.write_text("{not json")
    assert chat(openai_env, cache_dir=tmp_path).cache_hit is False
    assert openai_env.count() == 2


# --- embeddings ---------------------------------------------------------------------------------


def test_embed_returns_vectors_in_order_and_is_cached(openai_env, tmp_path):
    async def go():
        llm = LLM(cache_dir=tmp_path)
        try:
            return [
                await llm.embed("text-embedding-3-small", ["red apple", "green pear"])
                for _ in range(2)
            ]
        finally:
            await llm.aclose()

    first, second = asyncio.run(go())
    assert first.embeddings == [embedding("red apple"), embedding("green pear")]
    assert (first.usage, second.cache_hit, openai_env.count(EMBEDDINGS)) == (
        {"prompt_tokens": 4, "completion_tokens": 0},
        True,
        1,
    )
    assert openai_env.bodies(EMBEDDINGS) == [
        {"model": "text-embedding-3-small", "input": ["red apple", "green pear"]}
    ]


# --- shared clients -----------------------------------------------------------------------------


def test_llms_on_one_endpoint_share_one_client_and_its_connections(openai_server):
    async def go():
        a, b = LLM(base_url=openai_server.url), LLM(base_url=openai_server.url)
        await a.start()
        await b.start()
        shared = a._client is b._client
        for _ in range(10):
            await a.chat(model="m", messages=HELLO)
            await b.chat(model="m", messages=HELLO)
        await a.aclose()
        still_open = not b._client.is_closed()
        await b.aclose()
        return shared, still_open, loop_state().clients

    shared, still_open, pool = asyncio.run(go())
    assert (shared, still_open, pool) == (True, True, {})
    assert len({r.peer for r in openai_server.requests}) == 1


def test_many_concurrent_calls_reuse_pooled_connections(openai_server):
    openai_server.latency = 0.02

    async def go():
        pool.configure(max_concurrent=50)  # unconfigured, a loop's endpoints allow the default 10
        llm = LLM(base_url=openai_server.url)
        try:
            for _ in range(3):
                await asyncio.gather(*(llm.chat(model="m", messages=HELLO) for _ in range(50)))
        finally:
            await llm.aclose()

    asyncio.run(go())
    assert openai_server.count() == 150
    assert len({r.peer for r in openai_server.requests}) == 50


# --- pure helpers -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "reasoning"),
    [
        ("o1", True),
        ("o1-mini", True),
        ("o3-mini-2025-01-31", True),
        ("o4-mini", True),
        ("gpt-5", True),
        ("gpt-5-mini", True),
        ("openai/o3", True),
        ("GPT-5.1", True),
        ("gpt-4o-mini", False),
        ("gpt-4.1", False),
        ("llama3", False),
    ],
)
def test_reasoning_models(model, reasoning):
    assert is_reasoning_model(model) is reasoning
    assert effective_temperature(model, 0.0) == (1.0 if reasoning else 0.0)
    assert effective_temperature(model, None) is None


PRICES = {
    "gpt-4o-mini": {"input_per_mtok": 0.15, "output_per_mtok": 0.6},
    "gpt-4o": {"input_per_mtok": 2.5, "output_per_mtok": 10.0},
}


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("gpt-4o-mini", 0.00135),
        ("gpt-4o-mini-2024-07-18", 0.00135),
        ("openai/gpt-4o-mini", 0.00135),
        ("gpt-4o-2024-08-06", 0.0225),
        ("claude-3-5-sonnet", None),
    ],
)
def test_suite_price(model, expected):
    cost = suite_price(model, {"prompt_tokens": 1000, "completion_tokens": 2000}, PRICES)
    assert cost == pytest.approx(expected) if expected is not None else cost is None


def test_tally_metadata_sums_calls_and_errors():
    tally = Tally()
    tally.add(
        LLMResult({}, usage={"prompt_tokens": 10, "completion_tokens": 5}, retries=2),
        "gpt-4o-mini",
        PRICES,
    )
    tally.add(LLMResult({}, cache_hit=True), "gpt-4o-mini", PRICES)
    tally.add_error(LLMError("x", retries=3))
    assert tally.metadata() == {
        "usage": {"prompt_tokens": 10, "completion_tokens": 5},
        "cache_hits": 1,
        "retries": 5,
        "cost_usd": pytest.approx(4.5e-06),
    }
    assert Tally().metadata() == {
        "usage": {"prompt_tokens": 0, "completion_tokens": 0},
        "cache_hits": 0,
        "retries": 0,
        "cost_usd": 0.0,  # no call, nothing spent
    }


# --- HTTP framing both transports must handle -----------------------------------------------


def _completion_json(text: str) -> bytes:
    return json.dumps(
        {
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1},
        }
    ).encode()


def two_calls(server: FakeOpenAI) -> list[str]:
    """Two chat calls through one client (so the second may reuse the first's connection)."""

    async def go():
        llm = LLM(base_url=server.url)
        try:
            return [(await llm.chat(model="m", messages=HELLO)).content for _ in range(2)]
        finally:
            await llm.aclose()

    return asyncio.run(go())


def test_chunked_gzip_response_keeps_the_connection(openai_server, transport):
    body = gzip.compress(_completion_json("zipped"))
    chunks = b"".join(
        b"%x\r\n%s\r\n" % (len(body[i : i + 7]), body[i : i + 7]) for i in range(0, len(body), 7)
    )
    openai_server.script(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n" + chunks + b"0\r\n\r\n"
    )
    assert two_calls(openai_server) == ["zipped", "hello there"]
    assert len({r.peer for r in openai_server.requests}) == 1


def test_response_delimited_by_connection_close(openai_server, transport):
    openai_server.script(
        b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n"
        + _completion_json("until eof")
    )
    assert two_calls(openai_server) == ["until eof", "hello there"]
    assert len({r.peer for r in openai_server.requests}) == 2


def test_concurrent_identical_calls_share_a_failure_once(openai_server, tmp_path):
    openai_server.latency = 0.05
    openai_server.fault("500")

    async def go():
        llm = LLM(base_url=openai_server.url, cache_dir=tmp_path, max_retries=1)
        try:
            return await asyncio.gather(
                *(llm.chat(model="m", messages=HELLO) for _ in range(5)), return_exceptions=True
            )
        finally:
            await llm.aclose()

    errors = asyncio.run(go())
    assert openai_server.count() == 2
    assert sorted(e.retries for e in errors) == [0, 0, 0, 0, 1]
    assert {e.message for e in errors} == {
        f"{openai_server.url}/chat/completions: HTTP 500: injected 500 (after 1 retries)"
    }
