"""Hand-built summary.json / results.jsonl documents (the output contract) for the report tests."""

from __future__ import annotations

import copy
from typing import Any

SCORES = {1: 0.9, 2: 0.8, 3: 0.55, 4: 0.3, 5: 0.95}


def _row(sid: int, quality: float | None, exact: bool, **over: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "sample_id": sid,
        "run": 0,
        "model": None,
        "input": f"question {sid}",
        "ground_truth": f"answer {sid}",
        "tags": [],
        "error": None,
        "grades": {
            "quality": {
                "score": quality,
                "passed": quality >= 0.75,
                "rationale": f"judge says {quality}",
                "error": None,
                "metadata": {},
            },
            "exact": {
                "score": 1.0 if exact else 0.0,
                "passed": exact,
                "rationale": f"Exact match: {str(exact).lower()}",
                "error": None,
                "metadata": {},
            },
        },
        "submission": {"quality": f"reply {sid}", "exact": f"reply {sid}"},
        "usage": {"prompt_tokens": 10, "completion_tokens": 5},
        "duration_s": 0.25,
    }
    row.update(over)
    return row


def results() -> list[dict[str, Any]]:
    """Six result lines: five graded (two below the 0.75 rule) and one errored by the target."""
    rows = [_row(sid, score, exact=sid in (1, 5)) for sid, score in SCORES.items()]
    rows.append(
        {
            "sample_id": 6,
            "run": 0,
            "model": None,
            "input": "question 6",
            "ground_truth": "answer 6",
            "tags": [],
            "error": {"category": "target", "message": "agent exited with code 1: boom"},
            "grades": {
                name: {
                    "score": None,
                    "passed": False,
                    "rationale": None,
                    "error": "target error: agent exited with code 1: boom",
                    "error_category": "target",
                    "metadata": {},
                }
                for name in ("quality", "exact")
            },
            "submission": {},
            "usage": {"prompt_tokens": 0, "completion_tokens": 0},
            "duration_s": 0.5,
        }
    )
    return rows


def _metric(label: str, kind: str, mean: float, passed: int, rule: str) -> dict[str, Any]:
    return {
        "label": label,
        "kind": kind,
        "n": 6,
        "graded": 5,
        "errors": 1,
        "mean": mean,
        "pass_rate": passed / 6,
        "passed": passed,
        "min": 0.0,
        "max": 0.95,
        "median": 0.675,
        "p50": 0.675,
        "p95": 0.9375,
        "p99": 0.9475,
        "rule": rule,
        "pass_rule": rule,
        "ci_mean": [0.35, 0.8],
        "ci_pass_rate": [0.1, 0.7],
    }


def _gate_counts(label: str, reason: str) -> dict[str, Any]:
    """The error-budget fields of a gate over this run's metric: 6 samples, 1 errored, budget 1."""
    return {
        "label": label,
        "max_errors": 1,
        "max_error_rate": None,
        "errors": 1,
        "graded": 5,
        "n": 6,
        "children": [],
        "reason": f"{reason}; 1 of 6 samples errored (within max_errors 1)",
    }


def summary(**over: Any) -> dict[str, Any]:
    """The summary.json of ``results()``: the quality gate (avg_score gte 0.75) fails."""
    doc: dict[str, Any] = {
        "schema_version": 1,
        "suite": "qa",
        "suite_file": "evals/qa/suite.yaml",
        "description": "Answers questions about the product.",
        "started_at": "2026-11-22T10:00:00+00:00",
        "finished_at": "2026-11-22T10:00:12+00:00",
        "duration_s": 12.0,
        "verdict": "failed",
        "verdict_reason": "Answer quality (quality): avg_score 0.5833, needs >= 0.75",
        "partial": False,
        "target": {"kind": "command"},
        "num_runs": 1,
        "n_samples": 6,
        "gate": {"passed": False},
        "gates": [
            {
                "metric_key": "quality",
                "metric": "avg_score",
                "op": "gte",
                "value": 0.75,
                "actual": 0.5833,
                "passed": False,
                "status": "failed",
                "model": None,
                "description": "quality avg_score gte 0.75",
                "interval": None,
                **_gate_counts("Answer quality", "avg_score 0.5833, needs >= 0.75"),
            }
        ],
        "metrics": {
            "quality": _metric("Answer quality", "score_model", 0.5833, 3, "score >= 0.75"),
            "exact": _metric("exact", "tool", 0.3333, 2, "score >= 1"),
        },
        "errors": {
            "total": 1,
            "samples": 1,
            "by_category": {"target": 1, "extraction": 0, "grading": 0},
            "groups": [
                {
                    "category": "target",
                    "grader": None,
                    "message": "agent exited with code 1: boom",
                    "count": 1,
                }
            ],
        },
        "flaky": [],
        "usage": {
            "target": {"prompt_tokens": 50, "completion_tokens": 25},
            "graders": {"quality": {"prompt_tokens": 1200, "completion_tokens": 300}},
            "total": {"prompt_tokens": 1250, "completion_tokens": 325},
            "cost_usd": 0.0123,
        },
        "cache": {"hits": 2},
        "retries": 1,
        "versions": {"ci_evals": "0.1.0", "python": "3.11.7", "openai": "3.54.0"},
        "baseline": None,
    }
    doc.update(copy.deepcopy(over))
    return doc


def passing_summary() -> dict[str, Any]:
    """The same run with a gate it passes (quality avg_score gte 0.5)."""
    doc = summary()
    gate = doc["gates"][0]
    gate.update(
        value=0.5,
        passed=True,
        status="passed",
        description="quality avg_score gte 0.5",
        reason="avg_score 0.5833 >= 0.5; 1 of 6 samples errored (within max_errors 1)",
    )
    doc["gate"] = {"passed": True}
    doc["verdict"], doc["verdict_reason"] = "passed", "1 of 1 gates passed"
    return doc


def baseline_summary() -> dict[str, Any]:
    """A run compared with a baseline: regressions, an improvement, new/removed samples, an inconclusive gate."""
    doc = summary()
    doc["gates"] = [
        {
            "metric_key": "quality",
            "metric": "avg_score",
            "op": "gte",
            "value": 0.5,
            "actual": 0.5833,
            "passed": False,
            "status": "inconclusive",
            "model": None,
            "description": "quality avg_score gte 0.5 @0.95",
            "interval": [0.35, 0.8],
            **_gate_counts(
                "Answer quality",
                "avg_score 0.5833, 0.95 interval [0.3500, 0.8000] straddles >= 0.5",
            ),
        },
        {
            "metric_key": "exact",
            "metric": "avg_score",
            "op": None,
            "value": None,
            "actual": 0.3333,
            "passed": False,
            "status": "failed",
            "model": None,
            "description": "exact avg_score max_regressions 1",
            "interval": None,
            "regressions": 2,
            **_gate_counts("exact", "2 regressions, max 1"),
        },
    ]
    doc["verdict_reason"] = (
        "Answer quality (quality): avg_score 0.5833, 0.95 interval [0.3500, 0.8000] "
        "straddles >= 0.5 (and 1 more gate)"
    )
    doc["baseline"] = {
        "folder": "baseline-results",
        "missing": None,
        "suite": "qa",
        "finished_at": "2026-11-21T09:00:00+00:00",
        "metrics": {
            "quality": {
                "baseline_mean": 0.7,
                "mean": 0.5833,
                "delta_mean": -0.1167,
                "baseline_pass_rate": 0.6667,
                "pass_rate": 0.5,
                "delta_pass_rate": -0.1667,
            },
            "exact": {
                "baseline_mean": 0.3333,
                "mean": 0.3333,
                "delta_mean": 0.0,
                "baseline_pass_rate": 0.3333,
                "pass_rate": 0.3333,
                "delta_pass_rate": 0.0,
            },
        },
        "regressions": [
            {"sample_id": 3, "model": None, "metric": "quality"},
            {"sample_id": 4, "model": None, "metric": "exact"},
        ],
        "improvements": [{"sample_id": 5, "model": None, "metric": "exact"}],
        "new": [6],
        "removed": [7],
    }
    return doc
