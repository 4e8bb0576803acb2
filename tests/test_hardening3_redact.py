"""Issue 37, a low: a key echoed as hex was not masked (its base64 forms were). Now a secret's hex
forms, lower and upper case, are secrets of their own (ci_evals._util.redact.hex_forms), pieces of
them included; shown on the text a server sends back too (real HTTP)."""

from __future__ import annotations

import asyncio

import pytest

from ci_evals._util import redact
from ci_evals.llm.client import LLM
from ci_evals.llm.errors import LLMError

KEY = "sk-hexed-key-9f8e7d6c5b4a"


@pytest.fixture(autouse=True)
def registered(monkeypatch):
    monkeypatch.setattr(redact, "_registered", set())
    monkeypatch.setenv("HEXED_API_KEY", KEY)


@pytest.mark.parametrize("form", ["lower", "upper", "piece", "short"])
def test_a_secret_echoed_as_hex_is_masked(form, monkeypatch):
    secret = "pw-42-ok" if form == "short" else KEY  # 8 characters: its hex is 16
    redact.register(secret)
    hexed = secret.encode().hex()
    shown = {"lower": hexed, "upper": hexed.upper(), "piece": hexed[6:30], "short": hexed}[form]
    text = f"the server said: key={shown} (hex)"
    scrubbed = redact.scrub(text)
    assert shown not in scrubbed and "***" in scrubbed
    assert scrubbed.startswith("the server said: key=") and scrubbed.endswith(" (hex)")
    assert (
        redact.scrub("deadbeef 0123456789abcdef is no secret")
        == "deadbeef 0123456789abcdef is no secret"
    )


def test_a_server_echoing_the_key_as_hex_leaves_no_trace_in_the_error(httpserver, monkeypatch):
    for name in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    hexed = KEY.encode().hex()
    httpserver.expect_request("/v1/chat/completions").respond_with_json(
        {"error": {"message": f"bad key {hexed} / {hexed.upper()}"}}, status=401
    )

    async def go():
        llm = LLM(base_url=httpserver.url_for("/v1"), api_key_env="HEXED_API_KEY", max_retries=0)
        try:
            await llm.chat(model="m", messages=[{"role": "user", "content": "hi"}])
        finally:
            await llm.aclose()

    with pytest.raises(LLMError) as caught:
        asyncio.run(go())
    message = caught.value.message
    assert message.endswith("HTTP 401: bad key *** / ***")
    assert hexed[:16] not in message.lower()
