"""The letta-evals suite dialects, translated into ci-evals' own suite shape before validation.

* 0.4-0.6: ``gate: {metric_key, metric, op, value, pass_op, pass_value}``, ci-evals' own gate.
  letta-evals computed ``accuracy`` as a percentage (0-100): a value above 1 (up to 100) on an
  ``accuracy`` gate is read as a percentage and converted, with one warning line. A value in
  (0, 1] stays a fraction; in a recognised letta-evals suite (typed gates, or ``gate:`` with a
  Letta target) that changes the verdict letta-evals gave, so it gets one warning line naming
  both readings. ``accuracy_scale: percent`` (suite key) reads every accuracy threshold as
  letta-evals did, to reproduce an old verdict; ``accuracy_scale: fraction`` confirms ci-evals'
  reading and silences the warning. Neither applies to ``--gate`` (ci-evals' own flag).
* 0.7-0.20: typed gates. ``kind: simple`` becomes one ordinary gate (``aggregation`` -> ``metric``,
  ``pass_threshold`` -> ``pass_value``); ``weighted_average`` and ``logical`` stay typed gates
  (:mod:`ci_evals.gating.letta_gates`). Top-level ``cleanup`` moves into the target.
* 0.21+: ``reward: {kind: metric|custom}`` (:mod:`ci_evals.graders.reward`), a metric named ``reward``.

Every dialect may also use ci-evals' own keys; the result is validated as strictly as any suite.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from ci_evals._util.errors import ConfigError, did_you_mean
from ci_evals.core.rule import Op
from ci_evals.gating import letta_gates as typed_gates
from ci_evals.gating.gates import GateSpec, Metric
from ci_evals.gating.letta_gates import Condition, TypedGate
from ci_evals.targets.base import Target

DIALECTS = {
    "ci-evals": "ci-evals / letta-evals 0.4-0.6",
    "typed": "letta-evals 0.7-0.20 (typed gates)",
    "reward": "letta-evals 0.21+ (reward)",
}


@dataclass
class Translated:
    """What :func:`translate` found besides the plain suite keys."""

    dialect: str = "ci-evals"
    typed_gates: list[tuple[str, dict[str, Any]]] = field(
        default_factory=list
    )  # (YAML key, raw gate)
    reward: dict[str, Any] | None = None
    cleanup: bool | None = None
    warnings: list[str] = field(default_factory=list)
    scale: str | None = None  # accuracy_scale: "fraction", "percent" or unset (auto)
    letta: bool = (
        False  # a recognised letta-evals suite: typed gates, or `gate:` with a Letta target
    )


def warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


SCALES = ("fraction", "percent")
LETTA_TARGETS = ("agent", "letta_agent", "letta_code")  # every target kind letta-evals ever had


def percent_value(
    value: Any, where: str, file: str, lines: dict[str, int], out: Translated, op: Any = None
) -> Any:
    """An ``accuracy`` threshold as a fraction.

    Unset scale: above 1 (up to 100) it is letta-evals' percentage, made a fraction with a warning;
    in (0, 1] it stays a fraction, with a warning when the suite is letta-evals' (whose code read
    it as a percentage). ``percent``: always divided by 100, as letta-evals did. ``fraction``: as is.
    """
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return value
    line = lines.get(where)
    at = f"{file}:{line}" if line else file
    if out.scale == "percent":
        if not 0 <= value <= 100:
            raise ConfigError(
                f"accuracy value {value:g} is not a percentage in [0, 100] (accuracy_scale: percent)",
                file=file,
                key=where,
                line=line,
            )
        return value / 100
    if value <= 1:
        if out.letta and out.scale is None and value > 0:
            effect = {
                "gte": "passes at almost any accuracy",
                "gt": "passes at almost any accuracy",
                "lte": "fails at almost any accuracy",
                "lt": "fails at almost any accuracy",
            }.get(str(op))
            out.warnings.append(
                f"{at}: {where}: accuracy {value:g}: letta-evals 0.4-0.20 reads it as {value:g} % (its accuracy is "
                f"0-100{'; ' + effect if effect else ''}); ci-evals reads it as the fraction {value:g} "
                f"({value * 100:g} % of samples). Set accuracy_scale: percent to reproduce letta-evals' verdict, "
                "or accuracy_scale: fraction to keep ci-evals' reading without this warning"
            )
        return value
    if value > 100 or out.scale == "fraction":
        why = (
            "accuracy_scale: fraction"
            if out.scale
            else "a fraction in [0, 1], or a percentage up to 100"
        )
        raise ConfigError(
            f"accuracy value {value:g} is above {1 if out.scale else 100} ({why})",
            file=file,
            key=where,
            line=line,
        )
    fraction = value / 100
    out.warnings.append(
        f"{at}: {where}: accuracy {value:g} read as a percentage (letta-evals' scale): "
        f"{fraction:g} as a fraction"
    )
    return fraction


def is_letta_evals(raw: dict[str, Any]) -> bool:
    """A suite letta-evals 0.4-0.20 would gate: a typed gate (``kind``), or a ``gate:`` on a Letta target."""
    gates = [raw.get("gate")] + (raw["gates"] if isinstance(raw.get("gates"), list) else [])
    if any(isinstance(g, dict) and "kind" in g for g in gates):
        return True
    target = raw.get("target")
    return (
        isinstance(raw.get("gate"), dict)
        and isinstance(target, dict)
        and target.get("kind") in LETTA_TARGETS
    )


def _simple(
    raw: dict[str, Any], key: str, file: str, lines: dict[str, int], out: Translated
) -> dict[str, Any]:
    """A ``kind: simple`` gate (or logical condition) as an ordinary ci-evals gate."""
    gate = {k: v for k, v in raw.items() if k not in ("kind", "aggregation", "pass_threshold")}
    gate["metric"] = raw.get("aggregation", "avg_score")
    if gate["metric"] == "accuracy":
        if "value" in gate:
            gate["value"] = percent_value(
                gate["value"], f"{key}.value", file, lines, out, raw.get("op")
            )
        if raw.get("pass_threshold") is not None:
            gate["pass_op"], gate["pass_value"] = "gte", raw["pass_threshold"]
    return gate


def _convert_typed(
    raw: dict[str, Any], key: str, file: str, lines: dict[str, int], out: Translated
) -> dict[str, Any]:
    """Percentages of a weighted or logical gate's accuracy thresholds made fractions (recursively)."""
    raw = dict(raw)
    if raw.get("kind") == "logical" and isinstance(raw.get("conditions"), list):
        raw["conditions"] = [
            _convert_typed(c, f"{key}.conditions[{i}]", file, lines, out)
            if isinstance(c, dict)
            else c
            for i, c in enumerate(raw["conditions"])
        ]
    elif raw.get("aggregation") == "accuracy" and "value" in raw:
        raw["value"] = percent_value(raw["value"], f"{key}.value", file, lines, out, raw.get("op"))
    return raw


def _one_gate(
    gate: dict[str, Any], key: str, file: str, lines: dict[str, int], out: Translated
) -> dict[str, Any] | None:
    """A gate in ci-evals' shape, or None when it is a typed (weighted or logical) gate kept aside."""
    kind = gate.get("kind")
    if kind is None:
        gate = dict(gate)
        if gate.get("metric") == "accuracy" and "value" in gate:
            gate["value"] = percent_value(
                gate["value"], f"{key}.value", file, lines, out, gate.get("op")
            )
        return gate
    out.dialect = "typed"
    if kind == "simple":
        return _simple(gate, key, file, lines, out)
    if kind in ("weighted_average", "logical"):
        out.typed_gates.append((key, _convert_typed(gate, key, file, lines, out)))
        return None
    raise ConfigError(
        f"unknown gate kind '{kind}'"
        + did_you_mean(str(kind), ["simple", "weighted_average", "logical"]),
        file=file,
        key=f"{key}.kind",
        line=lines.get(f"{key}.kind"),
    )


SANDBOX = (
    "letta-evals' per-sample Modal sandboxes are not supported: ci-evals runs samples on this machine "
    "(remove 'sandbox' to run them here)"
)


def translate(
    raw: dict[str, Any], file: str, lines: dict[str, int], *, offline: bool = False
) -> tuple[dict[str, Any], Translated]:
    """The suite mapping in ci-evals' shape, plus what only the dialects have. Prints the warnings.

    ``offline`` (``validate``): a ``sandbox`` block is a warning, not yet the error ``run`` gives.
    """
    out = Translated()
    raw = dict(raw)
    out.scale = raw.pop("accuracy_scale", None)
    if out.scale is not None and out.scale not in SCALES:
        raise ConfigError(
            f"accuracy_scale must be fraction or percent (got {out.scale!r})",
            file=file,
            key="accuracy_scale",
            line=lines.get("accuracy_scale"),
        )
    out.letta = is_letta_evals(raw)
    if isinstance(raw.get("gate"), dict):
        gate = _one_gate(raw.pop("gate"), "gate", file, lines, out)
        if gate is not None:
            raw["gate"] = gate
    if isinstance(raw.get("gates"), list):
        kept = [
            _one_gate(g, f"gates[{i}]", file, lines, out) if isinstance(g, dict) else g
            for i, g in enumerate(raw["gates"])
        ]
        raw["gates"] = [g for g in kept if g is not None]
    if "reward" in raw:
        out.dialect = "reward"
        out.reward = raw.pop("reward")
    if "cleanup" in raw:
        out.cleanup = raw.pop("cleanup")
        if not isinstance(out.cleanup, bool):
            raise ConfigError(
                f"'cleanup' must be true or false (got {out.cleanup!r})",
                file=file,
                key="cleanup",
                line=lines.get("cleanup"),
            )
    if "sandbox" in raw:
        raw.pop("sandbox")
        if not offline:
            raise ConfigError(SANDBOX, file=file, key="sandbox", line=lines.get("sandbox"))
        out.warnings.append(f"{file}:{lines.get('sandbox')}: sandbox: {SANDBOX}; run stops there")
    for message in out.warnings:
        warn(message)
    return raw, out


def typed_gates_of(
    found: Translated, metrics: list[str], file: str, lines: dict[str, int]
) -> list[TypedGate]:
    """The weighted and logical gates, validated, every metric they read checked against the suite's."""
    out: list[TypedGate] = []
    for key, raw in found.typed_gates:
        gate = typed_gates.parse(raw, key, file, lines)
        assert not isinstance(
            gate, Condition
        )  # only weighted_average and logical gates are kept aside
        for name, sub in typed_gates.metric_keys(gate):
            if name not in metrics:
                raise ConfigError(
                    f"metric_key '{name}' names no grader{did_you_mean(name, metrics)}",
                    file=file,
                    key=f"{key}.{sub}",
                    line=lines.get(f"{key}.{sub}"),
                )
        out.append(gate)
    return out


FLAG_FORM = 'METRIC [AGGREGATION] OP VALUE, e.g. "reward avg_score gte 0.75"'


def gates_from_flags(texts: list[str] | None, metrics: list[str], file: str) -> list[GateSpec]:
    """``--gate`` values as gates: ``METRIC [AGGREGATION] OP VALUE`` (aggregation default ``avg_score``)."""
    from typing import get_args

    out: list[GateSpec] = []
    for text in texts or []:
        parts = text.split()
        if len(parts) == 3:
            parts.insert(1, "avg_score")
        if len(parts) != 4:
            raise ConfigError(f"--gate '{text}': expected {FLAG_FORM}")
        name, metric, op, value = parts
        if name not in metrics:
            raise ConfigError(
                f"--gate '{text}': '{name}' is not a metric of this suite{did_you_mean(name, metrics)}",
                file=file,
            )
        for word, valid, what in (
            (metric, get_args(Metric), "aggregation"),
            (op, get_args(Op), "op"),
        ):
            if word not in valid:
                raise ConfigError(
                    f"--gate '{text}': unknown {what} '{word}'{did_you_mean(word, list(valid))}"
                )
        try:
            number = float(value)
        except ValueError:
            raise ConfigError(f"--gate '{text}': value '{value}' is not a number") from None
        found = Translated()
        if metric == "accuracy":
            number = percent_value(number, "--gate", file, {}, found)
            for message in found.warnings:
                warn(message)
        try:
            out.append(
                GateSpec.model_validate(
                    {"metric_key": name, "metric": metric, "op": op, "value": number}
                )
            )
        except ValidationError as exc:
            raise ConfigError(
                f"--gate '{text}': {exc.errors()[0]['msg'].removeprefix('Value error, ')}"
            ) from None
    return out


def with_cleanup(
    target: dict[str, Any],
    cleanup: bool | None,
    tcls: type[Target],
    file: str,
    lines: dict[str, int],
) -> dict[str, Any]:
    """letta-evals' top-level ``cleanup`` (0.12+) as the target's own ``cleanup``; the target's key wins."""
    if cleanup is None:
        return target
    if "cleanup" not in tcls.spec_model.model_fields:
        raise ConfigError(
            f"'cleanup' applies to targets that create agents; target kind '{target.get('kind')}' "
            "creates none",
            file=file,
            key="cleanup",
            line=lines.get("cleanup"),
        )
    return {"cleanup": cleanup, **target}
