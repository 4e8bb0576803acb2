"""What a summary.json and a results.jsonl record from elsewhere must look like to be read.

The checks cover every key the gates, the merge and the reports read (so a foreign value is one
line naming the key, not a crash in a renderer); keys a run may add later are left alone. Used by
:mod:`ci_evals.results.files` for every trust level but ``OWN``.
"""

from __future__ import annotations

import json
import math
from typing import Any

from ci_evals._util.text import shorten

VERDICTS = ("passed", "failed", "errored", "interrupted", "partial")


def _number(value: Any, *, none: bool = False) -> bool:
    """A finite JSON number (an integer too large for a float is not: math would overflow on it)."""
    if value is None:
        return none
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return -1e300 < value < 1e300 if isinstance(value, int) else math.isfinite(value)


def _count(value: Any) -> bool:
    return value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 0)


def _of(value: Any, *types: type) -> bool:
    return value is None or isinstance(value, types)


def summary_problem(summary: dict[str, Any]) -> str | None:
    """What makes a summary.json from elsewhere unusable (a baseline, a shard, an artifact), or None."""
    metrics = summary.get("metrics", {})
    if not isinstance(metrics, dict):
        return "'metrics' must be an object"
    for name, m in metrics.items():
        if not (
            isinstance(m, dict)
            and _number(m.get("mean"), none=True)
            and _number(m.get("pass_rate"), none=True)
        ):
            return f"metrics.{shorten(str(name), 40)} must be an object with numeric 'mean' and 'pass_rate'"
    if not isinstance(summary.get("config", {}), dict):
        return "'config' must be an object"
    verdict = summary.get("verdict")
    if verdict is not None and verdict not in VERDICTS:
        return f"'verdict' must be one of {', '.join(VERDICTS)}, not {shorten(json.dumps(verdict), 40)}"
    shard = summary.get("shard")
    if shard is not None and not (
        isinstance(shard, dict)
        and _count(shard.get("index"))
        and _count(shard.get("count"))
        and shard.get("index")
        and shard.get("count")
        and shard["index"] <= shard["count"]
        and _count(shard.get("selected"))
    ):
        return "'shard' must be an object with integers 1 <= 'index' <= 'count' (and 'selected')"
    for key in ("n_samples", "records"):
        if not _count(summary.get(key)):
            return f"'{key}' must be a non-negative integer"
    if not _number(summary.get("duration_s"), none=True):
        return "'duration_s' must be a number"
    for key in (
        "suite",
        "suite_file",
        "description",
        "started_at",
        "verdict_reason",
        "partial_reason",
    ):
        if not _of(summary.get(key), str):
            return f"'{key}' must be a string"
    for key in ("gate", "errors", "baseline", "models", "usage", "letta", "target"):
        if not _of(summary.get(key), dict):
            return f"'{key}' must be an object"
    if not _of(summary.get("partial"), bool):
        return "'partial' must be true or false"
    if summary.get("interrupted_by") is not None and summary["interrupted_by"] not in (
        "SIGINT",
        "SIGTERM",
        "SIGHUP",
    ):
        return "'interrupted_by' must name a signal (SIGINT, SIGTERM or SIGHUP)"
    gates = summary.get("gates")
    if not (gates is None or (isinstance(gates, list) and all(isinstance(g, dict) for g in gates))):
        return "'gates' must be a list of objects"
    if not _of((summary.get("baseline") or {}).get("folder"), str):
        return "baseline.folder must be a string"
    if not _of(summary.get("versions"), dict):
        return "'versions' must be an object"
    errors = summary.get("errors") or {}
    if not (
        _of(errors.get("by_category"), dict)
        and all(_count(v) for v in (errors.get("by_category") or {}).values())
        and _count(errors.get("total"))
        and _count(errors.get("samples"))
    ):
        return "errors.total, errors.samples and errors.by_category must hold non-negative integers"
    groups = errors.get("groups")
    if not (
        groups is None
        or (
            isinstance(groups, list)
            and all(isinstance(g, dict) and _count(g.get("count")) for g in groups)
        )
    ):
        return "errors.groups must be a list of objects with a 'count'"
    if not _count(summary.get("num_runs")):
        return "'num_runs' must be a non-negative integer"
    for name, m in metrics.items():
        problem = _entry_problem(m, ("min", "max", "median"), ("ci_mean", "ci_pass_rate"))
        if problem:
            return f"metrics.{shorten(str(name), 40)}.{problem}"
    return _gates_problem(gates or [], "gates")


_COUNTS = ("n", "graded", "errors", "max_errors")
_TEXTS = (
    "status",
    "reason",
    "description",
    "label",
    "metric_key",
    "metric",
    "op",
    "model",
    "kind",
    "rule",
)


def _entry_problem(
    entry: dict[str, Any], numbers: tuple[str, ...], intervals: tuple[str, ...]
) -> str | None:
    """What is wrong with one metric or gate entry as the reports read it ("key must be ..."), or None."""
    for key in numbers:
        if not _number(entry.get(key), none=True):
            return f"{key} must be a number"
    for key in _COUNTS:
        if not _count(entry.get(key)):
            return f"{key} must be a non-negative integer"
    for key in _TEXTS:
        if not _of(entry.get(key), str):
            return f"{key} must be a string"
    for key in intervals:
        span = entry.get(key)
        if span is not None and not (
            isinstance(span, list) and len(span) == 2 and all(_number(x, none=True) for x in span)
        ):
            return f"{key} must be a list of two numbers"
    return None


def _gates_problem(gates: list[dict[str, Any]], where: str, depth: int = 0) -> str | None:
    for i, gate in enumerate(gates):
        problem = _entry_problem(gate, ("actual", "value", "max_error_rate"), ("interval",))
        children = gate.get("children")
        if problem is None and not (
            children is None
            or (
                isinstance(children, list)
                and depth < 20
                and all(isinstance(c, dict) for c in children)
            )
        ):
            problem = "children must be a list of objects"
        if problem is None and children:
            problem = _gates_problem(children, f"{where}[{i}].children", depth + 1)
            if problem:
                return problem
        if problem:
            return f"{where}[{i}].{problem}"
    return None


def is_result_record(rec: Any) -> bool:
    """The shape every results.jsonl line of ci-evals has (what ``--resume`` and ``merge`` need)."""
    return isinstance(rec, dict) and "sample_id" in rec and isinstance(rec.get("grades"), dict)


def record_problem(rec: Any) -> str | None:
    """What makes a results.jsonl record from elsewhere unusable (baseline, merge, resume, report), or None."""
    if not is_result_record(rec):
        return "not a ci-evals results record (it needs 'sample_id' and 'grades')"
    sid, run = rec.get("sample_id"), rec.get("run", 0)
    if isinstance(sid, bool) or not isinstance(sid, (str, int)):
        return "'sample_id' must be a string or an integer"
    if isinstance(run, bool) or not isinstance(run, int) or run < 0:
        return "'run' must be a non-negative integer"
    if rec.get("model") is not None and not isinstance(rec["model"], str):
        return "'model' must be a string or null"
    error = rec.get("error")
    if error is not None and not (
        isinstance(error, dict) and isinstance(error.get("message"), str)
    ):
        return "'error' must be null or an object with a 'message'"
    if not _number(rec.get("duration_s"), none=True):
        return "'duration_s' must be a number"
    grades = rec.get("grades")
    if not isinstance(grades, dict):
        return "'grades' must be an object"
    for name, grade in grades.items():  # an errored grade has no score (null)
        if not isinstance(grade, dict) or not _number(
            grade.get("score"), none=bool(grade.get("error"))
        ):
            return f"grades.{shorten(str(name), 40)} must be an object with a numeric 'score'"
        if grade.get("error") is not None and not isinstance(grade["error"], str):
            return f"grades.{shorten(str(name), 40)}.error must be a string or null"
    return _parts_problem(rec)


def _parts_problem(rec: dict[str, Any]) -> str | None:
    """The optional parts the reports read: each absent, or of its one shape."""
    if not _of(rec.get("tags"), list):
        return "'tags' must be a list"
    for key in ("submission", "submission_same_as", "usage", "truncated"):
        if not _of(rec.get(key), dict):
            return f"'{key}' must be an object"
    if not all(_count(v) for v in (rec.get("usage") or {}).values()):
        return "'usage' must hold non-negative integers"
    traj = rec.get("trajectory")
    if traj is None:
        return None
    if not isinstance(traj, dict):
        return "'trajectory' must be an object"
    if not _of(traj.get("memory_blocks"), dict):
        return "trajectory.memory_blocks must be an object"
    turns = traj.get("turns")
    if not (turns is None or (isinstance(turns, list) and all(isinstance(t, list) for t in turns))):
        return "trajectory.turns must be a list of lists"
    for turn in turns or ():
        for m in turn:
            if (
                not isinstance(m, dict)
                or not _of(m.get("tool_calls"), list)
                or not all(isinstance(t, dict) for t in m.get("tool_calls") or ())
            ):
                return "trajectory.turns must hold message objects (their tool_calls a list of objects)"
    return None
