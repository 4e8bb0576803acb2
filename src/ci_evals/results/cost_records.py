"""summary.json's cost and speed blocks (part of the results contract, :mod:`ci_evals.results.records`):
``cost_speed`` (each built-in metric of :mod:`ci_evals.results.measures` over the run's lines,
the waits, the run's cost and its budget) and ``baseline.cost_speed`` (each before and now)."""

from __future__ import annotations

from typing import Annotated

from pydantic import ConfigDict, Field, with_config
from typing_extensions import TypedDict

_OPEN = ConfigDict(extra="ignore", strict=True)
Count = Annotated[int, Field(ge=0)]
Number = Annotated[float, Field(ge=-1e300, le=1e300)]


@with_config(_OPEN)
class MeasureEntry(TypedDict, total=False):
    """summary.json ``cost_speed.metrics.<name>``: one built-in metric (results.measures) over
    the run's results lines (every run of every sample)."""

    label: str
    unit: str  # "s", "$" or "" (a count)
    n: Count  # results lines read
    measured: Count  # lines with a value
    errors: Count  # lines whose target failed: no value, counted against a gate's error budget
    cached: Count  # latency: answers from the LLM cache, which have no fresh latency
    unknown: Count  # lines whose value is not known (an unpriced model)
    unknown_reasons: list[str]  # why, e.g. "model 'x' has no known price"
    mean: Number | None
    median: Number | None
    p95: Number | None
    p99: Number | None
    min: Number | None
    max: Number | None
    sum: Number | None


@with_config(_OPEN)
class BudgetReport(TypedDict, total=False):
    """summary.json ``cost_speed.budget``: the suite's budgets and what stopped."""

    max_steps: Count | None
    max_tokens: Count | None
    max_cost_usd: Number | None
    spent_usd: Number  # what this run's priced calls cost
    stopped: str | None  # why the run stopped calling (max_cost_usd spent): the verdict is errored
    stopped_samples: Count  # samples a budget stopped (errors of category "budget")


@with_config(_OPEN)
class CostSpeed(TypedDict, total=False):
    """summary.json ``cost_speed``: what the run's answers cost and how long they took."""

    metrics: dict[str, MeasureEntry]
    queued_s: Number  # the targets' time in ci-evals' queue and rate-limit pauses, summed
    throttled: Count  # the targets' calls a rate limit held back
    retries: Count  # retried attempts (targets and graders)
    cache_hits: Count  # calls answered from the LLM cache (targets and graders)
    cost_usd: Number | None  # the run's known cost: targets and judges, errored samples included
    unpriced: list[str]  # models that spent tokens at no known price
    budget: BudgetReport


@with_config(_OPEN)
class MeasureDelta(TypedDict, total=False):
    """summary.json ``baseline.cost_speed.<name>``: a built-in metric before and now."""

    baseline_mean: Number | None
    mean: Number | None
    baseline_p95: Number | None
    p95: Number | None
    baseline_sum: Number | None
    sum: Number | None
    change_mean: Number | None  # relative: (mean - baseline_mean) / baseline_mean
