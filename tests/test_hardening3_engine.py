"""Issue 37, G1-G4: no answer from a server can hang, freeze or spin the run.

Each test runs the real ``ci-evals`` process (in a subprocess, under a timeout: without the fix it
would hang for ever) against the project's OpenAI-compatible fake over real HTTP, whose answers
carry the malformed number under test: a ``usage`` no count can be read from (G1), an announced
limit too slow for ``max_wait`` or a token count of 10^12 (G2), a zero or past wait (G3), a
learned reset longer than ``max_wait`` (G4).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ci_evals.llm.cost import MAX_CALL_TOKENS, tokens, usage_of
from ci_evals.llm.limits import Bucket, Limits
from ci_evals.llm.scheduler import WAIT_FLOOR, Endpoint, EndpointStopped, Ticket
from tests.fakes.openai_server import FakeOpenAI

KEY = "sk-hardening3-key-0123456789abcdef"


def raw_answer(body: str, headers: dict[str, str] | None = None, status: str = "200 OK") -> bytes:
    """A whole HTTP response (the fake sends bytes starting with ``HTTP/`` as they are)."""
    data = body.encode()
    head = [f"HTTP/1.1 {status}", "Content-Type: application/json", f"Content-Length: {len(data)}"]
    head += [f"{k}: {v}" for k, v in (headers or {}).items()]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + data


def completion(
    content: str, usage_json: str = '{"prompt_tokens": 3, "completion_tokens": 1}'
) -> str:
    message = json.dumps({"role": "assistant", "content": content})
    return (
        '{"id": "c", "object": "chat.completion", "created": 0, "model": "gpt-4o-mini", "choices": '
        f'[{{"index": 0, "message": {message}, "finish_reason": "stop"}}], "usage": {usage_json}}}'
    )


def answer_with(usage_json: str, headers: dict[str, str] | None = None):
    """A responder: every sample's right answer (the ground truth is in the prompt), with
    ``usage_json`` as its usage and ``headers`` added."""

    def respond(req: dict) -> bytes:
        text = req["messages"][-1]["content"]  # "what is i + i?"
        i = int(text.split()[2])
        return raw_answer(completion(str(2 * i), usage_json), headers)

    return respond


def write_suite(root: Path, n: int, base_url: str, extra: dict | None = None) -> Path:
    (root / "dataset.jsonl").write_text(
        "".join(
            json.dumps({"id": f"s{i}", "input": f"what is {i} + {i}?", "ground_truth": str(2 * i)})
            + "\n"
            for i in range(n)
        )
    )
    spec = {
        "name": "g",
        "dataset": "dataset.jsonl",
        "target": {"kind": "model", "model": "gpt-4o-mini", "base_url": base_url},
        "graders": {"has": {"kind": "tool", "function": "contains", "extractor": "last_assistant"}},
        **(extra or {}),
    }
    (root / "suite.yaml").write_text(json.dumps(spec))
    return root / "suite.yaml"


def run_cli(root: Path, *args: str, timeout: float = 60) -> tuple[int, float, str]:
    """``ci-evals run suite.yaml --output out --no-cache ARGS`` in its own process: (exit code,
    seconds, stderr). A run still going at ``timeout`` fails the test (it is killed first)."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CI_EVALS_", "GITHUB_"))
    }
    env["OPENAI_API_KEY"] = KEY
    t0 = time.monotonic()
    try:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "ci_evals",
                "run",
                str(root / "suite.yaml"),
                "--output",
                str(root / "out"),
                "--no-cache",
                *args,
            ],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            cwd=root,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"the run did not end within {timeout} s")
    return proc.returncode, time.monotonic() - t0, proc.stderr


def summary(root: Path) -> dict:
    return json.loads((root / "out" / "summary.json").read_text())


def results(root: Path) -> list[dict]:
    return [json.loads(line) for line in (root / "out" / "results.jsonl").read_text().splitlines()]


# --- G1: a malformed usage never leaks a slot ------------------------------------------------------


@pytest.mark.parametrize(
    "usage_json",
    [
        '"lots"',
        "[1, 2]",
        '{"prompt_tokens": "x", "completion_tokens": null}',
        '{"prompt_tokens": NaN}',
        '{"prompt_tokens": 1e999}',
        "7",
        '{"prompt_tokens": true, "completion_tokens": [3]}',
    ],
)
def test_a_malformed_usage_counts_no_tokens_and_every_sample_still_runs(tmp_path, usage_json):
    with FakeOpenAI(responder=answer_with(usage_json)) as server:
        write_suite(tmp_path, 8, server.url)
        code, elapsed, err = run_cli(tmp_path, "--max-concurrent", "2")
        sent = server.count()
    s = summary(tmp_path)
    assert (code, s["verdict"], s["errors"]["total"], sent) == (0, "passed", 0, 8), err
    recs = results(tmp_path)
    assert len(recs) == 8
    for rec in recs:
        assert rec["usage"] == {"prompt_tokens": 0, "completion_tokens": 0}


def test_token_counts_are_read_bounded_and_never_raise():
    assert [
        tokens(v)
        for v in (
            12,
            12.9,
            -3_000_000_000,
            10**301,
            float("nan"),
            float("inf"),
            True,
            "12",
            None,
            [1],
            {"a": 1},
        )
    ] == [12, 12, 0, MAX_CALL_TOKENS, 0, 0, 0, 0, 0, 0, 0]
    assert usage_of({"usage": {"prompt_tokens": 10**301, "completion_tokens": -5}}) == {
        "prompt_tokens": MAX_CALL_TOKENS,
        "completion_tokens": 0,
    }
    assert (
        usage_of({"usage": "x"})
        == usage_of([])
        == usage_of({})
        == {"prompt_tokens": 0, "completion_tokens": 0}
    )


def test_a_slot_goes_back_once_whatever_settles_the_ticket():
    asyncio.run(_test_a_slot_goes_back_once_whatever_settles_the_ticket())


async def _test_a_slot_goes_back_once_whatever_settles_the_ticket():
    ep = Endpoint("e", Limits(max_concurrent=1))
    ticket = await ep.acquire()
    ep.success(ticket)
    ep.abandon(ticket)  # the finally after a success gives nothing back twice
    ep.abandon(ticket)
    assert ep.in_flight == 0
    second = await ep.acquire()
    assert (ep.in_flight, second.settled) == (1, False)
    ep.abandon(second)
    assert ep.in_flight == 0


# --- G2: pacing has a bound ------------------------------------------------------------------------


@pytest.mark.parametrize("rpm", ["0.001", "0.05"])
def test_an_announced_request_limit_too_slow_for_max_wait_stops_the_run_with_the_reason(
    tmp_path, rpm
):
    headers = {"x-ratelimit-limit-requests": rpm, "x-ratelimit-remaining-requests": "0"}
    with FakeOpenAI(
        responder=answer_with('{"prompt_tokens": 3, "completion_tokens": 1}', headers)
    ) as server:
        write_suite(tmp_path, 6, server.url)
        code, elapsed, _ = run_cli(tmp_path, "--max-concurrent", "1", "--max-wait", "60")
        sent = server.count()
    s = summary(tmp_path)
    assert (code, s["verdict"], sent) == (1, "errored", 1)
    assert elapsed < 20
    every = 60 / (float(rpm) * 0.97)
    why = (
        f"rate limited: one request every {every:.3g} s at {float(rpm):g} requests a minute (announced by the "
        "server in x-ratelimit-limit-requests), more than max_wait 60 s allows"
    )
    (ep,) = s["endpoints"]
    assert ep["stopped"] == why
    assert s["errors"]["total"] == 5  # the first call was answered; the other five were not sent
    assert all(
        r["error"]["message"].endswith(f"not sent: {why}")
        for r in results(tmp_path)
        if r.get("error")
    )


def test_a_token_count_of_a_trillion_holds_the_next_call_no_longer_than_max_wait(tmp_path):
    with FakeOpenAI(
        responder=answer_with('{"prompt_tokens": 1000000000000, "completion_tokens": 5}')
    ) as server:
        write_suite(tmp_path, 3, server.url)
        code, elapsed, err = run_cli(
            tmp_path, "--max-concurrent", "1", "--tpm", "600000", "--max-wait", "2"
        )
        sent = server.count()
    s = summary(tmp_path)
    # each call's reported tokens put the bucket at most max_wait (2 s) into debt: two waits of 2 s
    assert (code, s["errors"]["total"], sent) == (0, 0, 3), err
    assert 3.5 < elapsed < 12


async def _a_set_rate_too_slow_for_max_wait_sends_nothing_and_says_why():
    ep = Endpoint("e", Limits(rpm=0.01))  # what pool.configure refuses (below), were it ever given
    with pytest.raises(
        EndpointStopped,
        match=r"one request every 6.19e\+03 s at 0.01 requests a minute "
        r"\(your setting\), more than max_wait 600 s allows",
    ):
        await ep.acquire()


def test_a_set_rate_too_slow_for_max_wait_sends_nothing_and_says_why():
    asyncio.run(_a_set_rate_too_slow_for_max_wait_sends_nothing_and_says_why())


async def _a_call_too_large_for_the_token_rate_is_not_sent_and_says_why():
    ep = Endpoint("e", Limits(tpm=60, max_wait=2))
    why = (
        r"^rate limited: a call of about 1000 tokens takes 1.03e\+03 s at 60 tokens a minute "
        r"\(your setting\), more than max_wait 2 s allows$"
    )
    with pytest.raises(EndpointStopped, match=why):  # not the ThrottledOut of a throttled call
        await ep.acquire(1000.0)
    assert (ep.in_flight, bool(ep.stopped)) == (0, True)
    with pytest.raises(EndpointStopped, match=why):  # nor is any later call sent
        await ep.acquire()


def test_a_call_too_large_for_the_token_rate_is_not_sent_and_says_why():
    asyncio.run(_a_call_too_large_for_the_token_rate_is_not_sent_and_says_why())


def test_a_run_whose_first_call_passes_the_token_rate_reports_each_sample_as_not_sent(tmp_path):
    with FakeOpenAI(
        responder=answer_with('{"prompt_tokens": 3, "completion_tokens": 1}')
    ) as server:
        write_suite(tmp_path, 3, server.url)
        code, _, err = run_cli(tmp_path, "--max-concurrent", "1", "--tpm", "60", "--max-wait", "2")
        sent = server.count()
    messages = [r["error"]["message"] for r in results(tmp_path)]
    assert (code, sent, len(messages)) == (1, 0, 3), err
    # the first call's error was "ThrottledOut: rate limited: ..." (an exception LLM let escape)
    assert all(
        m.startswith("model call failed on turn 1: http://")
        and ": not sent: rate limited: a call of about 12 tokens takes 12.1 s at 60 tokens a "
        "minute (your setting), more than max_wait 2 s allows"
        in m
        for m in messages
    ), messages


def test_a_token_charge_takes_the_bucket_at_most_max_debt_into_debt():
    bucket = Bucket(60_000, max_debt_s=5)  # 970 tokens a second
    bucket.adjust(10**12)
    assert bucket.level == pytest.approx(-970 * 5, rel=1e-3)
    bucket.adjust(10**12)  # a second charge goes no deeper
    assert bucket.level == pytest.approx(-970 * 5, rel=1e-3)
    assert bucket.reserve(1, bucket.at) == pytest.approx(5, rel=1e-3)


# --- G3: a zero wait is never a busy loop ---------------------------------------------------------


@pytest.mark.parametrize(
    "header",
    [
        {"Retry-After": "0"},
        {"retry-after-ms": "0"},
        {"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"},
    ],
)
def test_a_zero_or_past_retry_after_never_turns_429s_into_a_request_storm(tmp_path, header):
    error = '{"error": {"message": "slow down", "type": "rate_limit_error"}}'
    with FakeOpenAI(
        responder=lambda req: raw_answer(error, header, "429 Too Many Requests")
    ) as server:
        write_suite(tmp_path, 4, server.url)
        code, elapsed, _ = run_cli(tmp_path, "--max-concurrent", "4", "--max-wait", "3")
        sent = server.count()
    s = summary(tmp_path)
    assert (code, s["verdict"], s["errors"]["total"]) == (1, "errored", 4)
    # pauses of 0.1, 0.2, 0.4, 0.8 s (doubling once per round trip); the next, 1.6 s, would pass max_wait 3 s:
    # a handful of requests in 1.5 s of waiting, where the zero wait sent thousands until max_wait
    assert 1.5 < elapsed < 15
    assert sent <= 4 + 4 * 6, sent


def test_the_pause_after_a_throttle_has_a_floor_that_doubles_once_per_round_trip():
    asyncio.run(_test_the_pause_after_a_throttle_has_a_floor_that_doubles_once_per_round_trip())


async def _test_the_pause_after_a_throttle_has_a_floor_that_doubles_once_per_round_trip():
    ep = Endpoint("e", Limits(max_concurrent=4))
    tickets = [await ep.acquire() for _ in range(3)]
    assert [ep.throttled(t, 0.0) for t in tickets] == [WAIT_FLOOR, 2 * WAIT_FLOOR, 2 * WAIT_FLOOR]
    assert (
        ep.throttled(await ep.acquire(), 0.0) == 2 * WAIT_FLOOR
    )  # sent after the cut: the next round trip
    assert ep.throttled(await ep.acquire(), 0.05) == 4 * WAIT_FLOOR
    ep.success(await ep.acquire())
    assert ep.throttled(await ep.acquire(), 0.0) == WAIT_FLOOR  # a success resets it
    assert ep.throttled(await ep.acquire(), 2.5) == 2.5  # a longer asked wait is kept as asked


# --- G4: a reset learned from a success is checked against max_wait --------------------------------


def test_a_learned_reset_longer_than_max_wait_stops_at_once_instead_of_pausing_after_every_call(
    tmp_path,
):
    headers = {
        "x-ratelimit-limit-tokens": "1000000",
        "x-ratelimit-remaining-requests": "0",
        "x-ratelimit-reset-requests": "30s",
    }
    with FakeOpenAI(
        responder=answer_with('{"prompt_tokens": 3, "completion_tokens": 1}', headers)
    ) as server:
        write_suite(tmp_path, 4, server.url)
        code, elapsed, _ = run_cli(tmp_path, "--max-concurrent", "1", "--max-wait", "8")
        sent = server.count()
    s = summary(tmp_path)
    assert (code, sent, s["errors"]["total"]) == (1, 1, 3)
    assert elapsed < 10
    assert s["endpoints"][0]["stopped"] == (
        "rate limited: the server's request limit (remaining 0) resets in 30 s, "
        "more than max_wait 8 s allows"
    )


def test_a_learned_reset_within_max_wait_still_pauses(tmp_path):
    headers = {
        "x-ratelimit-limit-tokens": "1000000",
        "x-ratelimit-remaining-requests": "0",
        "x-ratelimit-reset-requests": "700ms",
    }
    with FakeOpenAI(
        responder=answer_with('{"prompt_tokens": 3, "completion_tokens": 1}', headers)
    ) as server:
        write_suite(tmp_path, 3, server.url)
        code, elapsed, err = run_cli(tmp_path, "--max-concurrent", "1", "--max-wait", "8")
    assert (code, summary(tmp_path)["errors"]["total"]) == (0, 0), err
    assert elapsed > 1.4  # two pauses of 0.7 s


def test_a_call_waiting_when_the_endpoint_stops_is_told_why():
    asyncio.run(_test_a_call_waiting_when_the_endpoint_stops_is_told_why())


async def _test_a_call_waiting_when_the_endpoint_stops_is_told_why():
    ep = Endpoint("e", Limits(max_concurrent=1, max_wait=5))
    first = await ep.acquire()
    ep.success(
        first,
        {
            "x-ratelimit-limit-tokens": "1000000",
            "x-ratelimit-remaining-requests": "0",
            "x-ratelimit-reset-requests": "20s",
        },
    )
    with pytest.raises(EndpointStopped, match="resets in 20 s, more than max_wait 5 s allows"):
        await ep.acquire()
    assert ep.in_flight == 0
    assert isinstance(first, Ticket) and first.settled


# --- bad settings: one line, exit 2 ----------------------------------------------------------------


@pytest.mark.parametrize(
    "args, extra, line",
    [
        (
            ("--rpm", "1e-300"),
            {},
            "--rpm or rate_limits: 1e-300 requests a minute is one request every 6.19e+301 s, "
            "more than max_wait 600 s allows",
        ),
        (
            ("--rpm", "openai=0.5", "--max-wait", "60"),
            {},
            "--rpm or rate_limits for openai: 0.5 requests a minute is "
            "one request every 124 s, more than max_wait 60 s allows",
        ),
        (
            (),
            {"rate_limits": {"*": {"rpm": 0.01}}},
            "rate_limits: 0.01 requests a minute is one request every "
            "6.19e+03 s, more than max_wait 600 s allows",
        ),
        (
            ("--max-wait", "1e-9"),
            {},
            "argument --max-wait: expected a number of seconds of at least 1, got '1e-9'",
        ),
        ((), {"max_wait": 0.5}, "max_wait"),
    ],
)
def test_a_rate_or_max_wait_no_run_could_honour_is_one_line_and_exit_2(tmp_path, args, extra, line):
    write_suite(tmp_path, 2, "http://127.0.0.1:9/v1", extra=extra)
    code, _, err = run_cli(tmp_path, *args)
    assert code == 2, err
    (only,) = err.strip().splitlines()
    assert line in only
    assert not (tmp_path / "out" / "results.jsonl").exists()


# --- issue 39: one server is one scheduler ----------------------------------------------------------


def test_base_urls_that_differ_by_a_trailing_slash_share_one_scheduler(tmp_path):
    with FakeOpenAI() as server:  # its default answers: a reply for the target, a score for a judge
        write_suite(
            tmp_path,
            4,
            server.url,
            extra={
                "graders": {
                    "judge": {
                        "kind": "rubric",
                        "model": "gpt-4o-mini",
                        "base_url": server.url + "/",
                        "prompt": "Score 1 if right.\nQ: {input}\nA: {submission}",
                    }
                }
            },
        )
        code, _, err = run_cli(tmp_path)
        sent = server.count()
    s = summary(tmp_path)
    # the target's http://h/v1 and the judge's http://h/v1/: one endpoint, one AIMD limit, all 8 calls
    (ep,) = s["endpoints"]
    assert (s["errors"]["total"], sent, ep["calls"], ep["endpoint"]) == (0, 8, 8, server.url), err


def test_an_endpoints_identity_is_normalised_once():
    from ci_evals.llm.pool import endpoint_identity

    assert (
        endpoint_identity("HTTP://Example.COM:80/v1/")
        == endpoint_identity("http://example.com/v1")
        == "http://example.com/v1"
    )
    assert endpoint_identity("https://h:443/v1//") == "https://h/v1"
    assert endpoint_identity("https://h:8443/v1") == "https://h:8443/v1"
    assert endpoint_identity("http://[::1]:8000/v1/") == "http://[::1]:8000/v1"
    assert endpoint_identity("http://u:p@h/v1") != endpoint_identity("http://h/v1")
    assert endpoint_identity(None) is None
