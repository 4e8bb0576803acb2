"""summary.json's ``config`` block: what a suite asks of its records, for ``merge`` and recomputation."""

from __future__ import annotations

from typing import Any

from ci_evals.graders.reward import reward_config
from ci_evals.results.measures import BUILTIN_KIND, BUILTINS
from ci_evals.suite.loaded import GraderSlot, LoadedSuite


def suite_config(suite: LoadedSuite) -> dict[str, Any]:
    """The machine-readable config block of summary.json (what ``merge`` and recomputation need)."""
    return {
        "graders": {name: _grader_facts(slot) for name, slot in suite.graders.items()}
        | reward_config(suite.reward)
        | {
            name: {"label": BUILTINS[name].label, "kind": BUILTIN_KIND, "rule": list(rule)}
            for name, rule in suite.builtins.items()
        },
        "gates": [g.model_dump(exclude_none=True) for g in suite.gates],
        **(
            {"typed_gates": [g.model_dump(exclude_none=True) for g in suite.typed_gates]}
            if suite.typed_gates
            else {}
        ),
        "max_errors": suite.max_errors,
        "max_error_rate": suite.max_error_rate,
        "num_runs": suite.spec.num_runs,
        "reducer": suite.spec.reducer,
        "target": _target_facts(suite.spec.target),
    }


def _grader_facts(slot: GraderSlot) -> dict[str, Any]:
    """A grader's label, kind, per-sample rule and extractor, and its model when it names one."""
    facts: dict[str, Any] = {
        "label": slot.grader.label,
        "kind": slot.grader.spec.kind,
        "rule": list(slot.rule),
        "extractor": slot.extractor.name,
    }
    model = getattr(slot.grader.spec, "model", None)  # LLM graders' specs have one
    if isinstance(model, str):
        facts["model"] = model
    return facts


def _target_facts(target: dict[str, Any]) -> dict[str, Any]:
    """The target's kind, and the model(s) it runs when it names them (report.html's run facts)."""
    out: dict[str, Any] = {"kind": target.get("kind")}
    if isinstance(target.get("model"), str):
        out["model"] = target["model"]
    handles = target.get("model_handles")
    if isinstance(handles, list) and all(isinstance(h, str) for h in handles):
        out["model_handles"] = handles
    return out
