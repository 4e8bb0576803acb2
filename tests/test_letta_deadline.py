"""F14: the Letta target's ``timeout`` is a total deadline per call: a server dripping a byte every
0.5 s cannot hold a ``timeout: 3`` run."""

from __future__ import annotations

import json
import time

import pytest

from tests.fakes.letta_server import agent_file, close_ledger, write_agent_file
from tests.test_time_limits import Drip


def run_letta_suite(sd, target: dict) -> float:
    """One sample against a Letta target (``target``'s keys over ``kind``); the run's seconds."""
    sd.write("dataset.jsonl", [{"id": 1, "input": "q", "ground_truth": "yes"}])
    sd.suite(
        {
            "name": "l",
            "dataset": "dataset.jsonl",
            "target": {"kind": "letta_agent", **target},
            "graders": {"c": {"kind": "tool", "function": "contains"}},
            "gate": {"op": "gte", "value": 0.5},
        }
    )
    t0 = time.monotonic()
    assert sd.run() == 1
    return time.monotonic() - t0


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
    took = run_letta_suite(
        sd,
        {
            "base_url": slow_letta.url,
            "agent_id": "agent-1",
            "timeout": 3,
            "max_retries": retries,
            "retry_backoff": 0.1,
        },
    )
    row = sd.results()[0]
    assert (
        row["error"]["message"]
        == f"Letta agent run failed{attempts}: Letta request timed out ({slow_letta.url})"
    )
    # the sample: 3 s per attempt (the body alone would drip for 2 minutes), plus the backoff
    assert 3 * (retries + 1) <= row["duration_s"] < 3 * (retries + 1) + 1, row["duration_s"]
    assert took < 30, f"{took:.1f} s"  # loading letta_client and writing the reports included


def test_a_dripping_import_times_out_on_the_total_deadline_and_the_run_ends(sd):
    # every answer drips (the import's, then the deletes'): 150 bytes at 0.5 s each is 75 s a call
    server = Drip(json.dumps({"agent_ids": ["agent-9"], "pad": "x" * 120}).encode(), every=0.5)
    try:
        write_agent_file(sd.root / "agent.af", agent_file())
        took = run_letta_suite(
            sd, {"base_url": server.url, "agent_file": "agent.af", "timeout": 2, "max_retries": 0}
        )
    finally:
        server.close()
    row = sd.results()[0]
    assert row["error"]["message"] == (
        f"Letta agent run failed: Letta request timed out ({server.url})"
    )
    # 2 s, then the 5 s a cut-off import may still answer in (it drips on): never the 75 s
    assert 7 <= row["duration_s"] < 8.5, row["duration_s"]
    assert took < 30, f"{took:.1f} s"
    summary = json.loads((sd.root / "out" / "summary.json").read_text())
    assert summary["letta"] == {
        "leftover_agents": [],
        "kept_agents": [],
        "unanswered_imports": ["echo-agent"],
        "base_url": server.url,
    }


def test_a_dripping_delete_times_out_and_the_agent_is_reported_left_over():
    from ci_evals.letta.agents import AgentLedger

    server = Drip(json.dumps({"pad": "x" * 100}).encode(), every=0.5)  # 50 s an answer
    ledger = AgentLedger(server.url, timeout=0.5)
    ledger.add(["agent-1", "agent-2"], "echo")

    try:
        took = close_ledger(ledger)
    finally:
        server.close()
    # two tries of 0.5 s each, both agents at once (a try used to wait for the whole drip)
    assert 1 <= took < 2.5, f"{took:.2f} s"
    why = f"Letta request timed out ({server.url})"
    assert ledger.report()["leftover_agents"] == [
        {"id": "agent-1", "name": "echo", "error": why},
        {"id": "agent-2", "name": "echo", "error": why},
    ]
