"""Issue 37, lows on the response cache (ci_evals.llm.cache), over real HTTP: an entry replaced by a
FIFO held the run (the read waited for a writer), a deeply nested one was a bare RecursionError.
Anything odd in the cache is a miss: the call goes to the server and its answer replaces the entry."""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time

import pytest

from ci_evals.llm.cache import ResponseCache, cache_key
from ci_evals.llm.client import LLM

HELLO = [{"role": "user", "content": "hi"}]
ANSWER = {
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "from the server"}}],
    "usage": {"prompt_tokens": 1, "completion_tokens": 3},
}


@pytest.fixture
def served(httpserver, monkeypatch):
    for name in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CACHE_TEST_KEY", "sk-cache-test-0123456789")
    httpserver.expect_request("/v1/chat/completions", method="POST").respond_with_json(ANSWER)
    return httpserver


def _chat(base: str, cache_dir) -> tuple[str, bool]:
    async def go():
        llm = LLM(
            base_url=base,
            api_key_env="CACHE_TEST_KEY",
            cache_dir=cache_dir,
            max_retries=0,
            timeout=10,
        )
        try:
            result = await llm.chat(model="m", messages=HELLO)
        finally:
            await llm.aclose()
        return result.content, result.cache_hit

    return asyncio.run(go())


def _entry(served, cache_dir):
    base = served.url_for("/v1").rstrip("/")
    path = ResponseCache(cache_dir).path(
        cache_key(base + "/chat/completions", {"model": "m", "messages": HELLO})
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    return base, path


def test_an_entry_replaced_by_a_fifo_is_a_miss_at_once(served, tmp_path):
    base, path = _entry(served, tmp_path)
    os.mkfifo(path)
    # Without the fix the read waits for a writer: this one comes after 8 s (the test must not hang).
    unblock = threading.Timer(8, lambda: os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK)))
    unblock.start()
    t0 = time.monotonic()
    try:
        assert _chat(base, tmp_path) == ("from the server", False)
    finally:
        unblock.cancel()
    assert time.monotonic() - t0 < 4
    assert len(served.log) == 1


@pytest.mark.parametrize("planted", ["deep", "nan", "folder"])
def test_an_odd_entry_is_a_miss_and_the_answer_replaces_it(served, tmp_path, planted):
    base, path = _entry(served, tmp_path)
    if planted == "folder":
        path.mkdir()
    else:
        path.write_text(
            {
                "deep": '{"choices": ' + "[" * 200_000 + "]" * 200_000 + "}",
                "nan": json.dumps(ANSWER).replace("1,", "NaN,"),
            }[planted]
        )
    assert _chat(base, tmp_path) == ("from the server", False)
    assert len(served.log) == 1
    if planted != "folder":
        assert (
            json.loads(path.read_text())["choices"] == ANSWER["choices"]
        )  # the odd entry replaced
        assert _chat(base, tmp_path) == ("from the server", True)
        assert len(served.log) == 1
