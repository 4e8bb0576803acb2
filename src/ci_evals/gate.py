"""Gates: the suite's verdict from its aggregates (and, for regression gates, a baseline).

A gate compares one aggregate of one grader's per-sample scores with a threshold. Aggregates:
``avg_score`` (mean, errors as 0), ``accuracy`` (fraction of samples passing the per-sample rule,
in [0, 1]), ``min``, ``max``, ``median``, ``p50``, ``p95``, ``p99``. The per-sample rule is
``pass_op``/``pass_value`` when given; for ``accuracy`` without ``pass_value`` it is score >= 1.0;
otherwise ``op``/``value`` (letta-evals 0.5 semantics).

Regression gates (``max_drop``, ``max_regressions``) need a baseline; without one they report
"no baseline" and pass or fail per ``on_missing_baseline``. ``confidence`` makes a gate pass only
when the whole interval clears the threshold, and report "inconclusive" when it straddles it.
"""

from __future__ import annotations

import operator
from typing import Any, Literal

from pydantic import model_validator

from ci_evals.specs import Strict

OPS = {"gt": operator.gt, "gte": operator.ge, "lt": operator.lt, "lte": operator.le, "eq": operator.eq}
SYMBOL = {"gt": ">", "gte": ">=", "lt": "<", "lte": "<=", "eq": "=="}
Metric = Literal["avg_score", "accuracy", "min", "max", "median", "p50", "p95", "p99"]
Op = Literal["gt", "gte", "lt", "lte", "eq"]


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
    on_missing_baseline: Literal["pass", "fail"] = "pass"

    @model_validator(mode="after")
    def _consistent(self) -> GateSpec:
        regression = self.max_drop is not None or self.max_regressions is not None
        if not regression and (self.op is None or self.value is None):
            raise ValueError("a gate needs 'op' and 'value' (or 'max_drop'/'max_regressions')")
        if (self.op is None) != (self.value is None):
            raise ValueError("'op' and 'value' go together")
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
        return self

    def sample_rule(self) -> tuple[str, float]:
        """The per-sample pass rule (op, threshold) this gate implies."""
        if self.metric == "accuracy" and self.pass_value is None:
            return "gte", 1.0
        op = self.pass_op or self.op or "gte"
        value = self.pass_value if self.pass_value is not None else (self.value if self.value is not None else 1.0)
        return op, value

    def describe(self) -> str:
        parts = [self.metric_key or "?", self.metric]
        if self.op is not None:
            parts += [self.op, f"{self.value:g}"]
        if self.max_drop is not None:
            parts.append(f"max_drop {self.max_drop:g}")
        if self.max_regressions is not None:
            parts.append(f"max_regressions {self.max_regressions}")
        if self.confidence is not None:
            parts.append(f"@{self.confidence:g}")
        return " ".join(parts)


def rule_text(op: str, value: float) -> str:
    return f"score {SYMBOL[op]} {value:g}"


def passes(score: float, op: str, value: float) -> bool:
    return OPS[op](score, value)


def metric_value(gate: GateSpec, scores: list[float], agg: dict[str, Any]) -> float:
    """The aggregate a gate compares; ``scores`` are per-sample (errors as 0)."""
    if gate.metric == "avg_score":
        return agg["mean"]
    if gate.metric == "accuracy":
        op, value = gate.sample_rule()
        return sum(1 for s in scores if OPS[op](s, value)) / len(scores) if scores else 0.0
    return agg[gate.metric]


def evaluate(gate: GateSpec, scores: list[float], agg: dict[str, Any], *, model: str | None = None,
             baseline: dict[str, Any] | None = None) -> dict[str, Any]:
    """Check one gate; returns the summary.json ``gates[]`` entry."""
    from ci_evals.stats import bootstrap_mean, wilson

    actual = metric_value(gate, scores, agg) if scores else 0.0
    out: dict[str, Any] = {
        "metric_key": gate.metric_key, "metric": gate.metric, "op": gate.op, "value": gate.value,
        "actual": actual, "model": model, "description": gate.describe(), "interval": None,
    }
    checks: list[str] = []  # each "passed" / "failed" / "inconclusive" / "no_baseline:<pass|fail>"

    if gate.op is not None:
        if gate.confidence is not None:
            if gate.metric == "avg_score":
                interval = bootstrap_mean(scores, gate.confidence)
            else:
                op, value = gate.sample_rule()
                interval = wilson(sum(1 for s in scores if OPS[op](s, value)), len(scores), gate.confidence)
            lo, hi = interval or (0.0, 0.0)
            out["interval"] = [lo, hi]
            cmp = OPS[gate.op]
            bound_ok, other_ok = (cmp(lo, gate.value), cmp(hi, gate.value)) if gate.op in ("gt", "gte") \
                else (cmp(hi, gate.value), cmp(lo, gate.value))
            checks.append("passed" if bound_ok else ("inconclusive" if other_ok else "failed"))
        else:
            checks.append("passed" if OPS[gate.op](actual, gate.value) else "failed")

    if gate.max_drop is not None or gate.max_regressions is not None:
        if baseline is None:
            checks.append(f"no_baseline:{gate.on_missing_baseline}")
        else:
            if gate.max_drop is not None:
                before = baseline.get("value")
                out["baseline_value"] = before
                drop = (before - actual) if before is not None else 0.0
                out["drop"] = drop
                out["max_drop"] = gate.max_drop
                checks.append("passed" if drop <= gate.max_drop + 1e-12 else "failed")
            if gate.max_regressions is not None:
                n_reg = baseline.get("regressions", 0)
                out["regressions"] = n_reg
                out["max_regressions"] = gate.max_regressions
                checks.append("passed" if n_reg <= gate.max_regressions else "failed")

    if "failed" in checks:
        status = "failed"
    elif "inconclusive" in checks:
        status = "inconclusive"
    elif any(c.startswith("no_baseline") for c in checks):
        status = "no_baseline"
    else:
        status = "passed"
    out["status"] = status
    out["passed"] = status == "passed" or (status == "no_baseline" and "no_baseline:fail" not in checks)
    return out
