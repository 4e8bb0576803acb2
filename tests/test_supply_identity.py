"""Issue 41, item 6: an honest identity and honest errors, over real HTTP.

The direct path names ci-evals (``User-Agent: ci-evals/<version>``) and sends none of the SDK's
``X-Stainless-*`` telemetry; a failed call's line carries the server's own message and request id;
an error object inside an HTTP 200 (OpenRouter) is the server's failure of that code, not "no
choices[0].message"; a redirect that stops the breaker says what to do about it.
"""

from __future__ import annotations

import asyncio
import json

import pytest

import ci_evals.llm.client as llm_client
from ci_evals import __version__
from ci_evals.llm import transport
from ci_evals.llm.answers import error_in_200
from ci_evals.llm.client import LLM
from ci_evals.llm.errors import LLMError
from ci_evals.llm.hints import REDIRECT_HINT
from ci_evals.llm.said import SERVER_TEXT, server_says
from tests.fakes.openai_server import FakeOpenAI
from tests.test_hardening3_engine import completion, raw_answer, results, run_cli, write_suite

KEY = "sk-identity-key-0123456789abcdef"
HELLO = [{"role": "user", "content": "hi"}]
RID = "req_abc123"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
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
        "OPENAI_ORG_ID",
        "OPENAI_PROJECT_ID",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("IDENTITY_KEY", KEY)
    monkeypatch.setattr(llm_client, "BACKOFF_BASE", 0.01)


def _calls(url: str, n: int = 1, **kw) -> list:
    """``n`` chat calls in a row: each one's content, or its LLMError's message."""

    async def go():
        llm = LLM(base_url=url, api_key_env="IDENTITY_KEY", timeout=10, **kw)
        out = []
        try:
            for _ in range(n):
                try:
                    out.append((await llm.chat(model="m", messages=HELLO)).content)
                except LLMError as exc:
                    out.append(exc.message)
        finally:
            await llm.aclose()
        return out, llm.endpoint.stopped

    return asyncio.run(go())


@pytest.mark.parametrize("way", ["aiohttp", "httpx"])
def test_the_server_receives_ci_evals_as_the_user_agent_and_no_stainless_header(monkeypatch, way):
    if way == "httpx":
        monkeypatch.setattr(transport, "USE_AIOHTTP", False)
    monkeypatch.setenv("OPENAI_PROJECT_ID", "proj-41")
    with FakeOpenAI() as server:
        server.script("fine")
        (content,), _ = _calls(server.url)
        [req] = server.requests
    assert content == "fine"
    headers = {k.lower(): v for k, v in req.headers.items()}
    assert headers["user-agent"] == f"ci-evals/{__version__}"
    assert [k for k in headers if k.startswith("x-stainless")] == []
    assert (headers["authorization"], headers["openai-project"]) == (f"Bearer {KEY}", "proj-41")


def test_a_whole_run_names_ci_evals_to_the_server(tmp_path):
    with FakeOpenAI() as server:
        write_suite(tmp_path, 2, server.url)
        code, _, err = run_cli(tmp_path)
        agents = {r.headers.get("user-agent") for r in server.requests}
        stainless = [
            k for r in server.requests for k in r.headers if k.lower().startswith("x-stainless")
        ]
    assert code in (0, 1), err
    assert (agents, stainless) == ({f"ci-evals/{__version__}"}, [])


def _erring(req: dict) -> bytes:
    """Sample 0: a 500 with a message and x-request-id; sample 1: OpenRouter's 200 with an error
    object (code 502); sample 2: a right answer."""
    i = int(req["messages"][-1]["content"].split()[2])
    if i == 0:
        body = json.dumps(
            {
                "error": {
                    "message": "The server had an error while processing your request.",
                    "type": "server_error",
                    "code": None,
                }
            }
        )
        return raw_answer(body, {"x-request-id": RID}, status="500 Internal Server Error")
    if i == 1:
        body = json.dumps(
            {
                "error": {
                    "message": "Provider returned error",
                    "code": 502,
                    "metadata": {"provider_name": "Upstream"},
                },
                "user_id": "u1",
            }
        )
        return raw_answer(body, {"x-request-id": "gen-or-777"})
    return raw_answer(completion(str(2 * i)))


def test_the_servers_message_and_request_id_reach_results_jsonl(tmp_path):
    with FakeOpenAI(responder=_erring) as server:
        write_suite(tmp_path, 3, server.url)
        spec = json.loads((tmp_path / "suite.yaml").read_text())
        spec["target"]["max_retries"] = 1
        (tmp_path / "suite.yaml").write_text(json.dumps(spec))
        code, _, err = run_cli(tmp_path)
        sent = server.count()
    by_id = {r["sample_id"]: r for r in results(tmp_path)}
    assert code == 1, err
    s0, s1 = by_id["s0"]["error"]["message"], by_id["s1"]["error"]["message"]
    assert s0.endswith(
        "/v1/chat/completions: HTTP 500: The server had an error while processing your request. "
        "(request req_abc123) (after 1 retries)"
    ), s0
    assert s1.endswith(
        "/v1/chat/completions: HTTP 200 with error 502: Provider returned error "
        "(request gen-or-777) (after 1 retries)"
    ), s1
    assert by_id["s2"]["error"] is None
    assert sent == 2 + 2 + 1  # both failures were transient: retried once each
    assert KEY not in (tmp_path / "out" / "results.jsonl").read_text()


def test_an_error_in_a_200_is_a_failure_of_its_code():
    path = "/chat/completions"
    throttle = error_in_200(path, {"error": {"message": "slow down", "code": 429}}, {})
    assert (throttle.status, throttle.retry, throttle.problem) == (
        429,
        True,
        "HTTP 200 with error 429: slow down",
    )
    auth = error_in_200(
        path, {"error": {"message": "No auth credentials found", "code": "401"}}, None
    )
    assert (auth.status, auth.retry, auth.kind) == (401, False, "http_401")
    odd = error_in_200(
        path, {"error": {"message": "upstream said no", "code": "weird"}}, {"request-id": "r-9"}
    )
    assert (odd.status, odd.retry, odd.problem) == (
        None,
        True,
        "HTTP 200 with an error (code weird): upstream said no (request r-9)",
    )
    assert (
        error_in_200(path, {"error": "flat text"}, {}).problem
        == "HTTP 200 with an error: flat text"
    )
    usable = {
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}}],
        "error": None,
    }
    assert error_in_200(path, usable, {}) is None
    assert (
        error_in_200(path, {**usable, "error": {"message": "partial"}}, {}) is None
    )  # the answer is there
    assert error_in_200("/embeddings", {"error": {"message": "x", "code": 503}}, {}).retry is True


def test_a_long_message_is_scrubbed_then_cut_and_the_request_id_survives():
    secret = "sk-" + "z" * 40
    said = server_says("bad key " + secret + " " + "x" * 5000, {"x-request-id": RID})
    assert secret not in said and said.endswith(f"(request {RID})")
    assert len(said) <= SERVER_TEXT + len(f" (request {RID})")
    assert (
        server_says(None, {"request-id": "req_anthropic_1"})
        == "no details (request req_anthropic_1)"
    )


def test_an_anthropic_error_names_its_request_id():
    pytest.importorskip("anthropic")
    from pytest_httpserver import HTTPServer
    from werkzeug import Response

    server = HTTPServer(host="127.0.0.1", port=0)
    server.start()
    try:
        body = {
            "type": "error",
            "error": {"type": "api_error", "message": "Internal server error"},
            "request_id": "req_011CAnthropic",
        }
        server.expect_request("/v1/messages", method="POST").respond_with_response(
            Response(
                json.dumps(body),
                status=500,
                headers={"request-id": "req_011CAnthropic"},
                content_type="application/json",
            )
        )
        (message,), _ = _calls(server.url_for("/").rstrip("/"), provider="anthropic", max_retries=0)
    finally:
        server.clear()
        server.stop()
    assert "HTTP 500: Internal server error (request req_011CAnthropic)" in message


def test_a_redirect_that_stops_the_breaker_says_to_point_base_url_at_the_final_address(capsys):
    moved = b"HTTP/1.1 302 Found\r\nLocation: https://elsewhere.example/v1/chat/completions\r\nContent-Length: 0\r\n\r\n"
    with FakeOpenAI(responder=lambda req: moved) as server:
        messages, stopped = _calls(server.url, n=4)
    assert all(
        "HTTP 302: the server redirects to https://elsewhere.example/v1/chat/completions" in m
        for m in messages
    )
    assert stopped.endswith(f"({REDIRECT_HINT})")
    assert "not sent: stopped calling" in messages[3] and REDIRECT_HINT in messages[3]
    assert REDIRECT_HINT in capsys.readouterr().err
