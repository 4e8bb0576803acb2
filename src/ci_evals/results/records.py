"""The results contract, written once: one results.jsonl line, one grade, one gate result,
summary.json.

TypedDicts rather than models: a record stays the plain dict the runner writes and the reports
read (100k of them stream through a run, so no per-line object is built), and these types say
which keys that dict has. The same definitions are what a folder from elsewhere is validated
against (:mod:`ci_evals.results.contract`, pydantic), and what the published JSON Schemas
(docs/schemas/) are generated from: the ``Annotated`` constraints below (a count is a
non-negative integer, a number is finite) are read by pydantic and invisible to the type checker.
Keys a TypedDict does not name are left alone, neither checked nor dropped (validation only
checks, the reader keeps the document it read): a later version may add fields (docs/reference.md,
the output contract).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired, Required

from pydantic import ConfigDict, Field, with_config

# typing_extensions' TypedDict: pydantic validates these shapes, and on Python 3.11 it reads
# only this one's field metadata.
from typing_extensions import TypedDict

from ci_evals.core.trajectory import MessageDict
from ci_evals.results.cost_records import BudgetReport as BudgetReport
from ci_evals.results.cost_records import CostSpeed as CostSpeed
from ci_evals.results.cost_records import MeasureDelta as MeasureDelta
from ci_evals.results.cost_records import MeasureEntry as MeasureEntry

_OPEN = ConfigDict(extra="ignore", strict=True)

Verdict = Literal["passed", "failed", "errored", "interrupted", "partial"]
StopSignal = Literal["SIGINT", "SIGTERM", "SIGHUP"]
"""The signal that interrupted a run (summary.json ``interrupted_by``)."""
Count = Annotated[int, Field(ge=0)]
"""A non-negative integer."""
Number = Annotated[float, Field(ge=-1e300, le=1e300)]
"""A finite number (JSON's integers too, unless too large for a float)."""
Interval = Annotated[list[Number | None], Field(min_length=2, max_length=2)]
"""A confidence interval, [low, high]."""


@with_config(_OPEN)
class Grade(TypedDict, total=False):
    """One grader's outcome for one sample: a score in [0, 1] and pass/fail, or an ``error``
    (then ``score`` is None and the grade is counted against the error budget, never averaged)."""

    score: Number | None
    passed: bool
    rationale: Any
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


@with_config(_OPEN)
class RecordError(TypedDict):
    """A sample the target could not answer: its category (``target``) and message."""

    category: NotRequired[str]
    message: str


@with_config(_OPEN)
class Message(MessageDict, total=False):
    """One message of a trajectory turn: ``core.trajectory.MessageDict``, what ``Message.to_dict`` gives."""


@with_config(_OPEN)
class Trajectory(TypedDict, total=False):
    """A record's ``trajectory``: the target's turns of messages and the agent's memory blocks."""

    turns: list[list[Message]]
    memory_blocks: dict[str, Any]


@with_config(_OPEN)
class ResultRecord(TypedDict, total=False):
    """One line of results.jsonl: one (model, sample, run) with its grades."""

    sample_id: Required[str | int]
    run: Count
    model: str | None
    input: Any
    ground_truth: Any
    tags: list[Any]
    submission: dict[str, Any]
    submission_same_as: dict[str, Any]
    trajectory: Trajectory
    target: dict[str, Any]  # what the target reported about the call: cost_usd, status, ...
    usage: dict[str, Count]
    duration_s: Number | None  # the sample's own time (target and graders), without queueing
    queued_s: Number  # time the target waited for a shared resource (a slot, a rate limit)
    latency_s: Number | None  # the target's own time; null: answered from the LLM cache
    steps: Count  # the agent's steps (model calls)
    tool_calls: Count  # tool calls in the trajectory
    retries: Count  # attempts the target's calls retried
    replaced_chars: Count  # characters neutralised in what the target answered
    cache_hits: Count  # the target's LLM calls answered from the cache
    throttled: Count  # the target's LLM calls a rate limit held back
    error: RecordError | None
    grades: Required[dict[str, Grade]]
    truncated: dict[str, Any]


@with_config(_OPEN)
class Shard(TypedDict, total=False):
    """summary.json ``shard``: which K of N this run was, and how many samples it split."""

    index: Annotated[int, Field(ge=1)]
    count: Annotated[int, Field(ge=1)]
    selected: Count | None


@with_config(_OPEN)
class Selection(TypedDict, total=False):
    """summary.json ``selection``: the samples a ``--sample``/``--tag``/``--changed`` choice kept."""

    by: list[str]  # the options that chose: --sample-id, --sample-pattern, --only-failed, ...
    selected: Count
    total: Count


@with_config(_OPEN)
class EndpointReport(TypedDict, total=False):
    """summary.json ``endpoints[]``: one LLM server's calls, throttling and concurrency."""

    endpoint: str
    provider: str
    calls: Count
    rejected: Count
    waited_s: Number
    concurrency: Count
    lowest_concurrency: Count
    max_concurrent: Count
    rpm: Number  # the request rate it was paced at, and where it came from
    rpm_from: Literal["settings", "server"]
    tpm: Number
    tpm_from: Literal["settings", "server"]
    stopped: str  # why the endpoint was stopped (its breaker): the run errored


@with_config(_OPEN)
class MetricEntry(TypedDict, total=False):
    """summary.json ``metrics.<name>`` (and ``models.<m>.metrics.<name>``): one metric's aggregate.

    Score aggregates cover the graded samples (null when none was); the pass rate counts every
    sample, errored ones as failed; both intervals are always given."""

    label: str | None
    kind: str | None
    n: Count
    graded: Count
    errors: Count
    mean: Number | None
    passed: Count
    pass_rate: Number | None
    min: Number | None
    max: Number | None
    median: Number | None
    p50: Number | None
    p95: Number | None
    p99: Number | None
    ci_mean: Interval | None
    ci_pass_rate: Interval | None
    ci_method: dict[str, Any]
    sum: Number | None  # a built-in metric (results.measures): its total over every line
    rule: str | None
    pass_rule: str | None
    noise: dict[str, Any]  # judge repeats: their agreement and standard error


@with_config(_OPEN)
class RegressionTest(TypedDict, total=False):
    """A regression gate's ``tests[]``: the check, the test it used and its outcome."""

    check: str
    test: str
    n: Count
    change: Number | None
    interval: Interval | None
    p_value: Number | None
    confidence: Number
    regressions: Count
    improvements: Count


@with_config(_OPEN)
class GateResult(TypedDict, total=False):
    """summary.json ``gates[]``: one gate as decided (a logical gate holds its ``children``)."""

    metric_key: str | None
    metric: str | None
    op: str | None  # none on a regression gate (its checks are in ``tests``)
    value: Number | None
    actual: Number | None
    model: str | None
    description: str | None
    label: str | None
    kind: str | None
    rule: str | None
    interval: Interval | None
    max_errors: Count | None
    max_error_rate: Number | None
    errors: Count
    graded: Count
    n: Count
    children: list[GateResult]
    status: str  # passed, failed, errored, no_baseline, ...
    passed: bool
    reason: str
    stability: Number  # how often a rerun would reach the same decision
    weight: Number  # a weighted_average gate's component: its normalised weight
    aggregation: str  # ... and how its grader's scores were aggregated
    operator: Literal["and", "or"]  # a logical gate
    # a regression gate (``max_drop``, ``max_regressions``): the baseline's facts and its tests
    noisy: bool  # decided by a statistical test (a judge, or repeats that disagree)
    tests: list[RegressionTest]  # one per check
    baseline_value: Number | None
    drop: Number | None
    max_drop: Number | None
    increase: Number | None  # max_increase: the relative increase from the baseline value
    max_increase: Number | None
    regressions: Count
    improvements: Count
    max_regressions: Count


@with_config(_OPEN)
class ErrorGroup(TypedDict, total=False):
    """summary.json ``errors.groups[]``: errors of one kind, with how many and a few samples."""

    count: Count
    category: str
    grader: str | None
    message: str


@with_config(_OPEN)
class ErrorsBlock(TypedDict, total=False):
    """summary.json ``errors``: how many grades and samples errored, by category and grouped."""

    total: Count
    samples: Count
    by_category: dict[str, Count]
    groups: list[ErrorGroup]


@with_config(_OPEN)
class BaselineBlock(TypedDict, total=False):
    """summary.json ``baseline``: the folder compared against and the per-metric comparison."""

    folder: str
    missing: str | None  # why the comparison could not be made (regression gates: no_baseline)
    suite: str | None
    finished_at: str | None
    metrics: dict[str, BaselineMetric]
    regressions: list[SampleChange]
    improvements: list[SampleChange]
    new: list[str | int]
    removed: list[str | int]
    cost_speed: dict[str, MeasureDelta]


@with_config(_OPEN)
class BaselineMetric(TypedDict, total=False):
    """summary.json ``baseline.metrics.<name>``: the metric before and now."""

    baseline_mean: Number | None
    mean: Number | None
    delta_mean: Number | None
    baseline_pass_rate: Number | None
    pass_rate: Number | None
    delta_pass_rate: Number | None
    baseline_noise: dict[str, Any]


@with_config(_OPEN)
class SampleChange(TypedDict, total=False):
    """summary.json ``baseline.regressions[]`` / ``improvements[]``: one sample's grade that flipped."""

    sample_id: str | int
    model: str | None
    metric: str


@with_config(_OPEN)
class LettaAgent(TypedDict, total=False):
    """An agent a run created on the Letta server and did not delete: kept on purpose, or left over."""

    id: str
    name: str | None
    error: str  # a leftover: why it could not be deleted


@with_config(_OPEN)
class LettaBlock(TypedDict, total=False):
    """summary.json ``letta``: the agents a run left on the server, and which server."""

    leftover_agents: list[LettaAgent]
    kept_agents: list[LettaAgent]
    unanswered_imports: list[str]  # imports' names or 'agent_script f.py:fn' cut off unanswered
    base_url: str


@with_config(_OPEN)
class Workers(TypedDict, total=False):
    """summary.json ``workers``: a run split across worker processes."""

    processes: Count
    failed: list[str]


@with_config(_OPEN)
class GateFlag(TypedDict, total=False):
    """summary.json ``gate``: true exactly when the verdict is ``passed``."""

    passed: bool


@with_config(_OPEN)
class Summary(TypedDict, total=False):
    """summary.json: the run's verdict, gates, metrics and everything a later merge or baseline needs."""

    schema_version: int
    suite: str | None
    suite_file: str | None
    description: str | None
    started_at: str
    finished_at: str
    duration_s: Number
    verdict: Verdict | None
    verdict_reason: str | None
    partial: bool
    interrupted_by: StopSignal
    target: dict[str, Any]
    num_runs: Count
    reducer: str
    n_samples: Count
    records: Count
    gate: GateFlag | None
    gates: list[GateResult]
    metrics: dict[str, MetricEntry]
    models: dict[str, Any]
    errors: ErrorsBlock
    flaky: Any
    usage: dict[str, Any]
    cost_speed: CostSpeed
    cache: Any
    retries: Any
    versions: dict[str, Any]
    config: dict[str, Any]
    baseline: BaselineBlock | None
    shard: Shard | None
    selection: Selection
    endpoints: list[EndpointReport]
    letta: LettaBlock | None
    merged_from: list[str]
    partial_reason: str
    workers: Workers
