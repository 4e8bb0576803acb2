"""The fake LLM servers' rate limits: OpenAI's and Anthropic's documented 429s and headers, over real HTTP.

Most tests freeze the limiter's clock (``server.clock``) so every figure is exact; one waits the
advertised time on the real clock and checks the request then fits.
"""

from __future__ import annotations

import json
import re
import time
from datetime import UTC, datetime

import anthropic
import httpx
import openai
import pytest

from tests.fakes.openai_server import FakeOpenAI, spawn, stats
from tests.fakes.vendor_servers import FakeAnthropic, FakeGemini

MORE = "Visit https://platform.openai.com/account/rate-limits to learn more."
RATE_HEADERS = re.compile(r"^(x-ratelimit-|anthropic-ratelimit-|retry-after)")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def server():
    with FakeOpenAI() as s:
        s.clock = Clock()
        yield s


def chat(server: FakeOpenAI, text: str = "hello there", **extra) -> httpx.Response:
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": text}], **extra}
    return httpx.post(
        f"{server.url}/chat/completions", json=body, headers={"Authorization": "Bearer sk-x"}
    )


def rate_headers(resp: httpx.Response) -> dict[str, str]:
    return {k: v for k, v in resp.headers.items() if RATE_HEADERS.match(k)}


def test_second_immediate_request_is_429_with_openais_body_and_headers(server):
    server.rate_limit(rpm=60, burst_s=1)
    first = chat(server)
    assert first.status_code == 200
    assert rate_headers(first) == {
        "x-ratelimit-limit-requests": "60",
        "x-ratelimit-remaining-requests": "0",
        "x-ratelimit-reset-requests": "1s",
    }
    second = chat(server)
    assert second.status_code == 429
    assert second.json() == {
        "error": {
            "message": "Rate limit reached for gpt-4o-mini in organization org-fake on requests per min (RPM): Limit 60, "
            f"Used 60, Requested 1. Please try again in 1s. {MORE}",
            "type": "requests",
            "param": None,
            "code": "rate_limit_exceeded",
        }
    }
    assert rate_headers(second) == {
        "x-ratelimit-limit-requests": "60",
        "x-ratelimit-remaining-requests": "0",
        "x-ratelimit-reset-requests": "1s",
        "retry-after-ms": "1000",
        "retry-after": "1",
    }
    server.clock.now += 0.88
    third = chat(server)
    assert third.status_code == 429
    assert "Used 7, Requested 1. Please try again in 120ms." in third.json()["error"]["message"]
    assert (third.headers["retry-after-ms"], third.headers["retry-after"]) == ("120", "1")
    assert third.headers["x-ratelimit-reset-requests"] == "120ms"
    server.clock.now += 0.12
    assert chat(server).status_code == 200
    assert server.rate_stats == {"accepted": 2, "rejected": 2, "max_in_flight": 1}
    assert server.count() == 4  # a rejected request still reached the server


def test_after_the_advertised_wait_the_request_fits_on_the_real_clock():
    with FakeOpenAI() as server:
        server.rate_limit(rpm=60, burst_s=1)
        assert chat(server).status_code == 200
        rejected = chat(server)
        assert rejected.status_code == 429
        wait_ms = int(rejected.headers["retry-after-ms"])
        assert 0 < wait_ms <= 1000  # 1 s less the time between the two requests
        time.sleep(wait_ms / 1000)
        assert chat(server).status_code == 200
        assert server.rate_stats["accepted"] == 2 and server.rate_stats["rejected"] == 1


def test_remaining_requests_counts_down_and_reset_grows(server):
    server.rate_limit(rpm=60, burst_s=60)
    seen = [rate_headers(chat(server)) for _ in range(3)]
    assert [
        (h["x-ratelimit-remaining-requests"], h["x-ratelimit-reset-requests"]) for h in seen
    ] == [("59", "1s"), ("58", "2s"), ("57", "3s")]
    assert {h["x-ratelimit-limit-requests"] for h in seen} == {"60"}
    server.clock.now += 90.5
    assert rate_headers(chat(server))["x-ratelimit-remaining-requests"] == "59"


def test_reset_uses_openais_duration_format(server):
    server.rate_limit(rpm=1, burst_s=60)  # one request a minute: the bucket refills in 60 s
    assert chat(server).headers["x-ratelimit-reset-requests"] == "1m0s"
    rejected = chat(server)
    assert "Please try again in 1m0s." in rejected.json()["error"]["message"]
    assert (rejected.headers["retry-after-ms"], rejected.headers["retry-after"]) == ("60000", "60")
    server.clock.now += 58.5
    assert chat(server).headers["retry-after-ms"] == "1500"


def test_token_bucket_charges_prompt_words_plus_max_tokens(server):
    server.rate_limit(
        tpm=120, burst_s=60
    )  # a 120-token bucket refilled at 2 tokens/s; no request limit
    ok = chat(server, "one two three", max_tokens=7)
    assert ok.status_code == 200
    assert rate_headers(ok) == {
        "x-ratelimit-limit-tokens": "120",
        "x-ratelimit-remaining-tokens": "110",
        "x-ratelimit-reset-tokens": "5s",
    }
    over = chat(server, "one", max_completion_tokens=110)
    assert over.status_code == 429
    assert over.json()["error"] == {
        "message": "Rate limit reached for gpt-4o-mini in organization org-fake on tokens per min (TPM): Limit 120, "
        f"Used 10, Requested 111. Please try again in 500ms. {MORE}",
        "type": "tokens",
        "param": None,
        "code": "rate_limit_exceeded",
    }
    assert (over.headers["retry-after-ms"], over.headers["retry-after"]) == ("500", "1")
    server.clock.now += 0.5
    assert chat(server, "one", max_completion_tokens=110).status_code == 200
    assert server.rate_stats == {"accepted": 2, "rejected": 1, "max_in_flight": 1}


def test_a_request_larger_than_the_token_bucket_is_too_large_without_a_retry_time(server):
    server.rate_limit(tpm=120, burst_s=60)
    resp = chat(server, "one", max_tokens=200)
    assert resp.status_code == 429
    assert resp.json()["error"]["message"] == (
        "Request too large for gpt-4o-mini in organization org-fake on tokens per min (TPM): Limit 120, Requested 201. "
        f"The input or output tokens must be reduced in order to run successfully. {MORE}"
    )
    assert "retry-after" not in resp.headers and "retry-after-ms" not in resp.headers


def test_without_a_cap_the_reply_words_are_charged_after_the_reply(server):
    server.rate_limit(tpm=120, burst_s=60)
    first = chat(
        server, "a b c"
    )  # the default responder echoes: 3 prompt words, then 3 completion words
    assert first.json()["usage"] == {"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6}
    assert first.headers["x-ratelimit-remaining-tokens"] == "117"
    assert chat(server, "a b c").headers["x-ratelimit-remaining-tokens"] == "111"
    emb = httpx.post(
        f"{server.url}/embeddings", json={"model": "text-embedding-3-small", "input": ["x y", "z"]}
    )
    assert emb.headers["x-ratelimit-remaining-tokens"] == "105"


def test_both_buckets_send_both_trios_and_a_request_limit_names_rpm(server):
    server.rate_limit(rpm=60, tpm=6000, burst_s=1)
    ok = chat(server, "one two", max_tokens=3)
    assert rate_headers(ok) == {
        "x-ratelimit-limit-requests": "60",
        "x-ratelimit-remaining-requests": "0",
        "x-ratelimit-reset-requests": "1s",
        "x-ratelimit-limit-tokens": "6000",
        "x-ratelimit-remaining-tokens": "95",
        "x-ratelimit-reset-tokens": "50ms",
    }
    assert chat(server).json()["error"]["type"] == "requests"


def test_rate_limit_without_arguments_turns_limiting_off(server):
    server.rate_limit(rpm=60)
    assert chat(server).status_code == 200 and chat(server).status_code == 429
    server.rate_limit()
    resp = chat(server)
    assert resp.status_code == 200 and rate_headers(resp) == {}
    assert server.rate_stats == {"accepted": 2, "rejected": 1, "max_in_flight": 1}
    with pytest.raises(ValueError, match="must be positive"):
        server.rate_limit(rpm=60, burst_s=0)


def test_faults_and_models_are_unaffected_and_fault_answers_carry_the_headers(server):
    server.rate_limit(rpm=120, burst_s=60)
    assert rate_headers(httpx.get(f"{server.url}/models")) == {}
    server.fault("500", first=1)
    failed = chat(server)
    assert failed.status_code == 500 and failed.headers["x-ratelimit-remaining-requests"] == "119"


def test_the_openai_sdk_reads_the_429_as_a_rate_limit_error(server):
    server.rate_limit(rpm=60)
    client = openai.OpenAI(base_url=server.url, api_key="sk-x", max_retries=0)
    client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}]
    )
    with pytest.raises(openai.RateLimitError) as err:
        client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}]
        )
    assert err.value.code == "rate_limit_exceeded" and err.value.type == "requests"
    assert err.value.response.headers["retry-after-ms"] == "1000"


def test_max_in_flight_counts_concurrent_requests():
    import http.client

    with FakeOpenAI(latency=1.0) as server:
        server.rate_limit(rpm=6000, burst_s=1)  # 100 at once fit
        body = json.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]})
        conns = [http.client.HTTPConnection("127.0.0.1", server.port, timeout=30) for _ in range(4)]
        for conn in conns:  # all four sent before any answer is read: the server holds them at once
            conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
        codes = [conn.getresponse().status for conn in conns]
        for conn in conns:
            conn.close()
        assert codes == [200] * 4
        assert server.rate_stats == {"accepted": 4, "rejected": 0, "max_in_flight": 4}


# --- Anthropic and Gemini ---------------------------------------------------------------------


def messages(server: FakeAnthropic, max_tokens: int = 5) -> httpx.Response:
    body = {
        "model": "claude-haiku-4-5",
        "max_tokens": max_tokens,
        "messages": [{"role": "user", "content": "hi you"}],
    }
    return httpx.post(
        f"{server.url}/v1/messages",
        json=body,
        headers={"x-api-key": "sk-ant-x", "anthropic-version": "2023-06-01"},
    )


def rfc3339_in(value: str, low: float, high: float) -> bool:
    at = datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
    return low <= at - time.time() <= high


def test_anthropic_429_has_the_rate_limit_error_shape_and_headers():
    with FakeAnthropic() as server:
        server.clock = Clock()
        server.rate_limit(rpm=60, tpm=600, burst_s=1)
        ok = messages(server)
        assert ok.status_code == 200
        h = rate_headers(ok)
        assert sorted(h) == sorted(
            f"anthropic-ratelimit-{k}-{f}"
            for k in ("requests", "tokens", "input-tokens")
            for f in ("limit", "remaining", "reset")
        )
        assert (
            h["anthropic-ratelimit-requests-limit"],
            h["anthropic-ratelimit-requests-remaining"],
        ) == ("60", "0")
        assert (
            h["anthropic-ratelimit-tokens-limit"],
            h["anthropic-ratelimit-tokens-remaining"],
        ) == ("600", "3")
        assert (
            h["anthropic-ratelimit-input-tokens-remaining"] == "3"
        )  # 10 - (2 prompt words + max_tokens 5)
        assert rfc3339_in(h["anthropic-ratelimit-requests-reset"], -0.1, 2.1)
        rejected = messages(server)
        assert rejected.status_code == 429
        assert rejected.json() == {
            "type": "error",
            "request_id": "req_2",
            "error": {
                "type": "rate_limit_error",
                "message": "This request would exceed your organization's rate limit of 60 requests per minute (org: "
                "org-fake, model: claude-haiku-4-5). For details, refer to: "
                "https://docs.claude.com/en/api/rate-limits. You can see the response headers for current "
                "usage. Please reduce the prompt length or the maximum tokens requested, or try again later.",
            },
        }
        assert rejected.headers["retry-after"] == "1"
        assert "retry-after-ms" not in rejected.headers
        assert server.rate_stats == {"accepted": 1, "rejected": 1, "max_in_flight": 1}
        server.clock.now += 1
        too_many_tokens = messages(server, max_tokens=9)
        assert (
            too_many_tokens.status_code == 429
            and "600 input tokens per minute" in too_many_tokens.text
        )


def test_anthropic_sdk_reads_429_and_the_overloaded_529():
    with FakeAnthropic() as server:
        server.rate_limit(rpm=60)
        client = anthropic.Anthropic(base_url=server.url, api_key="sk-ant-x", max_retries=0)
        ask = {
            "model": "claude-haiku-4-5",
            "max_tokens": 5,
            "messages": [{"role": "user", "content": "hi"}],
        }
        client.messages.create(**ask)
        with pytest.raises(anthropic.RateLimitError):
            client.messages.create(**ask)
        server.rate_limit()
        server.fault("overloaded", first=1)
        over = messages(server)
        assert over.status_code == 529
        assert over.json()["error"] == {"type": "overloaded_error", "message": "injected 529"}


def test_gemini_429_is_resource_exhausted_with_a_retry_delay():
    with FakeGemini() as server:
        server.clock = Clock()
        server.rate_limit(rpm=60)
        url = f"{server.url}v1beta/models/gemini-2.5-flash:generateContent"
        body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
        assert httpx.post(url, json=body, headers={"x-goog-api-key": "k"}).status_code == 200
        resp = httpx.post(url, json=body, headers={"x-goog-api-key": "k"})
        assert resp.status_code == 429 and rate_headers(resp) == {}
        err = resp.json()["error"]
        assert (err["code"], err["status"]) == (429, "RESOURCE_EXHAUSTED")
        assert err["details"] == [
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "1.000s"}
        ]


def test_process_mode_limits_and_serves_its_counts():
    proc, url = spawn(0.0, rpm=60, burst_s=1)
    try:
        codes = [
            httpx.post(f"{url}/chat/completions", json={"model": "m", "messages": []}).status_code
            for _ in range(2)
        ]
        assert codes == [200, 429]
        assert stats(url) == {"accepted": 1, "rejected": 1, "max_in_flight": 1}
    finally:
        proc.kill()
        proc.wait()
