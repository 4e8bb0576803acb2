"""The fake LLM behind the real Letta server (tests/fakes/letta_llm.py): ``stream: true`` gives the
same answer as the plain response, as OpenAI's SSE chunks (Letta Code needs a model that streams)."""

from __future__ import annotations

import json
import threading
import urllib.request

import pytest

from tests.fakes import letta_llm


@pytest.fixture(scope="module")
def url():
    server = letta_llm.Server(("127.0.0.1", 0), letta_llm.Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1/chat/completions"
    server.shutdown()
    server.server_close()


def post(url: str, body: dict) -> tuple[str, bytes]:
    req = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        return resp.headers["Content-Type"], resp.read()


def chunks(raw: bytes) -> list:
    events = [e for e in raw.decode().split("\n\n") if e]
    assert all(e.startswith("data: ") for e in events) and events[-1] == "data: [DONE]"
    return [json.loads(e[len("data: ") :]) for e in events[:-1]]


TOOL = {
    "type": "function",
    "function": {
        "name": "get_capital",
        "parameters": {"type": "object", "properties": {"country": {"type": "string"}}},
    },
}


@pytest.mark.parametrize(
    "body",
    [
        {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hello there"}]},
        {
            "model": "gpt-4o-mini",
            "messages": [{"role": "user", "content": "What is the capital of France?"}],
            "tools": [TOOL],
        },
    ],
    ids=["content", "tool_call"],
)
def test_a_streamed_answer_is_the_plain_answer_in_chunks(url, body):
    ctype, plain = post(url, body)
    assert ctype == "application/json"
    plain = json.loads(plain)
    ctype, raw = post(url, {**body, "stream": True, "stream_options": {"include_usage": True}})
    assert ctype == "text/event-stream"
    got = chunks(raw)
    assert {c["object"] for c in got} == {"chat.completion.chunk"} and len(
        {c["id"] for c in got}
    ) == 1
    assert got[0]["choices"][0]["delta"]["role"] == "assistant"
    content, calls = "", {}
    for c in got[:-1]:
        delta = c["choices"][0]["delta"]
        content += delta.get("content") or ""
        for tc in delta.get("tool_calls") or []:
            call = calls.setdefault(
                tc["index"],
                {"id": None, "type": "function", "function": {"name": "", "arguments": ""}},
            )
            call["id"] = tc.get("id") or call["id"]
            call["function"]["name"] += (tc.get("function") or {}).get("name", "")
            call["function"]["arguments"] += (tc.get("function") or {}).get("arguments", "")
        assert c["choices"][0]["finish_reason"] is None
    message = plain["choices"][0]["message"]
    assert content == (message["content"] or "")
    streamed = [calls[i] for i in sorted(calls)]
    assert all(c["id"].startswith("call_") for c in streamed)  # ids hash the request, which differs
    assert [{**c, "id": None} for c in streamed] == [
        {**c, "id": None} for c in message.get("tool_calls", [])
    ]
    finish = got[-1]
    assert finish["choices"][0] == {
        "index": 0,
        "delta": {},
        "finish_reason": plain["choices"][0]["finish_reason"],
    }
    assert finish["usage"]["completion_tokens"] == plain["usage"]["completion_tokens"] >= 1


def test_a_letta_code_turn_gets_a_text_answer(url):
    user = (
        "<system-reminder>\nThe user has just initiated a new connection via the Letta Code CLI client.\n"
        "</system-reminder>\n\n What is 2+2? Answer with just the number."
    )
    _, raw = post(
        url,
        {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": user}], "tools": [TOOL]},
    )
    message = json.loads(raw)["choices"][0]["message"]
    assert message == {"role": "assistant", "content": "4"}
