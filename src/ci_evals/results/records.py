"""The typed shapes of a results folder: one results.jsonl line, one grade, summary.json.

TypedDicts rather than models: a record stays the plain dict the runner writes and the reports
read (100k of them stream through a run, so no per-line object is built), and these types say
which keys that dict has. The README's output contract is the prose form of the same shapes;
``files`` checks a record from elsewhere against them.
"""

from __future__ import annotations

from typing import Any, Literal

# typing_extensions' TypedDict: pydantic validates these shapes (results.files), and on Python
# 3.11 it reads only this one's field metadata.
from typing_extensions import TypedDict

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
    target: dict[str, Any]  # what the target reported about the call: cost_usd, status, ...
    usage: dict[str, int]
    duration_s: float | None  # the sample's own time, without queueing
    queued_s: float  # time waited for a shared resource (a slot, a rate limit)
    retries: int  # attempts the target's calls retried
    replaced_chars: int  # characters neutralised in what the target answered
    error: RecordError | None
    grades: dict[str, Grade]
    truncated: dict[str, int]


class Shard(TypedDict, total=False):
    """summary.json ``shard``: which K of N this run was, and how many samples it split."""

    index: int
    count: int
    selected: int | None


class Selection(TypedDict, total=False):
    """summary.json ``selection``: the samples a ``--sample``/``--tag``/``--changed`` choice kept."""

    by: str
    selected: int
    total: int


class EndpointReport(TypedDict, total=False):
    """summary.json ``endpoints[]``: one LLM server's calls, throttling and concurrency."""

    endpoint: str
    provider: str
    calls: int
    rejected: int
    waited_s: float
    concurrency: int
    lowest_concurrency: int
    max_concurrent: int


class MetricEntry(TypedDict, total=False):
    """summary.json ``metrics.<name>`` (and ``models.<m>.metrics.<name>``): one metric's aggregate.

    Score aggregates cover the graded samples (null when none was); the pass rate counts every
    sample, errored ones as failed; both intervals are always given."""

    label: str
    kind: str
    n: int
    graded: int
    errors: int
    mean: float | None
    passed: int
    pass_rate: float | None
    min: float | None
    max: float | None
    median: float | None
    p50: float | None
    p95: float | None
    p99: float | None
    ci_mean: list[float] | None
    ci_pass_rate: list[float] | None
    ci_method: dict[str, str]
    rule: str
    pass_rule: str
    noise: dict[str, Any]  # judge repeats: their agreement and standard error


class GateResult(TypedDict, total=False):
    """summary.json ``gates[]``: one gate as decided (a logical gate holds its ``children``)."""

    metric_key: str
    metric: str
    op: str
    value: float | None
    actual: float | None
    model: str | None
    description: str
    label: str
    kind: str
    interval: list[float | None] | None
    max_errors: int
    max_error_rate: float | None
    errors: int
    graded: int
    n: int
    children: list[GateResult]
    status: str  # passed, failed, errored, no_baseline, ...
    passed: bool
    reason: str
    stability: float | None  # how often a rerun would reach the same decision
    undecided: bool
    tests: list[dict[str, Any]]  # a regression gate's statistical tests, one per check
    baseline: dict[str, Any]


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
    gates: list[GateResult]
    metrics: dict[str, MetricEntry]
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
    selection: Selection
    endpoints: list[EndpointReport]
    letta: dict[str, Any] | None
    merged_from: list[str]
    partial_reason: str
    workers: dict[str, Any]  # a run split across worker processes: {processes, failed}
