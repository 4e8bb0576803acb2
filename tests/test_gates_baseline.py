"""Gates users can trust: intervals, confidence gates, baselines, regression gates, reducers."""

from __future__ import annotations

import math
import random

import pytest

from ci_evals.gating.gates import GateSpec, evaluate
from ci_evals.gating.repeats import reduce_runs
from ci_evals.gating.stats import bootstrap_mean, percentile, summarize, wilson
from tests.conftest import replay_suite


def test_wilson_matches_reference_formula():
    lo, hi = wilson(15, 20)
    z = 1.959963984540054
    p, n = 0.75, 20
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    assert (lo, hi) == pytest.approx((centre - half, centre + half), abs=1e-12)
    assert (round(lo, 4), round(hi, 4)) == (0.5313, 0.8881)


def test_bootstrap_matches_straightforward_reference():
    values = [0.0, 0.25, 0.5, 0.5, 0.75, 1.0, 1.0, 1.0, 0.25, 0.75]
    rng = random.Random(12345)
    means = sorted(sum(rng.choices(values, k=len(values))) / len(values) for _ in range(1000))
    ref = (percentile(means, 2.5), percentile(means, 97.5))
    assert bootstrap_mean(values) == pytest.approx(ref, abs=1e-12)


def test_percentile_is_linear_interpolation():
    assert [percentile([1, 2, 3, 4], q) for q in (0, 50, 95, 100)] == [1, 2.5, 3.85, 4]


def test_confidence_gate_is_inconclusive_when_interval_straddles():
    scores = [0.0] * 5 + [1.0] * 15
    agg = summarize(scores, 15, 0)
    g = evaluate(
        GateSpec(metric="accuracy", op="gte", value=0.7, confidence=0.95, metric_key="m"),
        agg,
        scores,
    )
    assert g["status"] == "inconclusive" and g["passed"] is False
    g = evaluate(
        GateSpec(metric="accuracy", op="gte", value=0.5, confidence=0.95, metric_key="m"),
        agg,
        scores,
    )
    assert g["status"] == "passed"
    g = evaluate(
        GateSpec(metric="accuracy", op="gte", value=0.95, confidence=0.95, metric_key="m"),
        agg,
        scores,
    )
    assert g["status"] == "failed"
    g = evaluate(
        GateSpec(metric="accuracy", op="lte", value=0.85, confidence=0.95, metric_key="m"),
        agg,
        scores,
    )
    assert g["status"] == "inconclusive"


@pytest.mark.parametrize(
    ("reducer", "expected"),
    [
        ("mean", (0.5, True, False)),
        ("median", (0.5, True, False)),
        ("max", (1.0, True, False)),
        ("pass_at_k", (1.0, True, False)),
        ("pass_all_k", (0.0, False, False)),
        ("majority", (0.0, False, False)),
    ],
)
def test_reducers(reducer, expected):
    runs = [(1.0, True, False), (0.0, False, False), (1.0, True, False), (0.0, False, False)]
    assert reduce_runs(reducer, runs, ("gte", 0.5)) == expected


DATA = [{"id": i, "input": f"q{i}", "ground_truth": "yes"} for i in range(5)]


def run_with(sd, outputs, out, gates, *args):
    sd.write("dataset.jsonl", DATA)
    sd.write("outputs.jsonl", [{"id": i, "output": o} for i, o in enumerate(outputs)])
    spec = replay_suite({"ok": {"kind": "tool", "function": "contains"}}, None, gates=gates)
    sd.suite(spec)
    return sd.run(*args, out=out)


def test_baseline_deltas_regressions_and_regression_gates(sd):
    gates = [
        {"metric_key": "ok", "metric": "accuracy", "op": "gte", "value": 0.4},
        {"metric_key": "ok", "max_drop": 0.1},
        {"metric_key": "ok", "max_regressions": 0},
    ]
    assert run_with(sd, ["yes", "yes", "yes", "no", "yes"], "base", gates) == 0
    rc = run_with(
        sd, ["yes", "no", "no", "yes", "yes"], "pr", gates, "--baseline", str(sd.root / "base")
    )
    assert rc == 1
    s = sd.summary("pr")
    b = s["baseline"]
    assert b["metrics"]["ok"]["baseline_mean"] == 0.8 and b["metrics"]["ok"]["mean"] == 0.6
    assert b["metrics"]["ok"]["delta_mean"] == pytest.approx(-0.2)
    assert sorted(r["sample_id"] for r in b["regressions"]) == ["1", "2"]
    assert [r["sample_id"] for r in b["improvements"]] == ["3"]
    statuses = [(g["description"], g["status"]) for g in s["gates"]]
    assert statuses == [
        ("ok accuracy gte 0.4", "passed"),
        ("ok avg_score max_drop 0.1", "failed"),
        ("ok avg_score max_regressions 0", "failed"),
    ]
    assert s["gates"][1]["drop"] == pytest.approx(0.2)
    assert s["gates"][2]["regressions"] == 2


def test_regression_gate_without_baseline(sd):
    gates = [{"metric_key": "ok", "max_drop": 0.1}]
    assert run_with(sd, ["yes"] * 5, "a", gates) == 0
    assert sd.summary("a")["gates"][0]["status"] == "no_baseline"
    gates = [{"metric_key": "ok", "max_drop": 0.1, "on_missing_baseline": "fail"}]
    assert run_with(sd, ["yes"] * 5, "b", gates) == 1


def test_new_and_removed_samples(sd):
    gates = [{"metric_key": "ok", "op": "gte", "value": 0}]
    run_with(sd, ["yes"] * 5, "base", gates)
    sd.write("dataset.jsonl", DATA[1:] + [{"id": 9, "input": "new", "ground_truth": "yes"}])
    sd.write("outputs.jsonl", [{"id": i, "output": "yes"} for i in (1, 2, 3, 4, 9)])
    sd.run("--baseline", str(sd.root / "base"), out="pr")
    b = sd.summary("pr")["baseline"]
    assert (b["new"], b["removed"]) == (["9"], ["0"])
