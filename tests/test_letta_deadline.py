"""F14: the Letta target's ``timeout`` is a total deadline per call: a server dripping a byte every
0.5 s cannot hold a ``timeout: 3`` run."""

from __future__ import annotations

import json
import time

import pytest

from tests.test_time_limits import Drip


@pytest.fixture
def slow_letta():
    server = Drip(
        json.dumps({"messages": [], "stop_reason": None, "usage": {}, "pad": "x" * 200}).encode(),
        every=0.5,
    )
    yield server
    server.close()


@pytest.mark.parametrize(("retries", "attempts"), [(0, ""), (1, " after 2 attempts")])
def test_a_dripping_letta_server_times_out_on_the_total_deadline(sd, slow_letta, retries, attempts):
    sd.write("dataset.jsonl", [{"id": 1, "input": "q", "ground_truth": "yes"}])
    sd.suite(
        {
            "name": "l",
            "dataset": "dataset.jsonl",
            "target": {
                "kind": "letta_agent",
                "base_url": slow_letta.url,
                "agent_id": "agent-1",
                "timeout": 3,
                "max_retries": retries,
                "retry_backoff": 0.1,
            },
            "graders": {"c": {"kind": "tool", "function": "contains"}},
            "gate": {"op": "gte", "value": 0.5},
        }
    )
    t0 = time.monotonic()
    assert sd.run() == 1
    took = time.monotonic() - t0
    row = sd.results()[0]
    assert (
        row["error"]["message"]
        == f"Letta agent run failed{attempts}: Letta request timed out ({slow_letta.url})"
    )
    # the sample: 3 s per attempt (the body alone would drip for 2 minutes), plus the backoff
    assert 3 * (retries + 1) <= row["duration_s"] < 3 * (retries + 1) + 1, row["duration_s"]
    assert took < 30, f"{took:.1f} s"  # loading letta_client and writing the reports included
