"""Missing evidence is never a pass: regression gates without a usable baseline, and merges of
shard sets that are not complete."""

from __future__ import annotations

import json

import pytest

from ci_evals.cli.app import main
from tests.conftest import replay_suite

DATA = [{"id": f"s{i}", "input": f"q{i}", "ground_truth": "yes"} for i in range(8)]
OUTS = [{"id": f"s{i}", "output": "yes" if i % 3 else "no"} for i in range(8)]


def write_suite(sd, gates, name: str = "t", grader: str = "ok", suite: str = "suite.yaml") -> None:
    sd.write("dataset.jsonl", DATA)
    sd.write("outputs.jsonl", OUTS)
    spec = replay_suite({grader: {"kind": "tool", "function": "contains"}}, None, gates=gates)
    spec["name"] = name
    sd.suite(spec, name=suite)


DROP_FAIL = [{"metric_key": "ok", "max_drop": 0.05, "on_missing_baseline": "fail"}]


def baseline_then_run(sd, prepare) -> dict:
    write_suite(sd, DROP_FAIL)
    sd.run(out="base")
    prepare(sd.root / "base")
    rc = sd.run("--baseline", str(sd.root / "base"), out="pr")
    s = sd.summary("pr")
    return {
        "rc": rc,
        "verdict": s["verdict"],
        "status": s["gates"][0]["status"],
        "reason": s["gates"][0]["reason"],
        "missing": s["baseline"]["missing"],
    }


@pytest.mark.parametrize(
    ("prepare", "why"),
    [
        (lambda b: (b / "results.jsonl").unlink(), "baseline folder {b} has no results.jsonl"),
        (lambda b: (b / "results.jsonl").write_text(""), "baseline results.jsonl in {b} is empty"),
        (lambda b: (b / "summary.json").unlink(), "baseline folder {b} has no summary.json"),
    ],
)
def test_a_baseline_without_its_files_is_no_baseline(sd, prepare, why):
    got = baseline_then_run(sd, prepare)
    why = why.format(b=sd.root / "base")
    assert got == {
        "rc": 1,
        "verdict": "failed",
        "status": "no_baseline",
        "reason": f"no baseline: {why} (on_missing_baseline: fail)",
        "missing": why,
    }


def test_a_baseline_folder_that_does_not_exist_is_no_baseline(sd):
    write_suite(
        sd, [{"metric_key": "ok", "max_drop": 0.05}]
    )  # on_missing_baseline: pass (the default)
    assert sd.run("--baseline", str(sd.root / "nowhere")) == 0
    g = sd.summary()["gates"][0]
    assert (g["status"], g["passed"], g["reason"]) == (
        "no_baseline",
        True,
        f"no baseline: baseline folder {sd.root / 'nowhere'} does not exist "
        "(on_missing_baseline: pass)",
    )


def test_a_renamed_metric_is_no_baseline_not_a_pass(sd, capsys):
    write_suite(
        sd, [{"metric_key": "old", "max_drop": 0.05, "on_missing_baseline": "fail"}], grader="old"
    )
    sd.run(out="base")
    write_suite(
        sd, [{"metric_key": "new", "max_drop": 0.05, "on_missing_baseline": "fail"}], grader="new"
    )
    rc = main(
        [
            "run",
            str(sd.root / "suite.yaml"),
            "-o",
            str(sd.root / "pr"),
            "--no-cache",
            "--baseline",
            str(sd.root / "base"),
        ]
    )
    out = capsys.readouterr().out.splitlines()
    s = sd.summary("pr")
    assert (rc, s["verdict"], s["gates"][0]["status"]) == (1, "failed", "no_baseline")
    assert (
        "Gate: new avg_score max_drop 0.05: no baseline: the baseline has no metric 'new' (added or renamed "
        "since?) (on_missing_baseline: fail) -> NO BASELINE (fails)"
    ) in out
    assert s["baseline"]["metrics"]["new"]["delta_mean"] is None


def test_a_baseline_of_another_suite_is_no_baseline(sd):
    write_suite(sd, DROP_FAIL, name="other")
    sd.run(out="base")
    write_suite(sd, DROP_FAIL, name="t")
    assert sd.run("--baseline", str(sd.root / "base"), out="pr") == 1
    g = sd.summary("pr")["gates"][0]
    assert (
        g["reason"]
        == "no baseline: the baseline is of suite 'other', not 't' (on_missing_baseline: fail)"
    )


def test_a_usable_baseline_still_compares(sd):
    write_suite(sd, DROP_FAIL)
    sd.run(out="base")
    assert sd.run("--baseline", str(sd.root / "base"), out="pr") == 0
    g = sd.summary("pr")["gates"][0]
    assert (g["status"], g["reason"], g["drop"]) == (
        "passed",
        "drop 0.0000 from baseline 0.6250 (max_drop 0.05)",
        0,
    )


# ---------------------------------------------------------------- merge


def shards(sd, count: int, which) -> list[str]:
    write_suite(sd, [{"metric_key": "ok", "metric": "accuracy", "op": "gte", "value": 0.5}])
    for k in which:
        sd.run("--shard", f"{k}/{count}", "--max-errors", "0", out=f"shard{k}")
    return [str(sd.root / f"shard{k}") for k in which]


def merge(sd, dirs: list[str], *extra: str) -> int:
    return main(["merge", *dirs, "--output", str(sd.root / "merged"), *extra])


def test_one_shard_alone_is_partial_naming_the_missing_ones(sd, capsys):
    dirs = shards(sd, 4, [4])
    capsys.readouterr()
    assert merge(sd, dirs) == 1
    s = sd.summary("merged")
    assert (s["verdict"], s["partial"], s["gate"]["passed"]) == ("partial", True, False)
    assert s["verdict_reason"] == "shards 1/4, 2/4, 3/4 missing (1 of 4 merged)"
    assert (
        capsys.readouterr().out.splitlines()[-1]
        == "Verdict: PARTIAL (shards 1/4, 2/4, 3/4 missing (1 of 4 merged))"
    )


def test_a_complete_set_is_not_partial(sd):
    dirs = shards(sd, 3, [1, 2, 3])
    assert merge(sd, dirs) == 0
    s = sd.summary("merged")
    assert (s["verdict"], s["partial"], s["n_samples"]) == ("passed", False, 8)


def test_a_truncated_shard_is_partial(sd):
    dirs = shards(sd, 2, [1, 2])
    path = sd.root / "shard2" / "results.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:-1]))
    assert merge(sd, dirs) == 1
    assert (
        sd.summary("merged")["verdict_reason"]
        == f"shard 2/2: results.jsonl has {len(lines) - 1} of {len(lines)} records"
    )


def test_an_interrupted_shard_is_partial(sd):
    dirs = shards(sd, 2, [1, 2])
    p = sd.root / "shard1" / "summary.json"
    s = json.loads(p.read_text())
    s.update(partial=True, interrupted_by="SIGINT")
    p.write_text(json.dumps(s))
    assert merge(sd, dirs) == 1
    assert sd.summary("merged")["verdict_reason"] == "shard 1/2 is interrupted"


@pytest.mark.parametrize(
    ("tamper", "message"),
    [
        (
            lambda s: s.update(suite="other"),
            "this folder holds results of a different suite or configuration",
        ),
        (lambda s: s["shard"].update(count=3), "shards of different splits (of 2 and of 3)"),
        (lambda s: s["shard"].update(index=1), "shard 1/2 appears twice (also {first})"),
        (
            lambda s: s["shard"].update(selected=99),
            "the shards selected different samples (8 and 99 before sharding): "
            "run every shard with the same options",
        ),
    ],
)
def test_shards_that_do_not_belong_together_are_a_configuration_error(sd, capsys, tamper, message):
    dirs = shards(sd, 2, [1, 2])
    p = sd.root / "shard2" / "summary.json"
    s = json.loads(p.read_text())
    tamper(s)
    p.write_text(json.dumps(s))
    capsys.readouterr()
    assert merge(sd, dirs) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith(message.format(first=sd.root / "shard1")) and err.count("\n") == 0


def test_a_regression_gate_run_without_baseline_says_so(sd, capsys):
    write_suite(sd, [{"metric_key": "ok", "max_drop": 0.05}])
    rc = main(["run", str(sd.root / "suite.yaml"), "-o", str(sd.root / "out"), "--no-cache"])
    assert rc == 0
    assert (
        "Gate: ok avg_score max_drop 0.05: no baseline: run without --baseline (on_missing_baseline: pass) "
        "-> NO BASELINE (passes)"
    ) in capsys.readouterr().out.splitlines()
