"""The pieces of the request engine on their own: Retry-After in every form, backoff, the cause of
a failed connection, the breaker, the endpoint scheduler's AIMD, pause and pacing."""

from __future__ import annotations

import asyncio
import email.utils
import socket
import ssl
import time

import httpx
import pytest

from ci_evals._util.breaker import Breaker
from ci_evals._util.netcause import cause_of, host_port
from ci_evals._util.retry import Backoff, retry_after
from ci_evals.llm.limits import Bucket, Limits, _duration, announced
from ci_evals.llm.scheduler import Endpoint, EndpointStopped, ThrottledOut

NOW = 1_700_000_000.0


@pytest.mark.parametrize(
    "headers,seconds",
    [
        ({"retry-after-ms": "250"}, 0.25),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after": "2"}, 2.0),
        ({"retry-after": "1.5"}, 1.5),
        ({"retry-after": email.utils.formatdate(NOW + 30, usegmt=True)}, 30.0),
        ({"retry-after": email.utils.formatdate(NOW - 30, usegmt=True)}, 0.0),
        ({"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(NOW) + 42)}, 42.0),
        ({"x-ratelimit-remaining": "3", "x-ratelimit-reset": str(int(NOW) + 42)}, None),
        ({"retry-after": "-5"}, None),
        ({"retry-after": "nan"}, None),
        ({"retry-after": "inf"}, None),
        ({"retry-after": "soon"}, None),
        ({"retry-after-ms": "1e400"}, None),
        ({}, None),
    ],
)
def test_retry_after_reads_every_form_and_never_raises(headers, seconds):
    assert retry_after(headers, now=NOW) == seconds


def test_retry_after_of_no_headers_is_none():
    assert retry_after(None) is None


def test_backoff_grows_with_full_jitter_honours_the_server_and_stops():
    b = Backoff(base=1.0, cap=3.0, max_retries=3)
    waits = [b.next_wait() for _ in range(3)]
    assert [bound / 2 <= w <= bound for w, bound in zip(waits, [1.0, 2.0, 3.0], strict=True)] == [
        True
    ] * 3
    assert (b.next_wait(), b.retries) == (None, 3)
    asked = Backoff(base=0.01, max_retries=5, max_retry_after=60)
    assert asked.next_wait(7.5) == 7.5
    assert (asked.next_wait(61), asked.retries) == (None, 1)  # longer than allowed: no early retry


def test_a_clamped_backoff_retries_after_max_retry_after_when_the_server_asks_longer():
    b = Backoff(base=0.01, max_retries=2, max_retry_after=60, clamp_retry_after=True)
    assert (b.next_wait(600), b.retries) == (60, 1)  # the attempt the caller promised, a minute on
    assert b.next_wait(7.5) == 7.5
    assert b.next_wait(1.0) is None  # still bounded by max_retries


def test_backoff_never_waits_past_its_deadline():
    b = Backoff(base=0.01, max_retries=9, deadline=time.monotonic() + 0.5)
    assert b.next_wait(0.1) == 0.1
    assert b.next_wait(2.0) is None


def _raise_chain(*excs: BaseException) -> BaseException:
    outer = None
    for e in reversed(excs):
        e.__cause__ = outer
        outer = e
    return outer


@pytest.mark.parametrize(
    "chain,kind,message,retry",
    [
        (
            [
                RuntimeError("Connection error."),
                socket.gaierror(socket.EAI_NONAME, "Name or service not known"),
            ],
            "dns",
            "could not resolve host 'api.example.test' (DNS: Name or service not known)",
            False,
        ),
        (
            [
                RuntimeError("x"),
                socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution"),
            ],
            "dns_again",
            "could not resolve host 'api.example.test' right now (DNS: Temporary failure in name resolution)",
            True,
        ),
        (
            [RuntimeError("x"), ConnectionRefusedError(111, "Connect call failed")],
            "refused",
            "nothing listens on api.example.test:443 (connection refused)",
            True,
        ),
        (
            [RuntimeError("x"), ssl.SSLCertVerificationError(1, "certificate verify failed")],
            "tls",
            "TLS failed with api.example.test:443: certificate verify failed",
            False,
        ),
        ([TimeoutError()], "timeout", "timed out after 30 s", True),
        (
            [RuntimeError("x"), ConnectionResetError(104, "reset")],
            "dropped",
            "the connection to api.example.test:443 dropped (ConnectionResetError)",
            True,
        ),
        (
            [RuntimeError("x"), OSError("weird")],
            "connection",
            "connection to api.example.test:443 failed (OSError)",
            True,
        ),
    ],
)
def test_cause_of_names_what_the_operating_system_said(chain, kind, message, retry):
    cause = cause_of(_raise_chain(*chain), "https://user:pw@api.example.test/v1", 30)
    assert (cause.kind, cause.message, cause.retry) == (kind, message, retry)
    assert "pw" not in cause.message


@pytest.mark.parametrize(
    "inner",
    [  # a plain-HTTP server hanging up on a TLS handshake, as each OpenSSL words it
        ssl.SSLZeroReturnError(
            6, "TLS/SSL connection has been closed (EOF) (_ssl.c:992)"
        ),  # Debian 12's Python
        ssl.SSLEOFError(
            8,
            "[SSL: UNEXPECTED_EOF_WHILE_READING] EOF occurred in violation of protocol (_ssl.c:1006)",
        ),
    ],
)
def test_a_hang_up_in_the_tls_handshake_asks_about_the_scheme(inner):
    connect = httpx.ConnectError("handshake")
    cause = cause_of(
        _raise_chain(RuntimeError("Connection error."), connect, inner),
        "https://api.example.test/v1",
        30,
    )
    assert (cause.kind, cause.message, cause.retry) == (
        "tls",
        f"TLS failed with api.example.test:443: {inner.args[1]} (is the base_url scheme right (https vs http)?)",
        True,
    )


def test_host_port_defaults_and_hides_credentials():
    assert (
        host_port("http://a.test/v1"),
        host_port("https://u:p@b.test:8443/x"),
        host_port(None),
    ) == ("a.test:80", "b.test:8443", "?:80")


def test_breaker_opens_on_a_run_of_one_cause_and_never_after_a_success():
    b = Breaker()
    assert [b.failure("dns", "dns!"), b.failure("refused", "r"), b.failure("refused", "r")] == [
        False
    ] * 3
    assert (b.failure("refused", "stop: refused"), b.stopped) == (True, "stop: refused")
    c = Breaker()
    c.success()
    assert [c.failure("http_401", "x") for _ in range(10)] == [False] * 10 and c.stopped is None
    d = Breaker()
    assert [d.failure("http_400", "bad") for _ in range(8)] == [False] * 7 + [True]
    e = Breaker()
    assert [e.failure(None, "transient") for _ in range(20)] == [False] * 20


@pytest.mark.parametrize(
    "text,seconds",
    [
        ("120ms", 0.12),
        ("1s", 1.0),
        ("6m0s", 360.0),
        ("1h2m3.5s", 3723.5),
        ("", None),
        ("5x", None),
        ("12", None),
    ],
)
def test_openai_reset_durations(text, seconds):
    assert _duration(text) == (pytest.approx(seconds) if seconds is not None else None)


def test_announced_limits_from_openai_and_anthropic_headers():
    o = announced(
        {
            "x-ratelimit-limit-requests": "500",
            "x-ratelimit-limit-tokens": "30000",
            "x-ratelimit-remaining-requests": "499",
            "x-ratelimit-reset-requests": "120ms",
        }
    )
    assert (o.rpm, o.tpm, o.remaining_requests, o.reset_requests) == (
        500,
        30000,
        499,
        pytest.approx(0.12),
    )
    a = announced(
        {
            "anthropic-ratelimit-requests-limit": "50",
            "anthropic-ratelimit-input-tokens-limit": "20000",
            "anthropic-ratelimit-requests-remaining": "0",
            "anthropic-ratelimit-requests-reset": "2099-01-01T00:00:00Z",
        }
    )
    assert (a.rpm, a.tpm, a.remaining_requests) == (50, 20000, 0) and a.reset_requests > 1e9
    assert announced({"content-type": "application/json"}) is None


def test_bucket_lets_a_burst_through_then_paces_in_order():
    b = Bucket(600, burst_s=0.5)  # 9.7 a second at 97 %, 4.85 in the bucket
    now = b.at
    waits = [b.reserve(1, now) for _ in range(7)]
    assert waits[:4] == [0.0] * 4
    assert waits[4:] == pytest.approx([(k - 4.85) / 9.7 for k in (5, 6, 7)])


def run(coro):
    return asyncio.run(coro)


def test_aimd_halves_once_per_round_trip_and_grows_by_one_per_window():
    async def go():
        ep = Endpoint("e", Limits(max_concurrent=16))
        tickets = [await ep.acquire() for _ in range(8)]
        seen = []
        for t in tickets[:3]:  # three 429s from calls sent before the first cut: one cut
            ep.throttled(t, 0.0)
            seen.append(ep.limit)
        ep.success(tickets[3])  # an answer: additive increase, 1/limit
        seen.append(ep.limit)
        late = await ep.acquire()
        ep.throttled(late, 0.0)  # sent after the cut: cuts again
        seen.append(ep.limit)
        for t in tickets[4:]:
            ep.success(t)
        seen.append(ep.limit)
        return seen, ep.report()

    seen, report = run(go())
    assert seen[:5] == [8, 8, 8, 8.125, 4]
    assert seen[5] == pytest.approx(
        4 + 1 / 4 + 1 / 4.25 + 1 / (4.25 + 1 / 4.25) + 1 / 4.7, abs=0.01
    )
    assert (
        report["concurrency"],
        report["lowest_concurrency"],
        report["rejected"],
        report["calls"],
    ) == (4, 4, 4, 9)


def test_seconds_waited_count_the_hold_going_on_now():
    async def go():
        ep = Endpoint("e", Limits(max_concurrent=2))
        held = asyncio.create_task(ep._hold(0.6))  # a paced call, held while the progress line asks
        await asyncio.sleep(0.3)
        during = ep.report()["waited_s"]
        await held
        return during, ep.report()["waited_s"]

    during, after = run(go())
    assert 0.25 <= during < 0.6 and 0.55 <= after < 1.0


def test_waiting_calls_are_released_in_order_and_one_goes_first_after_a_pause():
    async def go():
        ep = Endpoint("e", Limits(max_concurrent=2))
        a, b = await ep.acquire(), await ep.acquire()
        order = []

        async def call(name):
            t = await ep.acquire()
            order.append((name, time.monotonic()))
            return t

        waiting = [asyncio.create_task(call(n)) for n in "xyz"]
        await asyncio.sleep(0)
        t0 = time.monotonic()
        ep.throttled(a, 0.2)  # the endpoint pauses 0.2 s and halves to 1
        ep.throttled(b, 0.2)
        x = await waiting[0]
        await asyncio.sleep(0.05)
        assert [n for n, _ in order] == ["x"]  # y and z wait for the first call's answer
        ep.success(x)
        await asyncio.gather(*waiting[1:])
        return [(n, at - t0) for n, at in order]

    order = run(go())
    assert [n for n, _ in order] == ["x", "y", "z"]
    assert order[0][1] >= 0.19 and order[1][1] >= 0.24


def test_a_call_stays_throttled_at_most_max_wait_and_an_absurd_retry_after_stops_the_endpoint():
    async def go():
        ep = Endpoint("e", Limits(max_concurrent=4, max_wait=1.0))
        t = await ep.acquire()
        t.first_throttle = time.monotonic() - 0.9
        with pytest.raises(
            ThrottledOut, match=r"^rate limited: still throttled after 1 s \(max_wait 1 s\)$"
        ):
            ep.throttled(t, 0.5)
        u = await ep.acquire()
        with pytest.raises(
            ThrottledOut, match="the server asked to wait 86400 s, more than max_wait 1 s allows"
        ):
            ep.throttled(u, 86400)
        with pytest.raises(EndpointStopped):
            await ep.acquire()
        return ep.report()

    report = run(go())
    assert (
        report["stopped"]
        == "rate limited: the server asked to wait 86400 s, more than max_wait 1 s allows"
    )
    assert (report["rejected"], report["calls"]) == (2, 2)
