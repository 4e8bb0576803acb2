"""Issue 37 G5 and a low: no LLM call follows a redirect, and a body nested past the interpreter's
limit is a malformed answer, on every provider and every path, over real HTTP.

google-genai sent ``x-goog-api-key`` on to whatever origin a 307 named (https -> http too). The rule
now: LLM calls follow no redirect at all (``failures.NO_REDIRECTS``). A 3xx is a failure naming where
it points, not retried; the other origin never sees a request, so neither the key nor the prompt.
"""

from __future__ import annotations

import asyncio
import json
import re

import pytest
from pytest_httpserver import HTTPServer
from werkzeug import Response

from ci_evals.llm import transport
from ci_evals.llm.client import LLM
from ci_evals.llm.errors import LLMError

KEY = "sk-redirect-secret-0123456789abcdef"
HELLO = [{"role": "user", "content": "hi"}]
ANY = re.compile(".*")
# provider, the path a call takes (see ci_evals.llm.transport), the URL suffix the provider expects
PATHS = [
    ("openai", "aiohttp"),
    ("openai", "httpx"),
    ("openai", "sdk"),
    ("anthropic", "sdk"),
    ("google", "aiohttp"),
    ("google", "httpx"),
]


@pytest.fixture(autouse=True)
def no_proxy_env(monkeypatch):
    for name in (
        "http_proxy",
        "https_proxy",
        "all_proxy",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "no_proxy",
        "NO_PROXY",
        "OPENAI_BASE_URL",
        "ANTHROPIC_BASE_URL",
        "GOOGLE_GEMINI_BASE_URL",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("REDIRECT_KEY", KEY)


@pytest.fixture
def servers():
    first, other = HTTPServer(host="127.0.0.1", port=0), HTTPServer(host="localhost", port=0)
    first.start()
    other.start()
    yield first, other
    first.clear()
    other.clear()
    first.stop()
    other.stop()


def _use(monkeypatch, provider: str, way: str) -> None:
    if provider == "openai" and way == "httpx":
        monkeypatch.setattr(transport, "USE_AIOHTTP", False)
    elif provider == "openai" and way == "sdk":
        monkeypatch.setattr(transport, "DIRECT", False)
    elif provider == "google" and way == "httpx":
        from google.genai import _api_client

        monkeypatch.setattr(_api_client, "has_aiohttp", False)


def _call(base: str, provider: str) -> str:
    """The LLMError's message of one chat call (the test fails if the call succeeds)."""

    async def go():
        llm = LLM(
            base_url=base, api_key_env="REDIRECT_KEY", provider=provider, max_retries=2, timeout=10
        )
        try:
            await llm.chat(model="m", messages=HELLO)
        except LLMError as exc:
            return exc.message
        finally:
            await llm.aclose()
        raise AssertionError("the call succeeded")

    return asyncio.run(go())


def _base(server: HTTPServer, provider: str) -> str:
    return server.url_for("/v1" if provider == "openai" else "/").rstrip("/")


@pytest.mark.parametrize("status", [307, 302])
@pytest.mark.parametrize(("provider", "way"), PATHS)
def test_a_redirect_to_another_origin_is_not_followed_and_no_key_leaves(
    servers, monkeypatch, provider, way, status
):
    first, other = servers
    _use(monkeypatch, provider, way)
    target = other.url_for("/steal?token=abc")
    # Its body is a usable answer of every provider: taking a 3xx's body for the answer is wrong too.
    answer = {
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}}],
        "content": [{"type": "text", "text": "ok"}],
        "candidates": [{"content": {"parts": [{"text": "ok"}], "role": "model"}}],
    }
    first.expect_request(ANY, method="POST").respond_with_response(
        Response(
            json.dumps(answer),
            status=status,
            headers={"Location": target},
            content_type="application/json",
        )
    )
    other.expect_request("/steal").respond_with_data("{}")
    message = _call(_base(first, provider), provider)
    assert (
        f"HTTP {status}: the server redirects to http://localhost:{other.port}/steal; LLM calls follow no "
        "redirect (the key goes to base_url's host alone): set base_url to the address it names"
        in message
    )
    assert "token=abc" not in message and KEY not in message
    assert other.log == []  # no request at all: no key, no prompt
    assert len(first.log) == 1  # systematic: not retried
    [(request, _)] = first.log
    sent = {k.lower(): v for k, v in request.headers.items()}
    assert KEY in (
        sent.get("authorization", "") + sent.get("x-api-key", "") + sent.get("x-goog-api-key", "")
    )


@pytest.mark.parametrize(("provider", "way"), PATHS)
def test_a_body_nested_200000_deep_is_a_malformed_answer_not_a_recursion_error(
    servers, monkeypatch, provider, way
):
    """Retried as any malformed body is, then one LLMError; never a bare RecursionError."""
    first, _ = servers
    _use(monkeypatch, provider, way)
    deep = b'{"choices": ' + b"[" * 200_000 + b"]" * 200_000 + b"}"
    first.expect_request(ANY, method="POST").respond_with_data(
        deep, content_type="application/json"
    )
    message = _call(_base(first, provider), provider)
    assert "(after 2 retries)" in message
    assert len(first.log) == 3
