"""The run's verdict from its aggregates, in one visible place: aggregate -> gates -> verdict.

:func:`summarize` asks the aggregator for its aggregates, evaluates every gate on them (regression
gates with the typed :class:`~ci_evals.gating.baseline.Baseline` passed in), lets
:func:`ci_evals.gating.verdict.decide` name the verdict, and returns the summary.json document.
Rendering it is the reports' job; nothing here reads or writes a file.
"""

from __future__ import annotations

import platform
from datetime import UTC, datetime, timedelta
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import ci_evals
from ci_evals.gating import letta_gates
from ci_evals.gating.aggregate import Aggregator
from ci_evals.gating.baseline import Baseline
from ci_evals.gating.gates import GateSpec, evaluate
from ci_evals.gating.verdict import decide


def evaluate_gates(
    agg: Aggregator, parts: dict[str, Any], config: dict[str, Any], baseline: Baseline | None
) -> list[dict[str, Any]]:
    """Every gate's result: per model when the run has several (each model is gated alone)."""
    gates = [GateSpec.model_validate(g) for g in config.get("gates", [])]
    typed = [letta_gates.parse(g, "gate", None, None) for g in config.get("typed_gates", [])]

    def for_model(aggs: dict[str, Any], model) -> list[dict[str, Any]]:
        def scores(name: str) -> list[float]:
            return agg.scores(name, model)  # model None: every model's scores

        out = [
            evaluate(
                g,
                aggs[g.metric_key],
                scores(g.metric_key),
                model=model,
                baseline=baseline.gate_facts(g, model) if baseline is not None else None,
                label=aggs[g.metric_key]["label"],
            )
            for g in gates
        ]
        return out + [
            letta_gates.evaluate(t, lambda n: (aggs[n], scores(n)), model=model) for t in typed
        ]

    if "models" not in parts:
        return for_model(parts["metrics"], None)
    results = []
    for model in agg.models():
        block = parts["models"][str(model)]
        block["gates"] = for_model(block["metrics"], model)
        results.extend(block["gates"])
    return results


SCHEMA_VERSION = 1


def versions(kinds: set[str]) -> dict[str, str]:
    """ci-evals, Python and the libraries this suite's graders use (so scores can be reproduced)."""
    out = {"ci_evals": ci_evals.__version__, "python": platform.python_version()}
    libs = ["pydantic"]
    if kinds & {"rubric", "model_judge", "score_model", "label_model", "model", "text_similarity"}:
        libs.append("openai")
    if kinds & {"agent", "letta_agent", "letta_judge"}:
        libs.append("letta-client")
    if "text_similarity" in kinds or "multi" in kinds:
        libs += ["rapidfuzz", "nltk", "rouge-score"]
    for lib in libs:
        try:
            out[lib] = version(lib)
        except PackageNotFoundError:
            pass
    return out


def _all_versions(suite, kinds: set[str], extra: dict[str, Any]) -> dict[str, str]:
    """Library versions, including what each grader reports about itself (e.g. WordNet)."""
    if suite is None and extra.get("versions"):
        return extra["versions"]
    out = versions(kinds)
    for slot in suite.graders.values() if suite else ():
        more = getattr(slot.grader, "versions", None)
        if callable(more):
            out.update(more())
    return out


def summarize(
    suite,
    config: dict[str, Any],
    agg,
    *,
    started: datetime,
    duration: float,
    partial: bool,
    extra: dict[str, Any] | None = None,
    baseline: Baseline | None = None,
    interrupted: str | None = None,
) -> dict[str, Any]:
    """The summary.json document (see the output contract in docs/reference.md): aggregates, then
    gates (with the baseline's facts for regression gates), then the verdict, in that order.

    ``interrupted`` names the signal that stopped the run (``SIGINT``/``SIGTERM``/``SIGHUP``), if any.
    """
    extra = extra or {}
    parts = agg.finish()
    parts["gates"] = evaluate_gates(agg, parts, config, baseline)
    usage = {k: dict(v) for k, v in agg.usage.items()}
    target_usage = usage.pop("target", {"prompt_tokens": 0, "completion_tokens": 0})
    total = {
        "prompt_tokens": target_usage["prompt_tokens"]
        + sum(u["prompt_tokens"] for u in usage.values()),
        "completion_tokens": target_usage["completion_tokens"]
        + sum(u["completion_tokens"] for u in usage.values()),
    }
    kinds = {g["kind"] for g in config["graders"].values()} | {config["target"]["kind"]}
    summary: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "suite": suite.spec.name if suite else extra.get("suite"),
        "suite_file": str(suite.path) if suite else extra.get("suite_file"),
        "description": suite.spec.description if suite else extra.get("description"),
        "started_at": started.isoformat(timespec="seconds"),
        "finished_at": (started + timedelta(seconds=duration)).isoformat(timespec="seconds")
        if duration
        else datetime.now(UTC).isoformat(timespec="seconds"),
        "duration_s": round(duration, 3),
        "verdict": None,
        "verdict_reason": None,
        "partial": partial,
        "target": config["target"],
        "num_runs": config["num_runs"],
        "reducer": config["reducer"],
        "n_samples": parts["n_samples"],
        "records": parts["records"],
        "gate": None,
        "gates": parts["gates"],
        "metrics": parts["metrics"],
    }
    if "models" in parts:
        summary["models"] = parts["models"]
    summary.update(
        {
            "errors": parts["errors"],
            "flaky": parts["flaky"],
            "usage": {
                "target": target_usage,
                "graders": usage,
                "total": total,
                "cost_usd": round(agg.cost_usd, 6) if agg.cost_usd is not None else None,
            },
            "cache": parts["cache"],
            "retries": parts["retries"],
            "versions": _all_versions(suite, kinds, extra),
            "config": config,
            "baseline": baseline.summary_block(summary_metrics=parts["metrics"])
            if baseline is not None
            else None,
        }
    )
    for k, v in extra.items():
        if k != "versions":
            summary[k] = v
    if interrupted:
        summary["interrupted_by"] = interrupted
    summary["verdict"], summary["verdict_reason"] = decide(summary)
    summary["gate"] = {"passed": summary["verdict"] == "passed"}
    return summary
