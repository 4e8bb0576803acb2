"""Results folders for the report.html tests: summary.json with the shared contracts' fields
(verdict, graded/errors/label/rule, gate reason/max_errors/children, errors.groups, letta) and
results.jsonl lines with trajectories, two models, two runs, an errored sample and a baseline."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

XSS = [
    "<script>window.__pwned = 1</script>",
    '<img src=x onerror="window.__pwned = 2">',
    '<a href="javascript:window.__pwned = 3">click me</a>',
    "</script><script>window.__pwned = 4</script>",
]


def _traj(answer: str, tool: bool) -> dict[str, Any]:
    turn: list[dict[str, Any]] = [{"role": "user", "content": "question"}]
    if tool:
        turn += [
            {"role": "reasoning", "content": "I should look it up."},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "name": "web_search",
                        "arguments": '{"query": "capital of France"}',
                    }
                ],
            },
            {
                "role": "tool",
                "content": "Paris is the capital of France.",
                "tool_call_id": "call_1",
                "name": "web_search",
            },
        ]
    turn.append({"role": "assistant", "content": answer})
    return {"turns": [turn], "memory_blocks": {"human": "Name: Ada", "persona": "A helpful agent"}}


def record(
    sid: str,
    *,
    model: str | None = None,
    run: int = 0,
    score: float = 1.0,
    answer: str = "Paris",
    tags: tuple[str, ...] = ("geo",),
    error: str | None = None,
    tool: bool = True,
) -> dict[str, Any]:
    """One results.jsonl line graded by `answer` (pass at 1.0) and `style`."""
    rec: dict[str, Any] = {
        "sample_id": sid,
        "run": run,
        "model": model,
        "input": ["question", "follow-up"] if sid == "multi" else f"question {sid}",
        "ground_truth": "Paris",
        "tags": list(tags),
        "error": None,
    }
    if error:
        msg = f"target error: {error}"
        rec["error"] = {"category": "target", "message": error}
        rec["grades"] = {
            n: {
                "score": 0.0,
                "passed": False,
                "rationale": msg,
                "error": msg,
                "error_category": "target",
                "metadata": {},
            }
            for n in ("answer", "style")
        }
        rec["submission"] = {"answer": "", "style": ""}
        rec["usage"] = {"prompt_tokens": 0, "completion_tokens": 0}
    else:
        rec["grades"] = {
            "answer": {
                "score": score,
                "passed": score >= 1.0,
                "rationale": f"answer rationale {sid}",
                "error": None,
                "metadata": {},
            },
            "style": {
                "score": 0.5,
                "passed": True,
                "rationale": "fine",
                "error": None,
                "metadata": {},
            },
        }
        rec["submission"] = {"answer": answer, "style": answer}
        rec["usage"] = {"prompt_tokens": 10, "completion_tokens": 5}
        rec["trajectory"] = _traj(answer, tool)
    rec["duration_s"] = 0.25
    return rec


def summary(
    *,
    verdict: str | None = "failed",
    new_fields: bool = True,
    n: int = 6,
    baseline: Path | None = None,
) -> dict[str, Any]:
    """A summary.json: with the new contract fields, or as an older version wrote it."""
    metrics = {
        "answer": {
            "n": n,
            "errors": 1,
            "mean": 0.6,
            "pass_rate": 0.5,
            "ci_mean": [0.3, 0.9],
            "ci_pass_rate": [0.2, 0.8],
            "passed": 3,
        },
        "style": {
            "n": n,
            "errors": 1,
            "mean": 0.5,
            "pass_rate": 0.83,
            "ci_mean": [0.5, 0.5],
            "ci_pass_rate": [0.4, 0.97],
            "passed": 5,
        },
    }
    gate = {
        "metric_key": "answer",
        "metric": "accuracy",
        "op": "gte",
        "value": 0.8,
        "actual": 0.5,
        "passed": False,
        "status": "failed",
        "description": "answer accuracy gte 0.8",
    }
    s: dict[str, Any] = {
        "schema_version": 1,
        "suite": "geo-suite",
        "description": "Capitals <b>bold?</b>",
        "started_at": "2026-11-23T10:00:00+00:00",
        "duration_s": 12.5,
        "partial": False,
        "target": {"kind": "letta_agent"},
        "num_runs": 2,
        "reducer": "mean",
        "n_samples": 3,
        "records": n,
        "gate": {"passed": False},
        "gates": [gate],
        "metrics": metrics,
        "errors": {"total": 1, "by_category": {"target": 1, "extraction": 0, "grading": 0}},
        "flaky": [],
        "usage": {"total": {"prompt_tokens": 50, "completion_tokens": 25}, "cost_usd": 0.0123},
        "versions": {"ci_evals": "0.1.0", "python": "3.11.7"},
        "models": {"gpt-a": {"metrics": metrics}},
    }
    if new_fields:
        s["verdict"] = verdict
        s["config"] = {  # what a baseline comparison matches samples by (rules, runs, reducer)
            "graders": {
                "answer": {"label": "Answer correct", "kind": "tool", "rule": ["gte", 1.0]},
                "style": {"label": "Style", "kind": "tool", "rule": ["gte", 0.5]},
            },
            "gates": [],
            "num_runs": 2,
            "reducer": "mean",
        }
        metrics["answer"].update(graded=n - 1, label="Answer correct", rule="score >= 1")
        metrics["style"].update(graded=n - 1, label="Style", rule="score >= 0.5")
        gate.update(
            label="Answer gate",
            max_errors=0,
            errors=1,
            graded=n - 1,
            n=n,
            reason="1 of 6 samples errored (max_errors 0)",
            children=[
                {
                    "metric_key": "style",
                    "metric": "avg_score",
                    "op": "gte",
                    "value": 0.4,
                    "actual": 0.5,
                    "passed": True,
                    "status": "passed",
                    "label": "Style sub-gate",
                    "reason": "avg_score 0.500 >= 0.4",
                    "children": [],
                }
            ],
        )
        s["errors"]["groups"] = [
            {"category": "target", "grader": None, "message": "boom: agent crashed", "count": 1}
        ]
        s["letta"] = {
            "leftover_agents": [{"id": "agent-123", "name": "eval-agent", "error": "HTTP 500"}],
            "kept_agents": [],
        }
    if baseline is not None:
        s["baseline"] = {
            "folder": str(baseline),
            "metrics": {"answer": {"delta_mean": -0.2, "delta_pass_rate": -0.25}},
            "regressions": [{"sample_id": "s2", "model": "gpt-a", "metric": "answer"}],
            "improvements": [],
            "new": [],
            "removed": [],
        }
    return s


def records() -> list[dict[str, Any]]:
    """Three samples x two models (gpt-a, gpt-b) x ... one run each, plus a second run of s1/gpt-a."""
    return [
        record("s1", model="gpt-a", score=1.0),
        record("s1", model="gpt-a", run=1, score=1.0, answer="Paris again"),
        record("s1", model="gpt-b", score=0.0, answer="Lyon", tags=("geo", "hard")),
        record("s2", model="gpt-a", score=0.0, answer="Marseille", tags=("hard",)),
        record("s3", model="gpt-a", score=0.0, answer=XSS[0], tags=("xss",)),
        record("s4", model="gpt-b", error="boom: agent crashed", tags=("misc",)),
    ]


def write_folder(folder: Path, summary_doc: dict[str, Any], recs: list[dict[str, Any]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "summary.json").write_text(json.dumps(summary_doc), encoding="utf-8")
    with (folder / "results.jsonl").open("w", encoding="utf-8") as fh:
        for r in recs:
            fh.write(json.dumps(r) + "\n")
    return folder


def baseline_folder(folder: Path) -> Path:
    """The baseline: s2 passed there (so it regressed), s1 as now."""
    recs = [
        record("s1", model="gpt-a", score=1.0),
        record("s2", model="gpt-a", score=1.0),
        record("s3", model="gpt-a", score=0.0),
    ]
    recs[1]["grades"]["answer"]["rationale"] = "baseline said Paris"
    return write_folder(folder, summary(verdict="passed"), recs)
