"""The typed shapes of a results folder: one results.jsonl line, one grade, summary.json.

TypedDicts rather than models: a record stays the plain dict the runner writes and the reports
read (100k of them stream through a run, so no per-line object is built), and these types say
which keys that dict has. The README's output contract is the prose form of the same shapes;
``files`` checks a record from elsewhere against them.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict

Verdict = Literal["passed", "failed", "errored", "interrupted", "partial"]


class Grade(TypedDict, total=False):
    """One grader's outcome for one sample: a score in [0, 1] and pass/fail, or an ``error``
    (then ``score`` is None and the grade is counted against the error budget, never averaged)."""

    score: float | None
    passed: bool
    rationale: str | None
    error: str | None
    error_category: str | None
    metadata: dict[str, Any]


def make_grade(
    score: float | None = None,
    passed: bool = False,
    rationale: str | None = None,
    metadata: dict[str, Any] | None = None,
    *,
    error: str | None = None,
    category: str = "grading",
) -> Grade:
    """The one constructor of a grade. With ``error``, an errored grade: no score, not passed,
    its rationale the error unless one is given, counted against the error budget (``category``:
    ``grading``, ``target``, ``extraction``...). Without, a scored grade."""
    if error is not None:
        return {
            "score": None,
            "passed": False,
            "rationale": rationale or error,
            "error": error,
            "error_category": category,
            "metadata": metadata if metadata is not None else {},
        }
    return {
        "score": score,
        "passed": passed,
        "rationale": rationale,
        "error": None,
        "metadata": metadata if metadata is not None else {},
    }


class RecordError(TypedDict):
    """A sample the target could not answer: its category (``target``) and message."""

    category: str
    message: str


class ResultRecord(TypedDict, total=False):
    """One line of results.jsonl: one (model, sample, run) with its grades."""

    sample_id: str | int
    run: int
    model: str | None
    input: Any
    ground_truth: Any
    tags: list[str]
    submission: dict[str, Any]
    submission_same_as: dict[str, str]
    trajectory: dict[str, Any]
    target: dict[str, Any]
    usage: dict[str, int]
    duration_s: float | None
    error: RecordError | None
    grades: dict[str, Grade]
    truncated: dict[str, int]


class Shard(TypedDict, total=False):
    """summary.json ``shard``: which K of N this run was, and how many samples it split."""

    index: int
    count: int
    selected: int | None


class Summary(TypedDict, total=False):
    """summary.json: the run's verdict, gates, metrics and everything a later merge or baseline needs."""

    schema_version: int
    suite: str | None
    suite_file: str | None
    description: str | None
    started_at: str
    finished_at: str
    duration_s: float
    verdict: Verdict | None
    verdict_reason: str | None
    partial: bool
    interrupted_by: str
    target: dict[str, Any]
    num_runs: int
    reducer: str
    n_samples: int
    records: int
    gate: dict[str, Any] | None
    gates: list[dict[str, Any]]
    metrics: dict[str, dict[str, Any]]
    models: dict[str, Any]
    errors: dict[str, Any]
    flaky: Any
    usage: dict[str, Any]
    cache: Any
    retries: Any
    versions: dict[str, str]
    config: dict[str, Any]
    baseline: dict[str, Any] | None
    shard: Shard | None
    letta: dict[str, Any] | None
    merged_from: list[str]
    partial_reason: str
    workers: dict[str, Any]  # a run split across worker processes: {processes, failed}
