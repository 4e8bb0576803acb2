"""The request engine over real HTTP: rate limits, throttling, the breaker, real causes, the summary.

Every test runs the CLI against the project's OpenAI-compatible fake (tests/fakes/openai_server.py)
enforcing limits as OpenAI documents them (429 with ``retry-after-ms`` and ``x-ratelimit-*``), or
against an address where nothing answers.
"""

from __future__ import annotations

import json
import socket
import time

import pytest

from ci_evals.cli.app import main
from tests.fakes.openai_server import FakeOpenAI

KEY = "sk-engine-test-key-1234567890"


def llm_suite(sd, n: int, *, base_url: str, extra: dict | None = None, judge: bool = True) -> None:
    """``n`` samples, a model target and (optionally) a rubric judge, both on ``base_url``."""
    sd.write(
        "dataset.jsonl",
        [
            {"id": f"s{i}", "input": f"what is {i} + {i}?", "ground_truth": str(2 * i)}
            for i in range(n)
        ],
    )
    graders = (
        {
            "quality": {
                "kind": "rubric",
                "model": "gpt-4o-mini",
                "base_url": base_url,
                "prompt": "Score 1 if right.\nQ: {input}\nA: {submission}",
            }
        }
        if judge
        else {"has": {"kind": "tool", "function": "contains", "extractor": "last_assistant"}}
    )
    spec = {
        "name": "engine",
        "dataset": "dataset.jsonl",
        "target": {"kind": "model", "model": "gpt-4o-mini", "base_url": base_url},
        "graders": graders,
        **(extra or {}),
    }
    sd.suite(spec)


@pytest.fixture
def key_env(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def timed_run(
    sd, server: FakeOpenAI, n: int, *args: str, judge: bool = True
) -> tuple[int, float, int]:
    """An ``n``-sample suite against ``server``, run with ``args``: (exit code, seconds taken,
    requests the server saw)."""
    llm_suite(sd, n, base_url=server.url, judge=judge)
    t0 = time.monotonic()
    code = sd.run(*args)
    return code, time.monotonic() - t0, server.count()


def endpoint(summary: dict) -> dict:
    (ep,) = summary["endpoints"]
    return ep


# --- throttling: a 429 is a wait -----------------------------------------------------------------


def test_under_a_request_limit_no_sample_errors_and_few_calls_are_rejected(sd, key_env):
    with FakeOpenAI(latency=0.05) as server:
        server.rate_limit(rpm=1200)  # 20 a second, a bucket of 20
        llm_suite(sd, 40, base_url=server.url)
        t0 = time.monotonic()
        code = sd.run("--max-concurrent", "20")
        elapsed = time.monotonic() - t0
        stats = server.rate_stats
    summary = sd.summary()
    assert (code, summary["verdict"], summary["errors"]["total"]) == (0, "passed", 0)
    assert stats["accepted"] == 80
    assert (
        stats["rejected"] <= 4
    )  # the first burst before the limit is known; never a quarter of calls
    ep = endpoint(summary)
    assert (ep["calls"], ep["rejected"], ep["rpm"], ep["rpm_from"], ep["max_concurrent"]) == (
        80 + stats["rejected"],
        stats["rejected"],
        1200.0,
        "server",
        20,
    )
    assert 1 <= ep["concurrency"] <= 20
    # pacing holds calls back no longer than the limit needs: 60 calls past the first bucket at
    # 97 % of 20 a second is 3.1 s (less when the machine is slower than the limit)
    assert 0 < ep["waited_s"] <= 3.5
    assert elapsed < 30


def test_a_known_limit_paces_from_the_first_call_without_a_rejection(sd, key_env):
    with FakeOpenAI(latency=0.02) as server:
        server.rate_limit(rpm=1200)
        llm_suite(sd, 30, base_url=server.url, extra={"rate_limits": {"openai": {"rpm": 1200}}})
        code = sd.run("--max-concurrent", "30")
        stats = server.rate_stats
    ep = endpoint(sd.summary())
    assert (code, stats["accepted"], stats["rejected"]) == (0, 60, 0)
    assert (ep["rpm"], ep["rpm_from"], ep["rejected"]) == (1200.0, "settings", 0)


def test_cli_rpm_wins_over_the_suite_and_names_its_source(sd, key_env):
    with FakeOpenAI() as server:
        llm_suite(
            sd, 3, base_url=server.url, judge=False, extra={"rate_limits": {"*": {"rpm": 10}}}
        )
        assert sd.run("--rpm", f"{server.url}=6000", "--tpm", "openai=90000") == 0
    ep = endpoint(sd.summary())
    assert (ep["rpm"], ep["rpm_from"], ep["tpm"], ep["tpm_from"]) == (
        6000.0,
        "settings",
        90000.0,
        "settings",
    )


def test_429s_never_use_the_retry_budget_and_show_in_the_summary(sd, key_env, capsys):
    with FakeOpenAI() as server:
        server.fault("429", first=6, retry_after="0.1")
        llm_suite(
            sd,
            2,
            base_url=server.url,
            judge=False,
            extra={
                "target": {
                    "kind": "model",
                    "model": "gpt-4o-mini",
                    "base_url": server.url,
                    "max_retries": 0,
                }
            },
        )
        code = main(
            ["run", str(sd.root / "suite.yaml"), "--output", str(sd.root / "out"), "--no-cache"]
        )
    summary = sd.summary()
    assert (code, summary["errors"]["total"]) == (0, 0)
    ep = endpoint(summary)
    assert (ep["rejected"], ep["calls"]) == (6, 8)
    out = capsys.readouterr().out
    assert f"throttled: {server.url}: 6 of 8 calls rejected (429/503/529)" in out


def test_an_absurd_retry_after_stops_the_endpoint_instead_of_freezing_the_run(sd, key_env):
    with FakeOpenAI() as server:
        server.fault("429", retry_after="86400")
        code, elapsed, sent = timed_run(sd, server, 20, "--max-concurrent", "2", judge=False)
    summary = sd.summary()
    assert (code, summary["verdict"], summary["errors"]["total"]) == (1, "errored", 20)
    assert sent <= 2 and elapsed < 5
    why = "rate limited: the server asked to wait 86400 s, more than max_wait 600 s allows"
    assert endpoint(summary)["stopped"] == why
    messages = {r["error"]["message"] for r in sd.results()}
    assert any(m.endswith(why) and "HTTP 429" in m for m in messages)
    assert (
        f"model call failed on turn 1: {server.url}/chat/completions: not sent: {why}" in messages
    )


def test_max_wait_bounds_a_call_that_stays_throttled_and_says_so(sd, key_env):
    with FakeOpenAI() as server:
        server.fault("429", retry_after="0.2")
        code, elapsed, _ = timed_run(sd, server, 1, "--max-wait", "1", judge=False)
    (rec,) = sd.results()
    # it gives up as soon as the next 0.2 s wait would pass max_wait: after 4 of them, 0.8 s
    assert code == 1 and 0.8 < elapsed < 4
    assert rec["error"]["message"].startswith(
        f"model call failed on turn 1: {server.url}/chat/completions: HTTP 429:"
    )
    assert rec["error"]["message"].endswith(
        "rate limited: still throttled after 1 s (max_wait 1 s)"
    )


def test_a_transient_burst_of_503s_does_not_trip_the_breaker(sd, key_env):
    with FakeOpenAI() as server:
        server.fault("503", first=5, retry_after="0.05")
        llm_suite(sd, 10, base_url=server.url)
        code = sd.run("--max-concurrent", "5")
    summary = sd.summary()
    assert (code, summary["errors"]["total"]) == (0, 0)
    ep = endpoint(summary)
    assert (ep["rejected"], "stopped" in ep) == (5, False)


# --- the breaker: systematic failures stop the run within seconds ---------------------------------


def run_breaker(sd, base_url: str, n: int = 40) -> tuple[int, dict, float, str]:
    llm_suite(sd, n, base_url=base_url, judge=False)
    t0 = time.monotonic()
    code = sd.run("--max-concurrent", "4")
    return code, sd.summary(), time.monotonic() - t0, base_url


def assert_stopped(
    sd, code, summary, elapsed, cause: str, hint: str, url: str, n: int = 40, sent: int = 6
) -> None:
    line = f"stopped calling {url} after its first calls all failed: {cause} ({hint})"
    assert (code, summary["verdict"], summary["errors"]["total"]) == (1, "errored", n)
    assert summary["verdict_reason"].startswith(line + "; ")
    assert endpoint(summary)["stopped"] == line
    assert elapsed < 10
    messages = [r["error"]["message"] for r in sd.results()]
    not_sent = [m for m in messages if ": not sent: " in m]
    assert len(not_sent) >= n - sent  # at most the first wave (4 in flight) and 2 more were sent
    assert all(m.endswith(line) for m in not_sent)
    assert all(cause in m for m in messages)
    assert KEY not in json.dumps(summary) + "".join(messages)


def test_breaker_dns_failure_names_the_host(sd, key_env, capsys):
    url = "http://no-such-host.invalid/v1"
    code, summary, elapsed, _ = run_breaker(sd, url)
    line = endpoint(summary)["stopped"]
    assert line.startswith(
        f"stopped calling {url} after its first calls all failed: "
        "could not resolve host 'no-such-host.invalid' (DNS: "
    )
    assert line.endswith(" (check the host name in base_url (or OPENAI_BASE_URL))")
    assert_stopped(
        sd,
        code,
        summary,
        elapsed,
        line.split("failed: ", 1)[1].rsplit(" (check", 1)[0],
        "check the host name in base_url (or OPENAI_BASE_URL)",
        url,
    )
    err = capsys.readouterr().err
    assert err.count("error: stopped calling") == 1


def test_breaker_connection_refused_names_host_and_port(sd, key_env):
    port = closed_port()
    url = f"http://127.0.0.1:{port}/v1"
    code, summary, elapsed, _ = run_breaker(sd, url)
    assert_stopped(
        sd,
        code,
        summary,
        elapsed,
        f"nothing listens on 127.0.0.1:{port} (connection refused)",
        "is the server running? check the host and port in base_url (or OPENAI_BASE_URL)",
        url,
    )


@pytest.mark.parametrize(
    "status,message,hint",
    [
        ("401", "Incorrect API key provided", "check the API key in OPENAI_API_KEY"),
        (
            "403",
            "Project does not have access to model",
            "check that the key in OPENAI_API_KEY may use this model and endpoint",
        ),
        (
            "404",
            "The model `gpt-x` does not exist",
            "check the model name and that base_url ends where the API starts (…/v1)",
        ),
    ],
)
def test_breaker_auth_and_model_errors(sd, key_env, status, message, hint):
    with FakeOpenAI() as server:
        server.fault(status, message=message)
        code, summary, elapsed, url = run_breaker(sd, server.url)
        sent = server.count()
    assert sent <= 4 + 3 - 1  # the first wave, and calls started before the third failure came back
    assert_stopped(sd, code, summary, elapsed, f"HTTP {status}: {message}", hint, url)


def test_breaker_needs_eight_400s_for_a_bad_request(sd, key_env):
    with FakeOpenAI() as server:
        server.fault("400", message="Unsupported parameter")
        code, summary, elapsed, url = run_breaker(sd, server.url)
        sent = server.count()
    assert 8 <= sent <= 4 + 8 - 1
    assert_stopped(
        sd,
        code,
        summary,
        elapsed,
        "HTTP 400: Unsupported parameter",
        "the server rejects every request: check the model and its parameters",
        url,
        sent=4 + 8 - 1,
    )


QUOTA = json.dumps(
    {
        "error": {
            "message": "You exceeded your current quota, please check your plan and billing "
            "details.",
            "type": "insufficient_quota",
            "param": None,
            "code": "insufficient_quota",
        }
    }
).encode()


def test_an_exhausted_quota_429_is_not_a_wait_but_a_breaker_cause(sd, key_env):
    raw = (
        f"HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nretry-after: 20\r\n"
        f"Content-Length: {len(QUOTA)}\r\n\r\n"
    ).encode() + QUOTA
    with FakeOpenAI(responder=lambda req: raw) as server:
        code, summary, elapsed, url = run_breaker(sd, server.url)
    assert elapsed < 5  # the retry-after of 20 s is not waited for
    assert_stopped(
        sd,
        code,
        summary,
        elapsed,
        "HTTP 429: You exceeded your current quota, please check your plan and billing details.",
        "the account's quota is used up: check its plan and billing",
        url,
    )


def test_the_breaker_never_trips_once_the_endpoint_answered(sd, key_env):
    from tests.fakes.openai_server import Fault

    seen = {"n": 0}

    def responder(req):
        seen["n"] += 1
        return "ok" if seen["n"] == 1 else Fault("401", message="key revoked")

    with FakeOpenAI(responder=responder) as server:
        llm_suite(sd, 12, base_url=server.url, judge=False)
        code = sd.run("--max-concurrent", "1")
        sent = server.count()
    summary = sd.summary()
    assert (code, sent, summary["errors"]["total"]) == (1, 12, 11)
    assert "stopped" not in endpoint(summary)
    assert {r["error"]["message"] for r in sd.results() if r["error"]} == {
        f"model call failed on turn 1: {server.url}/chat/completions: HTTP 401: key revoked"
    }


def test_an_anthropic_judge_under_its_limit_reads_anthropic_headers_and_loses_nothing(
    sd, monkeypatch
):
    from tests.fakes.vendor_servers import FakeAnthropic

    reply = json.dumps({"score": 0.75, "rationale": "fine"})
    with FakeAnthropic(responder=lambda view: reply) as server:
        server.rate_limit(rpm=1200)  # 20 a second
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-engine-test-0123456789")
        sd.write(
            "dataset.jsonl", [{"id": f"s{i}", "input": "q", "ground_truth": "a"} for i in range(40)]
        )
        sd.write("outputs.jsonl", [{"id": f"s{i}", "output": "a"} for i in range(40)])
        sd.suite(
            {
                "name": "ant",
                "dataset": "dataset.jsonl",
                "target": {"kind": "replay", "outputs": "outputs.jsonl"},
                "graders": {
                    "q": {
                        "kind": "model_judge",
                        "provider": "anthropic",
                        "model": "claude-haiku-4-5",
                        "base_url": server.url,
                        "prompt": "ok?",
                    }
                },
            }
        )
        code = sd.run("--max-concurrent", "10")
        stats = server.rate_stats
    summary = sd.summary()
    ep = endpoint(summary)
    assert (code, summary["errors"]["total"], stats["accepted"]) == (0, 0, 40)
    assert stats["rejected"] <= 4  # paced from the first answer's anthropic-ratelimit-* headers
    assert (ep["provider"], ep["rpm"], ep["rpm_from"], ep["rejected"]) == (
        "anthropic",
        1200.0,
        "server",
        stats["rejected"],
    )


@pytest.mark.parametrize("announced", ["length", "unannounced", "gzip"])
def test_an_llm_body_past_16_mib_is_an_error_read_no_further(sd, key_env, announced):
    import gzip

    from ci_evals.llm.transport import MAX_RESPONSE_BYTES

    body = (
        b'{"choices": [{"message": {"role": "assistant", "content": "'
        + b"x" * (MAX_RESPONSE_BYTES + 10)
        + b'"}}]}'
    )
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
    if announced == "gzip":  # a small announced length that inflates past the cap
        body = gzip.compress(body)
        assert len(body) < 1 << 20
        head += b"Content-Encoding: gzip\r\n"
    raw = (
        head
        + (
            b"Content-Length: %d\r\n\r\n" % len(body)
            if announced != "unannounced"
            else b"Connection: close\r\n\r\n"
        )
        + body
    )
    with FakeOpenAI(responder=lambda req: raw) as server:
        llm_suite(sd, 1, base_url=server.url, judge=False)
        assert sd.run() == 1
        sent = server.count()
    (rec,) = sd.results()
    assert rec["error"]["message"].startswith(
        f"model call failed on turn 1: {server.url}/chat/completions: the response body is larger than 16 MiB"
    )
    assert sent == 1  # not retried: the same answer would come again
