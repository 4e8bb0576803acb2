"""letta-evals 0.7-0.20 typed gates that combine metrics: ``weighted_average`` and ``logical``.

A ``kind: simple`` gate is one ordinary gate (see :mod:`ci_evals.suite.dialects`); these two are not:

* ``weighted_average``: each metric in ``weights`` is aggregated with ``aggregation``, the weights
  are normalised to sum to 1, and the weighted sum is compared with ``op``/``value``.
* ``logical``: ``operator: and|or`` over ``conditions``, each a simple condition (``metric_key``,
  ``aggregation``, ``op``, ``value``, ``pass_threshold``) or a nested logical gate.

Aggregations are letta-evals' (``runner.py::_compute_aggregation`` at 0.7.0-0.20.0): ``avg_score``
the mean, ``min``/``max``, ``median``/``p50``, ``p95``/``p99`` (numpy's linear percentile) and
``accuracy``, the share of samples scoring ``>= pass_threshold`` (default 1.0), given here as a
fraction (a threshold above 1 was converted from letta-evals' percentage when the suite loaded).
ci-evals' one deliberate difference: an errored sample is never left out. It fails ``accuracy``,
and a metric with more errored samples than the gate's error budget (``max_errors``, default 0)
makes every gate on it ``errored``, whatever the other samples scored.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, Literal

from pydantic import Field, field_validator

from ci_evals._util.errors import ConfigError
from ci_evals.config.specs import Strict, validate_model
from ci_evals.core.rule import OPS, SYMBOL, Op
from ci_evals.gating.gates import Metric
from ci_evals.gating.noise import stability
from ci_evals.gating.regression import absolute_stability, errors_stability, metric_se
from ci_evals.gating.verdict import budget_exceeded
from ci_evals.results.records import GateResult, MetricEntry


class Condition(Strict):
    """A leaf of a logical gate (letta-evals ``SimpleCondition``)."""

    kind: Literal["simple"] | None = None
    metric_key: str
    aggregation: Metric = "avg_score"
    op: Op
    value: float
    pass_threshold: float | None = None


class _Budget(Strict):
    max_errors: int | None = Field(default=None, ge=0)
    max_error_rate: float | None = Field(default=None, ge=0, le=1)


class WeightedGate(_Budget):
    kind: Literal["weighted_average"]
    aggregation: Metric
    weights: dict[str, float]
    op: Op
    value: float

    @field_validator("weights")
    @classmethod
    def _weights(cls, v: dict[str, float]) -> dict[str, float]:
        if not v:
            raise ValueError("weights cannot be empty")
        if any(w < 0 for w in v.values()):
            raise ValueError("weights must be non-negative")
        if not all(math.isfinite(w) for w in v.values()) or not math.isfinite(sum(v.values())):
            raise ValueError(
                "weights must be finite and sum to a finite number (they are normalised to sum to 1)"
            )
        if math.fsum(v.values()) == 0:
            raise ValueError("weights must sum to a non-zero value")
        return v


class LogicalGate(_Budget):
    kind: Literal["logical"]
    operator: Literal["and", "or"]
    conditions: list[Any]


TypedGate = WeightedGate | LogicalGate


def parse(
    raw: dict[str, Any],
    key: str,
    file: str | None,
    lines: dict[str, int] | None,
    *,
    nested: bool = False,
) -> TypedGate | Condition:
    """Validate one typed gate (recursively), naming the exact YAML path of any mistake."""
    kind = raw.get("kind") if isinstance(raw, dict) else None
    if kind == "weighted_average" and not nested:
        weighted: WeightedGate = validate_model(WeightedGate, raw, key, file, lines)
        return weighted
    if kind == "logical":
        gate: LogicalGate = validate_model(LogicalGate, raw, key, file, lines)
        if not gate.conditions:
            raise ConfigError(
                "conditions cannot be empty",
                file=file,
                key=f"{key}.conditions",
                line=(lines or {}).get(f"{key}.conditions"),
            )
        gate.conditions = [
            parse(c, f"{key}.conditions[{i}]", file, lines, nested=True)
            for i, c in enumerate(gate.conditions)
        ]
        return gate
    condition: Condition = validate_model(Condition, raw, key, file, lines)
    return condition


def metric_keys(gate: TypedGate | Condition) -> list[tuple[str, str]]:
    """Every (metric name, YAML sub-path) a gate reads, for checking them against the graders."""
    if isinstance(gate, Condition):
        return [(gate.metric_key, "metric_key")]
    if isinstance(gate, WeightedGate):
        return [(k, f"weights.{k}") for k in gate.weights]
    return [
        (name, f"conditions[{i}].{sub}")
        for i, c in enumerate(gate.conditions)
        for name, sub in metric_keys(c)
    ]


def describe(gate: TypedGate | Condition) -> str:
    if isinstance(gate, Condition):
        return f"{gate.metric_key} {gate.aggregation} {gate.op} {gate.value:g}"
    if isinstance(gate, WeightedGate):
        parts = " + ".join(f"{w:g}*{k}" for k, w in gate.weights.items())
        return f"weighted_average({parts}) {gate.aggregation} {gate.op} {gate.value:g}"
    return "(" + f" {gate.operator.upper()} ".join(describe(c) for c in gate.conditions) + ")"


def aggregate_value(
    aggregation: Metric, agg: MetricEntry, scores: Sequence[float], threshold: float | None
) -> float | None:
    """letta-evals' aggregation of one metric; ``scores`` are the graded scores, sorted.

    ``accuracy`` counts errored samples as failed (``agg["n"]`` includes them). None when no
    sample was graded.
    """
    if not scores:
        return None
    if aggregation == "accuracy":
        t = 1.0 if threshold is None else threshold
        return sum(1 for s in scores if s >= t) / agg["n"]
    return agg["mean"] if aggregation == "avg_score" else agg[aggregation]


MetricSource = Callable[[str], tuple[MetricEntry, list[float]]]
Budget = tuple[int | None, float | None]
"""A gate's error budget: (``max_errors``, ``max_error_rate``)."""


def evaluate(gate: TypedGate, metric: MetricSource, *, model: str | None = None) -> GateResult:
    """The summary.json ``gates[]`` entry of a typed gate, its sub-gates under ``children``.

    ``metric(name)`` gives a metric's aggregate (as summary.json has it) and its sorted graded scores.
    """
    out = _node(gate, metric, gate.max_errors, gate.max_error_rate)
    out["model"] = model
    return out


def _base(
    *,
    metric: str,
    label: str | None,
    description: str,
    budget: Budget,
    metric_key: str | None = None,
    op: str | None = None,
    value: float | None = None,
    actual: float | None = None,
    errors: int = 0,
    graded: int = 0,
    n: int = 0,
    children: list[GateResult] | None = None,
) -> GateResult:
    """A node not yet decided (``failed``, no reason), every key in the order summary.json has it."""
    return {
        "metric_key": metric_key,
        "metric": metric,
        "op": op,
        "value": value,
        "actual": actual,
        "passed": False,
        "status": "failed",
        "label": label,
        "description": description,
        "interval": None,
        "max_errors": budget[0],
        "max_error_rate": budget[1],
        "errors": errors,
        "graded": graded,
        "n": n,
        "reason": "",
        "children": children if children is not None else [],
    }


def _counts(out: GateResult, children: list[GateResult]) -> None:
    out["n"] = max(c["n"] for c in children)
    out["errors"] = max(c["errors"] for c in children)
    out["graded"] = min(c["graded"] for c in children)


def _leaf(
    name: str,
    aggregation: Metric,
    threshold: float | None,
    metric: MetricSource,
    budget: Budget,
    description: str,
) -> tuple[GateResult, MetricEntry, list[float]]:
    """One metric's entry, with the aggregate and scores it was read from (for its stability)."""
    agg, scores = metric(name)
    actual = aggregate_value(aggregation, agg, scores, threshold)
    over = budget_exceeded(agg["errors"], agg["n"], *budget)
    out = _base(
        metric_key=name,
        metric=aggregation,
        actual=actual,
        label=agg.get("label", name),
        description=description,
        budget=budget,
        errors=agg["errors"],
        graded=agg["graded"],
        n=agg["n"],
    )
    if over or actual is None:
        out["status"] = "errored"
        out["reason"] = over or (
            f"no sample was graded ({agg['errors']} of {agg['n']} errored)"
            if agg["n"]
            else "no sample ran"
        )
        out["stability"] = round(errors_stability(agg["errors"], agg["n"], *budget), 4)
    return out, agg, scores


def _node(
    gate: TypedGate | Condition,
    metric: MetricSource,
    max_errors: int | None,
    max_error_rate: float | None,
) -> GateResult:
    budget = (max_errors, max_error_rate)
    if isinstance(gate, Condition):
        out, agg, scores = _leaf(
            gate.metric_key, gate.aggregation, gate.pass_threshold, metric, budget, describe(gate)
        )
        out["op"], out["value"] = gate.op, gate.value
        actual = out["actual"]
        if out["status"] != "errored" and actual is not None:  # (errored: nothing to compare)
            ok = OPS[gate.op](actual, gate.value)
            out["status"], out["passed"] = ("passed", True) if ok else ("failed", False)
            sym = SYMBOL[gate.op]
            out["reason"] = (
                f"{gate.aggregation} {out['actual']:.4f} {sym} {gate.value:g}"
                if ok
                else f"{gate.aggregation} {out['actual']:.4f}, needs {sym} {gate.value:g}"
            )
            out["stability"] = round(
                absolute_stability(gate.aggregation, gate.op, gate.value, agg, actual, scores), 4
            )
        return out

    if isinstance(gate, WeightedGate):
        total = math.fsum(gate.weights.values())
        parts: list[tuple[GateResult, float]] = []  # each component and its normalised weight
        terms: list[tuple[float, float]] = []  # (weight, value) of each graded component
        ses: list[float] = []
        for name, w in gate.weights.items():
            child, agg, _ = _leaf(
                name, gate.aggregation, None, metric, budget, f"{name} {gate.aggregation}"
            )
            weight = w / total
            child["weight"] = weight
            parts.append((child, weight))
            value = child["actual"]
            if value is not None:
                terms.append((weight, value))
                ses.append(weight * metric_se(gate.aggregation, agg, value))
        children = [c for c, _ in parts]
        out = _base(
            metric="weighted_average",
            op=gate.op,
            value=gate.value,
            label=describe(gate),
            description=describe(gate),
            budget=budget,
            children=children,
        )
        out["aggregation"] = gate.aggregation
        _counts(out, children)
        errored = [c for c in children if c["status"] == "errored"]
        if errored:
            out["status"] = "errored"
            out["reason"] = "; ".join(f"{c['metric_key']}: {c['reason']}" for c in errored)
            out["stability"] = min(c["stability"] for c in errored)
        else:
            out["actual"] = weighted = math.fsum(w * v for w, v in terms)  # (every one graded)
            ok = OPS[gate.op](weighted, gate.value)
            out["status"], out["passed"] = ("passed", True) if ok else ("failed", False)
            sym = SYMBOL[gate.op]
            out["reason"] = (
                f"weighted {gate.aggregation} {out['actual']:.4f} {sym} {gate.value:g}"
                if ok
                else f"weighted {gate.aggregation} {out['actual']:.4f}, needs {sym} {gate.value:g}"
            )
            # the components' errors taken as independent; predictive: this run and a rerun both stray
            se = math.sqrt(math.fsum(s * s for s in ses))
            out["stability"] = round(stability(weighted, gate.value, math.sqrt(2.0) * se), 4)
        for c, weight in parts:  # a component has no verdict of its own: it shares the gate's
            c.setdefault("stability", out["stability"])
            if c["status"] != "errored":
                c["status"], c["passed"] = out["status"], out["passed"]
                c["reason"] = f"{gate.aggregation} {c['actual']:.4f} x weight {weight:.4f}"
        return out

    children = [_node(c, metric, max_errors, max_error_rate) for c in gate.conditions]
    out = _base(
        metric="logical",
        label=describe(gate),
        description=describe(gate),
        budget=budget,
        children=children,
    )
    out["operator"] = gate.operator
    _counts(out, children)
    statuses = [c["status"] for c in children]
    passed = sum(s == "passed" for s in statuses)
    if gate.operator == "and":
        status = (
            "passed"
            if passed == len(children)
            else ("failed" if "failed" in statuses else "errored")
        )
    else:
        status = "passed" if passed else ("errored" if "errored" in statuses else "failed")
    out["status"], out["passed"] = status, status == "passed"
    out["reason"] = f"{passed} of {len(children)} conditions passed ({gate.operator})"
    # about: the least stable condition decides
    out["stability"] = min(c["stability"] for c in children)
    return out
