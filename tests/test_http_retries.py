"""The HTTP target's ``max_retries``: a request that failed on the way or was answered 408, 425,
429 or 5xx is sent again, as the shared whole-attempt backoff waits; any other answer is final.

The service is pytest-httpserver with a scripted answer per request; the waits are recorded, not
slept (tests/fakes/backoff.py).
"""

from __future__ import annotations

import json
import time

import pytest

from tests.fakes.backoff import watch_letta_backoff


@pytest.fixture
def service():
    """(the service, the list of answers it gives in turn: (status, body, headers) or a delay in
    seconds before a good answer). Past the script, every answer is a good one."""
    from pytest_httpserver import HTTPServer
    from werkzeug import Response

    server = HTTPServer(host="127.0.0.1", port=0)
    server.start()
    script: list = []

    def handler(request):
        step = script.pop(0) if script else None
        if isinstance(step, float):
            time.sleep(step)
            step = None
        if step is None:
            text = request.get_json()["input"].upper()
            return Response(json.dumps({"output": text}), content_type="application/json")
        status, body, headers = step
        return Response(body, status=status, headers=headers)

    server.expect_request("/agent", method="POST").respond_with_handler(handler)
    try:
        yield server, script
    finally:
        server.stop()


def http_suite(sd, server, **target) -> None:
    sd.write("dataset.jsonl", [{"id": "s0", "input": "lima", "ground_truth": "LIMA"}])
    sd.suite(
        {
            "name": "http-retries",
            "dataset": "dataset.jsonl",
            "target": {"kind": "http", "url": server.url_for("/agent"), **target},
            "graders": {"e": {"kind": "tool", "function": "exact_match"}},
            "gate": {"op": "gte", "value": 1.0},
        }
    )


def calls(server) -> int:
    return len(server.log)


def test_a_503_then_a_429_then_an_answer_is_a_pass_with_two_retries(sd, service, monkeypatch):
    server, script = service
    watched = watch_letta_backoff(monkeypatch)
    script += [(503, "busy", {}), (429, "slow down", {"Retry-After": "7"})]
    http_suite(sd, server, max_retries=3, retry_backoff=2.0)
    assert sd.run() == 0
    (rec,) = sd.results()
    assert (rec["grades"]["e"]["score"], rec["retries"], calls(server)) == (1.0, 2, 3)
    # the first wait is jittered in [1, 2]; the second is the service's 7 s (over its [2, 4])
    assert watched.bounds() == [2.0, 4.0]
    assert watched.slept == [watched.rng.drawn[0], 7.0]


def test_retries_spent_on_5xx_end_in_an_error_naming_the_attempts(sd, service, monkeypatch):
    server, script = service
    watch_letta_backoff(monkeypatch)
    script += [(502, "bad gateway", {})] * 3
    http_suite(sd, server, max_retries=2)
    assert sd.run() == 1
    (rec,) = sd.results()
    assert rec["error"] == {
        "category": "target",
        "message": "HTTP target failed after 3 attempts: returned 502: bad gateway",
    }
    assert (rec["retries"], calls(server)) == (2, 3)
    assert sd.summary()["verdict"] == "errored"


@pytest.mark.parametrize("status", [400, 401, 404, 422])
def test_a_client_error_is_final(sd, service, monkeypatch, status):
    server, script = service
    watched = watch_letta_backoff(monkeypatch)
    script.append((status, "no such agent", {}))
    http_suite(sd, server, max_retries=3)
    assert sd.run() == 1
    (rec,) = sd.results()
    assert rec["error"]["message"] == f"HTTP target returned {status}: no such agent"
    assert ("retries" in rec, calls(server), watched.slept) == (False, 1, [])


def test_a_timed_out_request_is_sent_again(sd, service):
    # the first answer would come after 1.5 s, past the 1 s timeout; the retry waits for real
    # (1-2 s): the service (one thread) has finished the first request by then
    server, script = service
    script.append(1.5)
    http_suite(sd, server, max_retries=1, timeout=1.0, retry_backoff=2.0)
    assert sd.run() == 0
    (rec,) = sd.results()
    assert (rec["grades"]["e"]["score"], rec["retries"], calls(server)) == (1.0, 1, 2)


def test_a_refused_connection_is_retried_then_named(sd, monkeypatch):
    import socket

    watched = watch_letta_backoff(monkeypatch)
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    class Gone:
        def url_for(self, path):
            return f"http://127.0.0.1:{port}{path}"

    http_suite(sd, Gone(), max_retries=2, retry_backoff=0.5)
    assert sd.run() == 1
    (rec,) = sd.results()
    assert rec["error"]["message"].startswith(
        "HTTP target failed after 3 attempts: request failed: ConnectError: "
    )
    assert (rec["retries"], watched.bounds()) == (2, [0.5, 1.0])


def test_without_max_retries_the_first_failure_is_the_answer(sd, service, monkeypatch):
    server, script = service
    watched = watch_letta_backoff(monkeypatch)
    script.append((503, "busy", {}))
    http_suite(sd, server)
    assert sd.run() == 1
    (rec,) = sd.results()
    assert rec["error"]["message"] == "HTTP target returned 503: busy"
    assert ("retries" in rec, calls(server), watched.slept) == (False, 1, [])


def test_a_spent_budget_stops_the_retries(sd, service, monkeypatch):
    # the answer reports its cost: after the first sample's $0.5 of a $0.5 cap, the second sample
    # is not sent at all, not even retried
    server, script = service
    watch_letta_backoff(monkeypatch)
    sd.write(
        "dataset.jsonl",
        [{"id": "s0", "input": "a", "ground_truth": "A"}, {"id": "s1", "input": "b"}],
    )
    from werkzeug import Response

    server.clear()
    server.expect_request("/agent", method="POST").respond_with_response(
        Response(json.dumps({"output": "A", "cost_usd": 0.5}), content_type="application/json")
    )
    sd.suite(
        {
            "name": "http-budget",
            "dataset": "dataset.jsonl",
            "target": {"kind": "http", "url": server.url_for("/agent"), "max_retries": 3},
            "graders": {"e": {"kind": "tool", "function": "exact_match"}},
            "max_cost_usd": 0.5,
        }
    )
    assert sd.run("--max-concurrent", "1") == 1
    rows = {r["sample_id"]: r for r in sd.results()}
    assert calls(server) == 1
    assert rows["s1"]["error"]["message"].startswith("not sent: ")
