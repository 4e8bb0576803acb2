"""The run's verdict from its aggregates, in one visible place: aggregate -> gates -> verdict.

:func:`summarize` asks the aggregator for its aggregates, evaluates every gate on them (regression
gates with the typed :class:`~ci_evals.gating.baseline.Baseline` passed in), lets
:func:`ci_evals.gating.verdict.decide` name the verdict, and returns the summary.json document.
Rendering it is the reports' job; nothing here reads or writes a file.
"""

from __future__ import annotations

import platform
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Protocol

import ci_evals
from ci_evals.gating import letta_gates
from ci_evals.gating.aggregate import Aggregator, Model
from ci_evals.gating.baseline import Baseline
from ci_evals.gating.gates import GateSpec, evaluate, unmeasured
from ci_evals.gating.verdict import decide
from ci_evals.results.records import (
    BudgetReport,
    CostSpeed,
    EndpointReport,
    GateResult,
    LettaBlock,
    MetricEntry,
    Selection,
    Shard,
    StopSignal,
    Summary,
    Workers,
)


class _SuiteSpec(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def description(self) -> str | None: ...


class _GraderSlot(Protocol):
    @property
    def grader(self) -> object: ...


class SuiteFacts(Protocol):
    """What a summary reads of the suite that ran (a ci_evals.suite.loader.LoadedSuite)."""

    @property
    def path(self) -> Path: ...
    @property
    def spec(self) -> _SuiteSpec: ...
    @property
    def graders(self) -> Mapping[str, _GraderSlot]: ...


@dataclass(frozen=True)
class Provenance:
    """What summary.json says of a suite that is not loaded here (a merge of other runs' folders:
    their summaries say it)."""

    suite: str | None = None
    suite_file: str | None = None
    description: str | None = None
    versions: dict[str, Any] | None = None
    """The libraries the runs used (none: this machine's are listed)."""
    merged_from: list[str] | None = None
    """The folders merged."""


@dataclass(frozen=True)
class Learned:
    """What a run learned as it went, beyond its records: summary.json's blocks only the run could
    know (each left out when None)."""

    letta: LettaBlock | None = None
    """Agents left on a Letta server, or kept on purpose."""
    endpoints: list[EndpointReport] | None = None
    """Each LLM endpoint's calls, throttling, settled concurrency and breaker."""
    workers: Workers | None = None
    """A run split across worker processes: ``{processes, failed}``."""
    partial_reason: str | None = None
    """Why the run is partial though not interrupted (a worker died, a shard is missing...)."""
    budget: BudgetReport | None = None
    """The suite's budgets and what the run spent; ``stopped`` when it stopped calling."""


def evaluate_gates(
    agg: Aggregator, parts: Summary, config: dict[str, Any], baseline: Baseline | None
) -> list[GateResult]:
    """Every gate's result: per model when the run has several (each model is gated alone)."""
    gates = [GateSpec.model_validate(g) for g in config.get("gates", [])]
    typed = [_typed_gate(g) for g in config.get("typed_gates", [])]

    def for_model(aggs: dict[str, MetricEntry], model: Model) -> list[GateResult]:
        def scores(name: str) -> list[float]:
            return agg.scores(name, model)  # model None: every model's scores

        out: list[GateResult] = []
        for g in gates:
            key = _metric_key(g)
            result = evaluate(
                g,
                aggs[key],
                scores(key),
                model=model,
                baseline=baseline.gate_facts(g, model) if baseline is not None else None,
                label=aggs[key]["label"],
            )
            if key in agg.builtins:
                unmeasured(result, parts["cost_speed"]["metrics"][key])
            out.append(result)
        return out + [
            letta_gates.evaluate(t, lambda n: (aggs[n], scores(n)), model=model) for t in typed
        ]

    if "models" not in parts:
        return for_model(parts["metrics"], None)
    results: list[GateResult] = []
    for model in agg.models():
        block = parts["models"][str(model)]
        block["gates"] = for_model(block["metrics"], model)
        results.extend(block["gates"])
    return results


def _with_budget(block: CostSpeed, budget: BudgetReport | None) -> CostSpeed:
    if budget is not None:
        block["budget"] = budget
    return block


def _typed_gate(raw: dict[str, Any]) -> letta_gates.TypedGate:
    """A ``weighted_average`` or ``logical`` gate of the config (the loader keeps simple ones with
    the gates)."""
    gate = letta_gates.parse(raw, "gate", None, None)
    if isinstance(gate, letta_gates.Condition):
        raise ValueError("a typed gate is weighted_average or logical")
    return gate


def _metric_key(gate: GateSpec) -> str:
    """The metric a gate reads (the suite's loader names it; a summary's config may not)."""
    if gate.metric_key is None:
        raise KeyError("metric_key")
    return gate.metric_key


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


def _all_versions(suite: SuiteFacts | Provenance, kinds: set[str]) -> dict[str, Any]:
    """Library versions, including what each grader reports about itself (e.g. WordNet)."""
    if isinstance(suite, Provenance):
        return suite.versions or versions(kinds)
    out: dict[str, Any] = versions(kinds)
    for slot in suite.graders.values():
        more = getattr(slot.grader, "versions", None)
        if callable(more):
            out.update(more())
    return out


def summarize(
    suite: SuiteFacts | Provenance,
    config: dict[str, Any],
    agg: Aggregator,
    *,
    started: datetime,
    duration: float,
    partial: bool,
    baseline: Baseline | None = None,
    interrupted: StopSignal | None = None,
    shard: Shard | None = None,
    selection: Selection | None = None,
    learned: Learned = Learned(),
) -> Summary:
    """The summary.json document (see the output contract in docs/reference.md): aggregates, then
    gates (with the baseline's facts for regression gates), then the verdict, in that order.

    ``suite`` is the suite that ran, or what other runs' summaries say of it (a merge).
    ``interrupted`` names the signal that stopped the run (``SIGINT``/``SIGTERM``/``SIGHUP``), if any.
    ``shard`` and ``selection`` were chosen before the run; ``learned`` is what it learned as it went.
    """
    loaded = None if isinstance(suite, Provenance) else suite
    named = suite if isinstance(suite, Provenance) else Provenance()
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
    summary: Summary = {
        "schema_version": SCHEMA_VERSION,
        "suite": loaded.spec.name if loaded else named.suite,
        "suite_file": str(loaded.path) if loaded else named.suite_file,
        "description": loaded.spec.description if loaded else named.description,
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
            "cost_speed": _with_budget(parts["cost_speed"], learned.budget),
            "cache": parts["cache"],
            "retries": parts["retries"],
            "versions": _all_versions(suite, kinds),
            "config": config,
            "baseline": baseline.summary_block(parts["metrics"], parts["cost_speed"])
            if baseline is not None
            else None,
        }
    )
    # then what was chosen before the run and what it learned, in this order (none at once: a
    # merge has no shard, selection, agents or endpoints of its own)
    if shard is not None:
        summary["shard"] = shard
    if selection is not None:
        summary["selection"] = selection
    if named.merged_from is not None:
        summary["merged_from"] = named.merged_from
    if learned.letta is not None:
        summary["letta"] = learned.letta
    if learned.endpoints is not None:
        summary["endpoints"] = learned.endpoints
    if learned.workers is not None:
        summary["workers"] = learned.workers
    if learned.partial_reason is not None:
        summary["partial_reason"] = learned.partial_reason
    if interrupted:
        summary["interrupted_by"] = interrupted
    summary["verdict"], summary["verdict_reason"] = decide(summary)
    summary["gate"] = {"passed": summary["verdict"] == "passed"}
    return summary
