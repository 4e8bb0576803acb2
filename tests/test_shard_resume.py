"""Sharding + merge equals one unsharded run; interruption keeps everything and --resume finishes it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from ci_evals.cli.app import main
from tests.conftest import replay_suite

N = 40
DATA = [
    {"id": f"s{i}", "input": f"q{i}", "ground_truth": "yes" if i % 3 else "no"} for i in range(N)
]
OUTS = [{"id": f"s{i}", "output": "yes" if i % 4 else "no"} for i in range(N)]
GATES = [{"metric_key": "c", "metric": "accuracy", "op": "gte", "value": 0.5}]
COMPARED = ("metrics", "gate", "gates", "n_samples", "errors", "flaky", "records")


def setup(sd):
    sd.write("dataset.jsonl", DATA)
    sd.write("outputs.jsonl", OUTS)
    sd.suite(
        replay_suite(
            {
                "c": {"kind": "tool", "function": "contains"},
                "a": {"kind": "tool", "function": "ascii_printable_only"},
            },
            None,
            gates=GATES,
        )
    )


def test_merging_shards_equals_one_unsharded_run(sd):
    setup(sd)
    whole_rc = sd.run(out="whole")
    for k in (1, 2, 3):
        sd.run("--shard", f"{k}/3", out=f"shard{k}")
    counts = [len(sd.results(f"shard{k}")) for k in (1, 2, 3)]
    assert sum(counts) == N and all(c > 0 for c in counts)
    rc = main(
        [
            "merge",
            *(str(sd.root / f"shard{k}") for k in (1, 2, 3)),
            "--output",
            str(sd.root / "merged"),
        ]
    )
    assert rc == whole_rc
    whole, merged = sd.summary("whole"), sd.summary("merged")
    assert {k: merged[k] for k in COMPARED} == {k: whole[k] for k in COMPARED}
    assert (sd.root / "merged" / "junit.xml").exists() and (
        sd.root / "merged" / "summary.md"
    ).exists()


def merge_shards_with(sd, capsys, key: str, blocks: dict, out: str) -> None:
    """Run shards 1-3 of 3, give shard k's summary.json ``key: blocks[k]`` (what a run on another
    machine learned), and merge them into ``out`` with the console's output cleared before."""
    for k in (1, 2, 3):
        sd.run("--shard", f"{k}/3", out=f"shard{k}")
        if k in blocks:
            path = sd.root / f"shard{k}" / "summary.json"
            path.write_text(json.dumps({**json.loads(path.read_text()), key: blocks[k]}))
    capsys.readouterr()
    main(
        ["merge", *(str(sd.root / f"shard{k}") for k in (1, 2, 3)), "--output", str(sd.root / out)]
    )


def test_merge_keeps_the_agents_each_shard_left_on_a_letta_server(sd, capsys):
    setup(sd)
    blocks = {
        1: {
            "leftover_agents": [{"id": "agent-1", "name": "echo", "error": "HTTP 503"}],
            "kept_agents": [],
            "base_url": "http://letta:8283",
        },
        3: {
            "leftover_agents": [],
            "kept_agents": [{"id": "agent-3", "name": "judge"}],
            "unanswered_imports": ["echo"],
            "base_url": "http://letta:8283",
        },
    }
    merge_shards_with(sd, capsys, "letta", blocks, "merged")
    assert sd.summary("merged")["letta"] == {
        "leftover_agents": [{"id": "agent-1", "name": "echo", "error": "HTTP 503"}],
        "kept_agents": [{"id": "agent-3", "name": "judge"}],
        "unanswered_imports": ["echo"],
        "base_url": "http://letta:8283",
    }
    printed = capsys.readouterr().out
    assert (
        "Letta: 1 agent(s) the run created could not be deleted; still on http://letta:8283:\n"
        in printed
    )
    assert "  agent-1 (echo): HTTP 503\n" in printed
    assert (
        "Letta: 1 agent(s) kept on http://letta:8283 (cleanup: false):\n  agent-3 (judge)\n"
        in printed
    )
    assert (
        "Letta: 1 agent import(s) or agent_script call(s) on http://letta:8283 had not answered"
        in printed
    )


OPENAI = "https://api.openai.com/v1"
JUDGE = "http://judge:8000/v1"


def test_merge_keeps_each_endpoints_throttling_and_breaker_from_the_shards(sd, capsys):
    setup(sd)
    limits = {"max_concurrent": 10, "rpm": 500.0, "rpm_from": "server"}
    blocks = {
        1: [
            {"endpoint": OPENAI, "provider": "openai", "calls": 100, "rejected": 12,
             "waited_s": 9.1, "concurrency": 4, "lowest_concurrency": 2, **limits},
        ],
        3: [
            {"endpoint": OPENAI, "provider": "openai", "calls": 112, "rejected": 0,
             "waited_s": 3.0, "max_concurrent": 12, "concurrency": 10, "lowest_concurrency": 6},
            {"endpoint": JUDGE, "provider": "openai", "calls": 5, "rejected": 0, "waited_s": 0.0,
             "max_concurrent": 10, "concurrency": 10, "lowest_concurrency": 10,
             "stopped": f"stopped calling {JUDGE}: it refused the API key (HTTP 401)"},
        ],
    }  # fmt: skip
    merge_shards_with(sd, capsys, "endpoints", blocks, "m")
    assert sd.summary("m")["endpoints"] == [
        {"endpoint": OPENAI, "provider": "openai", "calls": 212, "rejected": 12, "waited_s": 9.1,
         "max_concurrent": 12, "concurrency": 4, "lowest_concurrency": 2, "rpm": 500.0,
         "rpm_from": "server"},
        blocks[3][1],
    ]  # fmt: skip
    printed = capsys.readouterr().out
    assert (
        f"throttled: {OPENAI}: 12 of 212 calls rejected (429/503/529), calls held back 9.1 s, "
        "settled at 4 in flight (lowest 2, cap 12); limit 500 rpm (announced by the server)\n"
    ) in printed
    assert f"stopped: stopped calling {JUDGE}: it refused the API key (HTTP 401)\n" in printed


def test_merged_budget_sums_the_shards_shares_and_invents_no_cap():
    """Shards of a suite without ``max_cost_usd`` merged into "Budget: $0.0069 of max $0 spent"
    (in the console, summary.md and the PR comment of every sharded LLM run)."""
    from ci_evals.cli.merge import merged_budget
    from ci_evals.reports.costspeed import budget

    def shard(cap, spent, stopped=None):
        block = {"max_steps": None, "max_tokens": None, "max_cost_usd": cap, "spent_usd": spent}
        return {"cost_speed": {"budget": {**block, "stopped": stopped, "stopped_samples": 0}}}

    uncapped = merged_budget([shard(None, 0.003323), shard(None, 0.00355)], 0)
    assert uncapped == {
        "max_steps": None,
        "max_tokens": None,
        "max_cost_usd": None,
        "spent_usd": 0.006873,
        "stopped": None,
        "stopped_samples": 0,
    }
    assert budget({"budget": uncapped}) == ""
    capped = merged_budget([shard(0.25, 0.1), shard(0.25, 0.25, "max_cost_usd $0.25 spent")], 3)
    assert (capped["max_cost_usd"], capped["spent_usd"], capped["stopped"]) == (
        0.5,
        0.35,
        "max_cost_usd $0.25 spent",
    )
    assert merged_budget([shard(0.25, 0.1), shard(None, 0.1)], 0)["max_cost_usd"] is None
    assert merged_budget([{"cost_speed": {}}], 0) is None


def test_merge_rejects_overlapping_shards(sd, capsys):
    setup(sd)
    sd.run(out="a")
    rc = main(["merge", str(sd.root / "a"), str(sd.root / "a"), "--output", str(sd.root / "m")])
    assert rc == 2
    assert "appears in more than one shard" in capsys.readouterr().err


def _slow_suite(sd, n=12):
    sd.write(
        "agent.py",
        "import json, sys, time\ns = json.load(sys.stdin)\ntime.sleep(0.25)\n"
        "print('yes' if int(s['id']) % 2 else 'no')\n",
    )
    sd.write("dataset.jsonl", [{"id": i, "input": "q", "ground_truth": "yes"} for i in range(n)])
    sd.suite(
        {
            "name": "slow",
            "dataset": "dataset.jsonl",
            "target": {"kind": "command", "command": [sys.executable, "agent.py"]},
            "graders": {"c": {"kind": "tool", "function": "contains"}},
            "gate": {"metric": "accuracy", "op": "gte", "value": 0.4},
            "max_concurrent": 2,
        }
    )


def _interrupt(sd, sig, out="out"):
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ci_evals",
            "run",
            str(sd.root / "suite.yaml"),
            "--output",
            str(sd.root / out),
            "-q",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    results = sd.root / out / "results.jsonl"
    deadline = time.time() + 20
    while time.time() < deadline:
        if results.exists() and len(results.read_text().splitlines()) >= 3:
            break
        time.sleep(0.05)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    return proc.returncode, out, err


def test_sigint_flushes_results_and_writes_partial_summary(sd):
    _slow_suite(sd)
    rc, out, err = _interrupt(sd, signal.SIGINT)
    assert rc == 130
    s = sd.summary()
    assert s["partial"] is True and s["interrupted_by"] == "SIGINT"
    assert (s["verdict"], s["gate"]["passed"]) == ("interrupted", False)
    rows = sd.results()
    assert (
        out.splitlines()[0]
        == f"slow: INTERRUPTED (interrupted by SIGINT after {len(rows)} samples)"
    )
    assert 3 <= len(rows) < 12
    assert s["records"] == len(rows)
    assert "--resume" in err


def test_sigterm_exits_143_and_resume_gives_the_uninterrupted_summary(sd):
    _slow_suite(sd)
    rc, _, _ = _interrupt(sd, signal.SIGTERM)
    assert rc == 143
    done_before = len(sd.results())
    assert main(["run", str(sd.root / "suite.yaml"), "--resume", str(sd.root / "out"), "-q"]) == 0
    rows = sd.results()
    assert len(rows) == 12 and len({r["sample_id"] for r in rows}) == 12
    assert done_before < 12
    sd.run(out="full")
    resumed, full = sd.summary(), sd.summary("full")
    assert resumed["partial"] is False
    assert {k: resumed[k] for k in COMPARED} == {k: full[k] for k in COMPARED}


def test_summary_equals_recomputation_from_results(sd):
    from ci_evals.gating.aggregate import Aggregator
    from ci_evals.gating.summary import evaluate_gates
    from ci_evals.reports.write import own_results

    setup(sd)
    sd.run()
    s = sd.summary()
    agg = Aggregator(s["config"])
    for rec in own_results(sd.root / "out" / "results.jsonl"):
        agg.add(rec)
    parts = agg.finish()
    assert json.dumps(parts["metrics"], sort_keys=True) == json.dumps(s["metrics"], sort_keys=True)
    assert evaluate_gates(agg, parts, s["config"], None) == s["gates"]


def test_resume_after_a_hard_kill_cuts_a_torn_last_line_before_appending(sd):
    setup(sd)
    full_rc = sd.run(out="full")
    sd.run()
    path = sd.root / "out" / "results.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(
        b"".join(lines[:25]) + lines[25][:40]
    )  # 25 whole lines, then one a kill cut short
    assert (
        main(["run", str(sd.root / "suite.yaml"), "--resume", str(sd.root / "out"), "-q"])
        == full_rc
    )
    text = path.read_bytes()
    assert text.startswith(b"".join(lines[:25])) and text.endswith(b"\n")
    rows = [
        json.loads(x) for x in text.splitlines()
    ]  # every line whole: none glued to the torn one
    assert sorted(r["sample_id"] for r in rows) == sorted(f"s{i}" for i in range(N))
    resumed, full = sd.summary(), sd.summary("full")
    assert {k: resumed[k] for k in COMPARED} == {k: full[k] for k in COMPARED}
