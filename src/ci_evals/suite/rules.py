"""Each metric's per-sample pass rule and each gate's error budget, decided once when a suite loads.

A metric's rule is its own: its grader's, else its own gates', else score >= 1.0, never another
metric's gate (:func:`metric_rule`). Every gate gets an error budget (:func:`apply_budgets`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ci_evals._util.errors import ConfigError, did_you_mean
from ci_evals._util.text import shorten
from ci_evals.config.specs import GraderSpec
from ci_evals.core.rule import rule_text
from ci_evals.gating.gates import GateSpec
from ci_evals.gating.letta_gates import TypedGate
from ci_evals.results.measures import BUILTINS
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
        elif gate.metric_key not in metrics and gate.metric_key not in BUILTINS:
            choices = [*metrics, *(b for b in BUILTINS if b not in metrics)]
            raise ConfigError(
                f"metric_key '{shorten(gate.metric_key, 60)}' names no grader and no built-in "
                f"metric{did_you_mean(gate.metric_key, choices)}",
                file=file,
                key=f"{gkey}.metric_key",
                line=lines.get(f"{gkey}.metric_key"),
            )
    return gates


def gate_key(spec: SuiteSpec, i: int) -> str:
    """The YAML key of the suite's ``i``-th gate (``gate``, then ``gates[k]``)."""
    if spec.gate is not None:
        return "gate" if i == 0 else f"gates[{i - 1}]"
    return f"gates[{i}]"


def builtin_rules(
    gates: Sequence[GateSpec],
    metrics: list[str],
    file: str,
    lines: dict[str, int],
    where: Callable[[int], str] = lambda i: f"gates[{i}]",
) -> dict[str, tuple[str, float]]:
    """The built-in metrics the gates read (``latency``, ``cost_usd``...: ci_evals.results.measures),
    each with its per-sample rule; checks every gate's direction.

    Built-in metrics are lower-is-better: a gate's ``value`` without ``op`` means ``lte``; an
    ``op`` of ``gt``/``gte`` (a floor on latency or cost) or an ``accuracy`` gate needs an explicit
    per-sample rule (``pass_op``/``pass_value``); ``max_drop`` is for scores (use ``max_increase``).
    A metric's rule is its explicit one, else its first gate's ``op``/``value``, else none
    (``score >= 0``: every value passes). ``max_increase`` on a grader's metric needs a rule that
    points down (its scores are lower-is-better too)."""
    rules: dict[str, tuple[str, float]] = {}

    def fail(i: int, field: str, message: str) -> ConfigError:
        key = f"{where(i)}.{field}"
        return ConfigError(message, file=file, key=key, line=lines.get(key) or lines.get(where(i)))

    for i, gate in enumerate(gates):
        name = gate.metric_key or ""
        builtin = name in BUILTINS and name not in metrics
        if not builtin:
            if gate.value is not None and gate.op is None:
                raise fail(i, "op", "'op' and 'value' go together")
            continue
        explicit = gate.explicit_rule()
        if gate.value is not None and gate.op is None:
            gate.op = "lte"
        if gate.metric == "accuracy" and explicit is None:
            raise fail(
                i,
                "metric",
                f"accuracy of '{name}' needs a per-sample rule: e.g. pass_op: lte, pass_value: 2 "
                f"(a sample passes when its {name} is at most 2)",
            )
        if gate.op in ("gt", "gte") and explicit is None:
            raise fail(
                i,
                "op",
                f"'{name}' is lower-is-better: op '{gate.op}' puts a floor under it; use lte/lt, "
                "or give the per-sample rule you mean (pass_op, pass_value)",
            )
        if gate.max_drop is not None:
            raise fail(
                i,
                "max_drop",
                f"'{name}' is lower-is-better: max_drop limits a fall in a score; use "
                "max_increase (a relative increase, e.g. 0.2 for 20 %)",
            )
        rule = explicit or (
            (gate.op, gate.value)
            if gate.op is not None and gate.value is not None and gate.metric != "accuracy"
            else None
        )
        if rule is not None:
            if name in rules and rules[name] != rule and explicit is not None:
                raise fail(
                    i,
                    "pass_value",
                    f"metric '{name}' has two per-sample pass rules: {rule_text(*rules[name])} "
                    f"and {rule_text(*rule)}; keep one",
                )
            rules.setdefault(name, rule)
        else:
            rules.setdefault(name, NO_RULE)
    for i, gate in enumerate(gates):
        name = gate.metric_key or ""
        if name in rules and gate.max_regressions is not None and rules[name] == NO_RULE:
            raise fail(
                i,
                "max_regressions",
                f"max_regressions on '{name}' counts samples that passed and now fail: give a "
                "per-sample rule (pass_op: lte, pass_value: ...) or a gate with op lte",
            )
    return rules


NO_RULE: tuple[str, float] = ("gte", 0.0)
"""A built-in metric's per-sample rule when no gate states one: every value passes."""


def check_max_increase(
    gates: Sequence[GateSpec],
    rules: dict[str, tuple[str, float]],
    file: str,
    lines: dict[str, int],
    where: Callable[[int], str] = lambda i: f"gates[{i}]",
) -> None:
    """``max_increase`` reads a lower-is-better metric: a built-in one, or a grader's whose
    per-sample rule points down (``pass_op: lte``)."""
    for i, gate in enumerate(gates):
        rule = rules.get(gate.metric_key or "")
        if gate.max_increase is not None and rule is not None and rule[0] in ("gt", "gte"):
            if gate.metric_key in BUILTINS:
                continue
            key = f"{where(i)}.max_increase"
            raise ConfigError(
                f"max_increase limits a rise of a lower-is-better metric; '{gate.metric_key}' "
                f"passes at {rule_text(*rule)} (higher is better): use max_drop",
                file=file,
                key=key,
                line=lines.get(key),
            )
