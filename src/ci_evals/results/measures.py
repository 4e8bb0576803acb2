"""The built-in metrics: what an answer cost and how long it took, read from a results line.

A gate can name these without a grader (``metric_key: latency``). Each is read from what the
runner recorded for the sample (:func:`measure`), never recomputed from a clock or a price list
afterwards, so a merge, a ``report`` or a baseline computed later give the same figures:

========================  ========================================================================
``latency``               ``latency_s``: the target's own time for the sample, in seconds, without
                          ci-evals' queueing and rate-limit pauses (``queued_s``, reported apart)
``tokens``                the target's prompt + completion tokens (``usage``)
``prompt_tokens``         the target's prompt tokens
``completion_tokens``     the target's completion tokens
``cost_usd``              what the target's calls cost (``target.cost_usd``)
``steps``                 the agent's steps: model calls (Letta's ``step_count``)
``tool_calls``            tool calls in the trajectory
``judge_tokens``          tokens the graders' own model calls used (LLM and agent judges)
``judge_cost_usd``        what the graders' model calls cost
========================  ========================================================================

All are lower-is-better. A sample whose target failed has none (an error, counted against the
gate's error budget); an answer served from the LLM cache has no fresh latency (``cached``,
left out of latency's aggregates and counted apart); a cost no price is known for is
``unknown``, never 0, and names the model (a gate on it errors with that line).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from ci_evals.results.records import ResultRecord


@dataclass(frozen=True, slots=True)
class Builtin:
    """One built-in metric: its name, the label reports show, and its unit (``s``, ``$``, ``""``)."""

    name: str
    label: str
    unit: str
    judge: bool = False


BUILTINS: Final[dict[str, Builtin]] = {
    b.name: b
    for b in (
        Builtin("latency", "Latency", "s"),
        Builtin("tokens", "Tokens", ""),
        Builtin("prompt_tokens", "Prompt tokens", ""),
        Builtin("completion_tokens", "Completion tokens", ""),
        Builtin("cost_usd", "Cost", "$"),
        Builtin("steps", "Steps", ""),
        Builtin("tool_calls", "Tool calls", ""),
        Builtin("judge_tokens", "Judge tokens", "", judge=True),
        Builtin("judge_cost_usd", "Judge cost", "$", judge=True),
    )
}
"""Every built-in metric, in the order reports list them."""

BUILTIN_KIND: Final = "builtin"
"""The ``kind`` a built-in metric has in summary.json's ``metrics`` and ``config.graders``."""


@dataclass(frozen=True, slots=True)
class Reading:
    """One sample's value of a built-in metric: a ``value``; or ``errored`` (its target failed);
    or neither, with ``unknown`` (why no value is known: an unpriced model) or ``cached``."""

    value: float | None = None
    errored: bool = False
    cached: bool = False
    unknown: str | None = None


ERRORED: Final = Reading(errored=True)
_NO_LATENCY: Final = Reading(
    unknown="the target gave no latency (a recorded answer without its latency_s)"
)
CACHED: Final = Reading(cached=True)


def _num(value: Any) -> float | None:
    kind = type(value)
    if kind is float:
        return value if value == value else None  # not NaN
    return float(value) if kind is int else None  # (a bool is no number)


def _usage(usage: Any, key: str) -> float:
    if type(usage) is not dict and not isinstance(usage, Mapping):  # a parsed line's: a dict
        return 0.0
    return _num(usage.get(key)) or 0.0


def _judges(grades: Iterable[Any]) -> tuple[float, Reading]:
    """The graders' own calls, in one pass: their tokens, and their cost (unknown, naming the
    first such model, when a judge's model has no price)."""
    tokens = cost = 0.0
    unknown: Reading | None = None
    for grade in grades:
        meta = grade.get("metadata") if isinstance(grade, Mapping) else None
        if type(meta) is not dict and not isinstance(meta, Mapping):
            continue
        usage = meta.get("usage")
        tokens += _usage(usage, "prompt_tokens") + _usage(usage, "completion_tokens")
        if unknown is None:
            unpriced = meta.get("unpriced")
            if unpriced:
                unknown = Reading(unknown=_no_price(unpriced))
            else:
                cost += _num(meta.get("cost_usd")) or 0.0
    return tokens, unknown if unknown is not None else Reading(cost)


def _no_price(models: Any) -> str:
    names = models if isinstance(models, list) else [models]
    shown = ", ".join(repr(str(m)[:80]) for m in names[:3])
    return f"model {shown} has no known price"


_NO_COST: Final = Reading(unknown="the target reports no cost")
_NO_STEPS: Final = Reading(unknown="the target gave no steps")
_NO_TOOL_CALLS: Final = Reading(unknown="the target gave no tool_calls")
NAN: Final = float("nan")
_ALL_ERRORED: Final = [(i, ERRORED) for i in range(len(BUILTINS))]
_INDEX: Final = {name: i for i, name in enumerate(BUILTINS)}
"""A built-in metric's place in :func:`measure_all`'s lists."""
_LATENCY, _COST, _STEPS, _TOOL_CALLS, _JUDGE_COST = (
    _INDEX[n] for n in ("latency", "cost_usd", "steps", "tool_calls", "judge_cost_usd")
)


def measure_all(rec: ResultRecord) -> tuple[list[float], list[tuple[int, Reading]]]:
    """Every built-in metric of one results line, in :data:`BUILTINS` order, in one pass (what the
    aggregator reads per line; :func:`measure` is its reading of one metric): the values, NaN
    where there is none, and for each of those its index and :class:`Reading` (errored, cached,
    unknown)."""
    if rec.get("error"):
        return [NAN] * len(BUILTINS), _ALL_ERRORED
    missing: list[tuple[int, Reading]] = []
    usage = rec.get("usage")
    prompt, completion = _usage(usage, "prompt_tokens"), _usage(usage, "completion_tokens")
    latency = _num(rec.get("latency_s"))
    if latency is None:
        missing.append((_LATENCY, CACHED if rec.get("cache_hits") else _NO_LATENCY))
    target = rec.get("target")
    cost = _num(target.get("cost_usd")) if type(target) is dict else None
    if cost is None:
        unpriced = target.get("unpriced") if type(target) is dict else None
        missing.append((_COST, Reading(unknown=_no_price(unpriced)) if unpriced else _NO_COST))
    steps, calls = _num(rec.get("steps")), _num(rec.get("tool_calls"))
    if steps is None:
        missing.append((_STEPS, _NO_STEPS))
    if calls is None:
        missing.append((_TOOL_CALLS, _NO_TOOL_CALLS))
    judge_tokens = judge_cost = 0.0
    grades = (rec.get("grades") or {}).values()
    for grade in grades:
        if type(grade) is dict and grade.get("metadata"):  # a grade with metadata: judges' calls
            judge_tokens, judged = _judges(grades)
            if judged.value is None:
                missing.append((_JUDGE_COST, judged))
            judge_cost = judged.value or 0.0
            break
    values = [
        NAN if latency is None else latency,
        prompt + completion,
        prompt,
        completion,
        NAN if cost is None else cost,
        NAN if steps is None else steps,
        NAN if calls is None else calls,
        judge_tokens,
        NAN if missing and missing[-1][0] == _JUDGE_COST else judge_cost,
    ]
    return values, missing


def measure_some(rec: ResultRecord, names: Iterable[str]) -> list[Reading]:
    """Built-in metrics ``names`` of one results line, as :func:`measure_all` reads them
    (``KeyError`` for a name that is no built-in metric)."""
    values, missing = measure_all(rec)
    why = dict(missing)
    return [why.get(i) or Reading(values[i]) for i in index_of(names)]


def index_of(names: Iterable[str]) -> tuple[int, ...]:
    """Where built-in metrics ``names`` are in :func:`measure_all`'s lists (``KeyError`` for a
    name that is no built-in metric)."""
    return tuple(_INDEX[n] for n in names)


def measure(rec: ResultRecord, name: str) -> Reading:
    """Built-in metric ``name`` of one results line (:func:`measure_some` of one)."""
    return measure_some(rec, (name,))[0]
