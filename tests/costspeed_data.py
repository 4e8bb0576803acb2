"""The hand-built run of tests/test_cost_speed_reports.py: its summary.json (cost_speed, a
baseline 3x faster, a cached answer, an unpriced model with a hostile name, a budget stop) and its
results lines; and what the reports wrote, before the block existed, for the same run without
cost_speed."""

from __future__ import annotations

from typing import Any

from ci_evals.results.records import ResultRecord, Summary

EVIL = "@evil/<b>x</b>|`[y](z)`"


def entry(label: str, unit: str, **kw: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "label": label,
        "unit": unit,
        "n": 5,
        "measured": 4,
        "errors": 1,
        "cached": 0,
        "unknown": 0,
        "unknown_reasons": [],
        **{k: None for k in ("mean", "median", "p95", "p99", "min", "max", "sum")},
    }
    return {**out, **kw}


def _zero(label: str, unit: str) -> dict[str, Any]:
    return entry(label, unit, mean=0.0, median=0.0, p95=0.0, p99=0.0, min=0.0, max=0.0, sum=0.0)


def cost_speed() -> dict[str, Any]:
    reason = f"model {EVIL!r} has no known price"
    return {
        "metrics": {
            "latency": entry(
                "Latency",
                "s",
                measured=3,
                cached=1,
                mean=3.12,
                median=2.0,
                p95=4.7,
                p99=4.94,
                min=1.0,
                max=5.0,
                sum=9.36,
            ),
            "tokens": entry(
                "Tokens",
                "",
                mean=367.5,
                median=65.0,
                p95=1065.0,
                p99=1185.0,
                min=0.0,
                max=1200.0,
                sum=1470.0,
            ),
            "prompt_tokens": entry(
                "Prompt tokens", "", mean=277.5, min=0.0, max=1000.0, sum=1110.0
            ),
            "completion_tokens": entry(
                "Completion tokens", "", mean=90.0, min=0.0, max=200.0, sum=360.0
            ),
            "cost_usd": entry(
                "Cost",
                "$",
                measured=3,
                unknown=1,
                unknown_reasons=[reason],
                mean=0.00166667,
                median=0.001,
                p95=0.0037,
                p99=0.00394,
                min=0.0,
                max=0.004,
                sum=0.005,
            ),
            "steps": entry(
                "Steps", "", mean=3.0, median=2.5, p95=5.55, p99=5.91, min=1.0, max=6.0, sum=12.0
            ),
            "tool_calls": entry(
                "Tool calls", "", mean=1.0, median=0.5, p95=2.7, p99=2.94, min=0.0, max=3.0, sum=4.0
            ),
            "judge_tokens": _zero("Judge tokens", ""),
            "judge_cost_usd": _zero("Judge cost", "$"),
        },
        "queued_s": 1.234,
        "throttled": 3,
        "retries": 2,
        "cache_hits": 1,
        "cost_usd": 0.0123,
        "unpriced": [EVIL],
        "budget": {
            "max_steps": None,
            "max_tokens": None,
            "max_cost_usd": 0.01,
            "spent_usd": 0.0123,
            "stopped": "max_cost_usd $0.01 spent",
            "stopped_samples": 1,
        },
    }


def _gates() -> list[dict[str, Any]]:
    common = {"metric_key": "latency", "label": "Latency", "status": "failed", "passed": False}
    counts = {"errors": 1, "graded": 3, "n": 5}
    return [
        {
            **common,
            **counts,
            "metric": "p95",
            "op": "lte",
            "value": 4.0,
            "actual": 4.7,
            "description": "latency p95 lte 4",
            "reason": "p95 4.7 > 4",
        },
        {
            **common,
            **counts,
            "metric": "avg_score",
            "op": None,
            "value": None,
            "actual": 3.12,
            "description": "latency avg_score max_increase 0.2",
            "baseline_value": 1.0,
            "increase": 2.12,
            "max_increase": 0.2,
            "noisy": True,
            "tests": [],
            "reason": "3.12 against baseline 1 (+212.0%, max_increase 0.2)",
        },
    ]


def summary(with_cost_speed: bool = True) -> Summary:
    out: dict[str, Any] = {
        "schema_version": 1,
        "suite": "speedy",
        "n_samples": 5,
        "num_runs": 1,
        "records": 5,
        "duration_s": 12.5,
        "started_at": "2026-01-02T03:04:05+00:00",
        "verdict": "errored",
        "verdict_reason": "budget: max_cost_usd $0.01 spent",
        "target": {"kind": "python"},
        "gate": {"passed": False},
        "gates": _gates(),
        "metrics": {
            "answer": {
                "label": "Answer",
                "kind": "contains",
                "n": 5,
                "graded": 4,
                "errors": 1,
                "mean": 0.75,
                "passed": 3,
                "pass_rate": 0.6,
                "ci_mean": [0.25, 1.0],
                "ci_pass_rate": [0.23, 0.88],
                "rule": "score >= 1",
            }
        },
        "errors": {"total": 1, "samples": 1, "by_category": {"budget": 1}, "groups": []},
        "usage": {"total": {"prompt_tokens": 1110, "completion_tokens": 360}, "cost_usd": 0.0123},
        "cache": {"hits": 1},
        "retries": 2,
        "versions": {"ci_evals": "9.9.9"},
        "baseline": {
            "folder": "base-results",
            "metrics": {},
            "regressions": [],
            "improvements": [],
            "new": [],
            "removed": [],
            "cost_speed": {
                "latency": {"baseline_mean": 1.0, "mean": 3.12, "change_mean": 2.12},
                "tokens": {"baseline_mean": 367.5, "mean": 367.5, "change_mean": 0.0},
                "cost_usd": {"baseline_mean": 0.0033, "mean": 0.00166667, "change_mean": -0.4949},
                "steps": {"baseline_mean": 0.0, "mean": 3.0, "change_mean": None},
            },
        },
    }
    if with_cost_speed:
        out["cost_speed"] = cost_speed()
    else:  # a folder from before: no cost_speed, no gate on a built-in metric
        del out["baseline"]["cost_speed"]
        out["gates"] = [
            {
                "metric_key": "answer",
                "metric": "accuracy",
                "op": "gte",
                "value": 0.8,
                "actual": 0.6,
                "label": "Answer",
                "description": "answer accuracy gte 0.8",
                "status": "failed",
                "passed": False,
                "reason": "accuracy 0.6000, needs >= 0.8",
                "errors": 1,
                "graded": 4,
                "n": 5,
            }
        ]
    return out  # type: ignore[return-value]


def _line(sid: str, **kw: Any) -> dict[str, Any]:
    ok = {"score": 1.0, "passed": True, "rationale": "ok", "error": None, "metadata": {}}
    return {"sample_id": sid, "run": 0, "model": None, "input": "q", "grades": {"answer": ok}, **kw}


def records() -> list[ResultRecord]:
    return [  # type: ignore[list-item]
        _line(
            "fast",
            latency_s=1.0,
            usage={"prompt_tokens": 100, "completion_tokens": 30},
            target={"cost_usd": 0.001},
            steps=2,
            tool_calls=1,
            duration_s=1.1,
        ),
        _line(
            "slow",
            latency_s=5.0,
            usage={"prompt_tokens": 1000, "completion_tokens": 200},
            target={"cost_usd": 0.004},
            steps=6,
            tool_calls=3,
            duration_s=5.1,
        ),
        _line(
            "cached",
            latency_s=None,
            cache_hits=1,
            usage={},
            target={"cost_usd": 0.0},
            steps=1,
            tool_calls=0,
            duration_s=0.1,
        ),
        _line(
            "unpriced",
            latency_s=3.36,
            usage={"prompt_tokens": 10, "completion_tokens": 130},
            target={"unpriced": [EVIL]},
            steps=3,
            tool_calls=0,
            duration_s=3.4,
        ),
        _line(
            "stopped",
            error={"category": "budget", "message": "max_cost_usd $0.01 spent"},
            grades={
                "answer": {
                    "score": None,
                    "passed": False,
                    "error": "budget",
                    "error_category": "budget",
                }
            },
        ),
    ]


# What the reports wrote before the block existed (summary(with_cost_speed=False)).

BEFORE_CONSOLE = (
    "Suite: speedy  (5 samples, 12.50 s)\n"
    "metric           mean    mean 95% CI     pass rate    pass rate 95% CI    graded/n    errors    pass rule    Δ mean\n"
    "---------------  ------  --------------  -----------  ------------------  ----------  --------  -----------  --------\n"
    "Answer (answer)  0.750   [0.250, 1.000]  60.0%        [23.0%, 88.0%]      4/5         1         score >= 1   -\n"
    "95% intervals: the mean's by bootstrap (normal approximation above 200 samples), the pass rate's by Wilson score\n"
    "\n"
    "Errors: 1 of 5 result lines errored (budget 1); errored samples have no score and count as failed:\n"
    "\n"
    "Failing samples: 1 of 5 result lines (1 failure):\n"
    "  ERRORED  stopped  budget  -  budget error: max_cost_usd $0.01 spent\n"
    "Baseline: 0 regressions, 0 improvements, 0 new, 0 removed\n"
    "\n"
    "Gate: Answer (answer) accuracy gte 0.8: accuracy 0.6000, needs >= 0.8 -> FAIL\n"
    "Verdict: ERRORED (budget: max_cost_usd $0.01 spent)"
)

BEFORE_MD = (
    "## ❌ ci-evals · speedy: errored\n"
    "\n"
    "**Verdict: errored**: budget: max_cost_usd $0.01 spent\n"
    "\n"
    "5 samples × 1 run(s) · target python · 12.5 s\n"
    "\n"
    "### Gates\n"
    "\n"
    "| Gate | Actual | 95% interval | Graded | Errors | Status | Why |\n"
    "|---|---:|---:|---:|---:|---|---|\n"
    "| Answer (answer) accuracy gte 0.8 | 0.600 |  | 4/5 | 1 | ❌ failed | accuracy 0.6000, needs &gt;= 0.8 |\n"
    "\n"
    "### Metrics\n"
    "\n"
    "| Metric | Mean (95% CI) | Pass rate (95% Wilson) | Passed | Graded | Errors | Pass rule |\n"
    "|---|---:|---:|---:|---:|---:|---|\n"
    "| Answer (answer) | 0.750 (0.250–1.000) | 60.0% (23.0%–88.0%) | 3/5 | 4/5 | 1 | `score >= 1` |\n"
    "\n"
    "<sub>Means are over graded samples; pass rates over all samples, errored ones counting as failed. 95% intervals: the mean's by bootstrap (normal approximation above 200 samples), the pass rate's by Wilson score.</sub>\n"
    "\n"
    "**Errors:** 1 errored sample (no score, counted as failed): budget 1\n"
    "\n"
    "\n"
    "### Usage\n"
    "\n"
    "Tokens: 1,110 prompt + 360 completion (target 0, graders 0) · cost $0.0123 · cache hits 1 · retries 2\n"
    "\n"
    "| | Prompt tokens | Completion tokens |\n"
    "|---|---:|---:|\n"
    "| target | 0 | 0 |\n"
    "| **total** | 1,110 | 360 |\n"
    "\n"
    "### Compared with the baseline\n"
    "\n"
    "Baseline: base-results\n"
    "\n"
    "regressions: 0 · improvements: 0 · new: 0 · removed: 0\n"
    "\n"
    "Full report: report.html in the results artifact\n"
    "\n"
    "<sub>ci_evals 9.9.9</sub>\n"
)
