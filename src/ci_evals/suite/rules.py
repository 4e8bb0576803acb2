"""Each metric's per-sample pass rule and each gate's error budget, decided once when a suite loads.

A metric's rule is its own: its grader's, else its own gates', else score >= 1.0, never another
metric's gate (:func:`metric_rule`). Every gate gets an error budget (:func:`apply_budgets`).
"""

from __future__ import annotations

from collections.abc import Sequence

from ci_evals._util.errors import ConfigError, did_you_mean
from ci_evals._util.text import shorten
from ci_evals.config.specs import GraderSpec
from ci_evals.core.rule import rule_text
from ci_evals.gating.gates import GateSpec
from ci_evals.gating.letta_gates import TypedGate
from ci_evals.suite.spec import SuiteSpec


def metric_rule(
    name: str,
    gspec: GraderSpec | None,
    gates: Sequence[GateSpec],
    file: str,
    lines: dict[str, int],
) -> tuple[str, float]:
    """A metric's own per-sample pass rule: its grader's (``pass_threshold`` or ``pass_op``/``pass_value``),
    else its own gates' (the first one's), else score >= 1.0. Never another metric's gate.
    ``gspec`` is None for a metric no grader gives (``reward``).

    Two rules stated for one metric that differ are a configuration error: the metric table, the
    accuracy gate and every report must use one rule.
    """
    own = [g for g in gates if g.metric_key == name]
    stated: list[tuple[tuple[str, float], str]] = []
    if gspec is not None and gspec.pass_threshold is not None:
        stated.append((("gte", gspec.pass_threshold), f"graders.{name}.pass_threshold"))
    if gspec is not None and (gspec.pass_value is not None or gspec.pass_op is not None):
        stated.append(
            (
                (gspec.pass_op or "gte", 1.0 if gspec.pass_value is None else gspec.pass_value),
                f"graders.{name}.pass_value",
            )
        )
    for i, g in enumerate(own):
        explicit = g.explicit_rule()
        if explicit is not None:
            stated.append((explicit, f"gates on '{name}' #{i + 1}"))
    for rule, where in stated[1:]:
        if rule != stated[0][0]:
            raise ConfigError(
                f"metric '{name}' has two per-sample pass rules: {rule_text(*stated[0][0])} "
                f"({stated[0][1]}) and {rule_text(*rule)} ({where}); keep one",
                file=file,
                key=f"graders.{name}",
                line=lines.get(f"graders.{name}"),
            )
    if stated:
        return stated[0][0]
    return own[0].sample_rule() if own else ("gte", 1.0)


def apply_budgets(
    spec: SuiteSpec, gates: Sequence[GateSpec | TypedGate], flag: int | None
) -> tuple[int | None, float | None]:
    """Give every gate its error budget: ``--max-errors``, else its own, else the suite's default, else 0.

    Returns the run's own budget (used when there is no gate).
    """
    for gate in gates:
        if gate.max_errors is None and gate.max_error_rate is None:
            gate.max_errors, gate.max_error_rate = spec.max_errors, spec.max_error_rate
            if gate.max_errors is None and gate.max_error_rate is None:
                gate.max_errors = 0
        if flag is not None:
            gate.max_errors = flag
    if flag is not None:
        return flag, spec.max_error_rate
    if spec.max_errors is None and spec.max_error_rate is None:
        return 0, None
    return spec.max_errors, spec.max_error_rate


def suite_gates(
    spec: SuiteSpec, metrics: list[str], file: str, lines: dict[str, int]
) -> list[GateSpec]:
    """The suite's own gates (``gate``, then ``gates``), each reading one of its ``metrics``: a gate
    without ``metric_key`` reads the first grader's."""
    gates = ([spec.gate] if spec.gate else []) + list(spec.gates)
    for i, gate in enumerate(gates):
        gkey = (
            "gate"
            if (spec.gate is not None and i == 0)
            else f"gates[{i - (1 if spec.gate else 0)}]"
        )
        if gate.metric_key is None:
            gate.metric_key = metrics[0]
        elif gate.metric_key not in metrics:
            raise ConfigError(
                f"metric_key '{shorten(gate.metric_key, 60)}' names no grader{did_you_mean(gate.metric_key, metrics)}",
                file=file,
                key=f"{gkey}.metric_key",
                line=lines.get(f"{gkey}.metric_key"),
            )
    return gates
