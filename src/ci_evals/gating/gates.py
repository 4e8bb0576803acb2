"""Gates: the suite's verdict from its aggregates (and, for regression gates, a baseline).

A gate compares one aggregate of one metric with a threshold. Aggregates: ``avg_score`` (mean),
``min``, ``max``, ``median``, ``p50``, ``p95``, ``p99`` over the samples that were graded, and
``accuracy`` (the metric's pass rate over every sample, errored samples counting as failed). The
per-sample rule of a metric is its own (see ``ci_evals.suite.loader``): this module only reads it.

Errors fail in every direction: each gate has an error budget (``max_errors``, default 0, and an
optional ``max_error_rate``); a metric with more errored samples than that fails the gate with
status ``errored`` whatever its value, and so does a metric with no graded sample at all.

Regression gates (``max_drop``, ``max_regressions``) need a baseline; without one (or when the
baseline lacks the metric) they report ``no_baseline`` and pass or fail per
``on_missing_baseline``. On a deterministic grader they are exact, as written. On a noisy one (an
LLM or agent judge, or repeats that disagree) they decide on paired evidence
(:mod:`ci_evals.gating.regression`): they fail only when the drop, or the excess of regressions
over improvements, is past the limit *and* more than noise explains at the gate's confidence
(0.95 by default); past the limit but within noise, they report ``undecided``, which passes and is
flagged. Every gate carries ``stability``: how often a rerun would give the same status. ``confidence`` makes a gate pass only when the whole interval clears the
threshold, and report ``inconclusive`` when it straddles it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import model_validator

from ci_evals.config.specs import Strict
from ci_evals.core.rule import OPS, SYMBOL, Op
from ci_evals.gating.regression import (
    GateFacts,
    absolute_stability,
    errors_stability,
    regression_checks,
)
from ci_evals.gating.stats import bootstrap_mean, wilson
from ci_evals.gating.verdict import budget_exceeded
from ci_evals.results.records import GateResult, MeasureEntry, MetricEntry

Metric = Literal["avg_score", "accuracy", "min", "max", "median", "p50", "p95", "p99", "sum"]


class GateSpec(Strict):
    metric_key: str | None = None
    metric: Metric = "avg_score"
    op: Op | None = None
    value: float | None = None
    pass_op: Op | None = None
    pass_value: float | None = None
    confidence: float | None = None
    max_drop: float | None = None
    max_regressions: int | None = None
    max_increase: float | None = None
    on_missing_baseline: Literal["pass", "fail"] = "pass"
    max_errors: int | None = None
    max_error_rate: float | None = None

    @model_validator(mode="after")
    def _consistent(self) -> GateSpec:
        regression = self.is_regression
        if not regression and self.value is None:
            raise ValueError(
                "a gate needs 'op' and 'value' (or 'max_drop'/'max_regressions'/'max_increase')"
            )
        if self.op is not None and self.value is None:
            raise ValueError("'op' and 'value' go together")
        # a value without an op: lower-is-better metrics (latency, cost_usd...) default to 'lte';
        # the suite's loader decides, knowing which metric the gate reads
        if self.metric == "accuracy":
            for name in ("value", "pass_value"):
                v = getattr(self, name)
                if name == "value" and v is not None and v > 1:
                    raise ValueError(
                        f"accuracy is a fraction in [0, 1]; value {v:g} looks like a percentage "
                        f"(use {v / 100:g})"
                    )
        if self.confidence is not None:
            if not 0 < self.confidence < 1:
                raise ValueError("'confidence' must be between 0 and 1, e.g. 0.95")
            if self.metric not in ("avg_score", "accuracy"):
                raise ValueError("'confidence' applies to the avg_score and accuracy metrics only")
            if self.op == "eq":
                raise ValueError("'confidence' cannot be used with op 'eq'")
        if self.max_drop is not None and self.max_drop < 0:
            raise ValueError("'max_drop' must be >= 0")
        if self.max_regressions is not None and self.max_regressions < 0:
            raise ValueError("'max_regressions' must be >= 0")
        if self.max_increase is not None and not 0 <= self.max_increase < 1e12:
            raise ValueError(
                "'max_increase' is a relative increase >= 0 (0.2 allows 20 % more than the baseline)"
            )
        if self.metric == "sum" and self.confidence is not None:
            raise ValueError("'confidence' applies to the avg_score and accuracy metrics only")
        check_budget(self.max_errors, self.max_error_rate)
        return self

    @property
    def is_regression(self) -> bool:
        """Whether the gate compares with a baseline (``max_drop``, ``max_regressions``,
        ``max_increase``)."""
        return (
            self.max_drop is not None
            or self.max_regressions is not None
            or self.max_increase is not None
        )

    def explicit_rule(self) -> tuple[str, float] | None:
        """The per-sample rule this gate states (``pass_op``/``pass_value``), if any."""
        if self.pass_value is None and self.pass_op is None:
            return None
        return self.pass_op or "gte", 1.0 if self.pass_value is None else self.pass_value

    def sample_rule(self) -> tuple[str, float]:
        """The per-sample pass rule (op, threshold) this gate implies: its ``pass_op``/``pass_value``,
        else score >= 1.0 for ``accuracy``, else its own ``op``/``value`` (letta-evals 0.5)."""
        explicit = self.explicit_rule()
        if explicit is not None:
            return explicit
        if self.metric == "accuracy" or self.op is None or self.value is None:
            return "gte", 1.0  # (op and value go together)
        return self.op, self.value

    def describe(self) -> str:
        parts = [self.metric_key or "?", self.metric]
        if self.op is not None:
            parts += [self.op, f"{self.value:g}"]
        if self.max_drop is not None:
            parts.append(f"max_drop {self.max_drop:g}")
        if self.max_regressions is not None:
            parts.append(f"max_regressions {self.max_regressions}")
        if self.max_increase is not None:
            parts.append(f"max_increase {self.max_increase:g}")
        if self.confidence is not None:
            parts.append(f"@{self.confidence:g}")
        return " ".join(parts)


def check_budget(max_errors: int | None, max_error_rate: float | None) -> None:
    """Raise ValueError for a negative count or a rate outside [0, 1]."""
    if max_errors is not None and max_errors < 0:
        raise ValueError("'max_errors' must be >= 0")
    if max_error_rate is not None and not 0 <= max_error_rate <= 1:
        raise ValueError(f"'max_error_rate' is a fraction in [0, 1], got {max_error_rate:g}")


def _budget_text(max_errors: int | None, max_error_rate: float | None) -> str:
    parts = [f"max_errors {max_errors}"] if max_errors is not None else []
    if max_error_rate is not None:
        parts.append(f"max_error_rate {max_error_rate:g}")
    return ", ".join(parts) or "max_errors 0"


def metric_value(gate: GateSpec, agg: MetricEntry) -> float | None:
    """The aggregate a gate compares, from the metric's one aggregate (None when nothing was graded)."""
    if gate.metric == "avg_score":
        return agg["mean"]
    if gate.metric == "accuracy":
        return agg["pass_rate"] if agg["graded"] else None
    if gate.metric == "sum":
        if not agg["graded"]:
            return None
        total = agg.get("sum")  # a built-in metric's total over every line
        return total if total is not None else (agg["mean"] or 0.0) * agg["graded"]
    return agg[gate.metric]


def _interval(
    metric: Metric, confidence: float, agg: MetricEntry, scores: Sequence[float]
) -> tuple[float, float] | None:
    """The gate's interval at its confidence: the metric's own when that is 95 %."""
    same = abs(confidence - 0.95) < 1e-12
    ci: Sequence[float | None] | None
    if metric == "avg_score":
        ci = agg["ci_mean"] if same else bootstrap_mean(scores, confidence)
    else:
        ci = agg["ci_pass_rate"] if same else wilson(agg["passed"], agg["n"], confidence)
    if not ci or ci[0] is None or ci[1] is None:  # (the aggregate's are never null)
        return None
    return ci[0], ci[1]


def evaluate(
    gate: GateSpec,
    agg: MetricEntry,
    scores: Sequence[float] = (),
    *,
    model: str | None = None,
    baseline: GateFacts | None = None,
    label: str | None = None,
) -> GateResult:
    """Check one gate against its metric's aggregate; returns the summary.json ``gates[]`` entry.

    Args:
        agg: the metric's aggregate (:func:`ci_evals.gating.stats.summarize`), the same the metric table shows.
        scores: the metric's graded scores, sorted (only read for a confidence other than 95 %).
        baseline: regression-gate facts, ``{"value", "regressions"}`` or ``{"missing": why}``.
    """
    n, graded, errors = agg["n"], agg["graded"], agg["errors"]
    actual = metric_value(gate, agg)
    out: GateResult = {
        "metric_key": gate.metric_key,
        "metric": gate.metric,
        "op": gate.op,
        "value": gate.value,
        "actual": actual,
        "model": model,
        "description": gate.describe(),
        "interval": None,
        "label": label or gate.metric_key,
        "max_errors": gate.max_errors,
        "max_error_rate": gate.max_error_rate,
        "errors": errors,
        "graded": graded,
        "n": n,
        "children": [],
    }
    over = budget_exceeded(errors, n, gate.max_errors, gate.max_error_rate)
    if over or actual is None:
        out["status"], out["passed"] = "errored", False
        out["reason"] = over or (
            f"no sample was graded ({errors} of {n} errored)" if n else "no sample ran"
        )
        out["stability"] = round(
            errors_stability(errors, n, gate.max_errors, gate.max_error_rate), 4
        )
        return out

    checks: list[str] = []  # each "passed" / "failed" / "inconclusive" / "no_baseline"
    reasons: list[str] = []
    decided_by: tuple[float, float] | None = None  # the interval a confidence gate decides with
    if gate.op is not None and gate.value is not None:  # (op and value go together)
        sym = SYMBOL[gate.op]
        if gate.confidence is not None:
            lo, hi = _interval(gate.metric, gate.confidence, agg, scores) or (actual, actual)
            out["interval"] = [lo, hi]
            decided_by = (lo, hi)
            cmp = OPS[gate.op]
            bound_ok, other_ok = (
                (cmp(lo, gate.value), cmp(hi, gate.value))
                if gate.op in ("gt", "gte")
                else (cmp(hi, gate.value), cmp(lo, gate.value))
            )
            check = "passed" if bound_ok else ("inconclusive" if other_ok else "failed")
            word = {"passed": "clears", "inconclusive": "straddles", "failed": "misses"}[check]
            reasons.append(
                f"{gate.metric} {actual:.4f}, {gate.confidence:g} interval [{lo:.4f}, {hi:.4f}] "
                f"{word} {sym} {gate.value:g}"
            )
        else:
            ci = {"avg_score": agg["ci_mean"], "accuracy": agg["ci_pass_rate"]}.get(gate.metric)
            out["interval"] = (
                list(ci) if ci else None
            )  # shown beside the value; not part of the check
            check = "passed" if OPS[gate.op](actual, gate.value) else "failed"
            reasons.append(
                f"{gate.metric} {actual:.4f} {sym} {gate.value:g}"
                if check == "passed"
                else f"{gate.metric} {actual:.4f}, needs {sym} {gate.value:g}"
            )
        checks.append(check)

    stable = (
        [absolute_stability(gate.metric, gate.op, gate.value, agg, actual, scores, decided_by)]
        if gate.op is not None and gate.value is not None
        else []
    )
    if gate.is_regression:
        missing = "run without --baseline" if baseline is None else baseline.get("missing")
        if missing or baseline is None:
            checks.append("no_baseline")
            reasons.append(
                f"no baseline: {missing} (on_missing_baseline: {gate.on_missing_baseline})"
            )
        else:
            for check, reason, stab in regression_checks(gate, actual, baseline, out):
                checks.append(check)
                reasons.append(reason)
                stable.append(stab)

    if errors:
        reasons.append(
            f"{errors} of {n} samples errored (within {_budget_text(gate.max_errors, gate.max_error_rate)})"
        )
    status = next(
        (s for s in ("failed", "inconclusive", "undecided", "no_baseline") if s in checks), "passed"
    )
    out["status"] = status
    out["passed"] = status in ("passed", "undecided") or (
        status == "no_baseline" and gate.on_missing_baseline == "pass"
    )
    out["reason"] = "; ".join(reasons)
    out["stability"] = round(min(stable), 4) if stable else 1.0
    return out


def unmeasured(out: GateResult, entry: MeasureEntry) -> None:
    """A gate on a built-in metric (latency, cost_usd...) that some results lines have no value
    for: an unknown value (a model with no known price) errors the gate, with the reason and how to
    give the price, never counted as 0; answers all served from the LLM cache say so."""
    unknown, n = entry.get("unknown", 0), entry.get("n", 0)
    name = out.get("metric_key") or "?"
    if unknown:
        reasons = "; ".join(entry.get("unknown_reasons") or []) or "no value was recorded"
        hint = (
            " (give its price under the suite's `pricing:`, e.g. "
            "`pricing: {MODEL: {input_per_mtok: 0.15, output_per_mtok: 0.6}}`, in dollars per "
            "million tokens)"
            if "price" in reasons
            else ""
        )
        out["status"], out["passed"] = "errored", False
        out["reason"] = f"{name} is unknown for {unknown} of {n} results lines: {reasons}{hint}"
        out["stability"] = 1.0
    elif out.get("status") == "errored" and not out.get("graded") and entry.get("cached"):
        out["reason"] = (
            f"no {name} was measured: {entry['cached']} of {n} answers came from the LLM cache "
            "(run with --no-cache to measure it)"
        )
