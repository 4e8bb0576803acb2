"""The suite's JSON Schema, generated from the same pydantic models that validate it, with the
letta-evals keys :func:`ci_evals.suite.dialects.translate` reads (for editors)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from ci_evals._util.registry import GRADER_KINDS, TARGETS, Registry
from ci_evals._util.schemas import portable
from ci_evals.gating.letta_gates import Condition, LogicalGate, WeightedGate
from ci_evals.graders.reward import CustomReward, MetricReward
from ci_evals.suite.dialects import SCALES
from ci_evals.suite.spec import SuiteSpec


def _kind_schema(model: type[BaseModel], kinds: list[str], defs: dict[str, Any]) -> dict[str, Any]:
    schema = model.model_json_schema(ref_template="#/$defs/{model}")
    defs.update(schema.pop("$defs", {}))
    props = schema.setdefault("properties", {})
    props["kind"] = {"enum": kinds, "title": "Kind"}
    return schema


def suite_schema() -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of a suite file, with one branch per target and grader kind."""
    schema = SuiteSpec.model_json_schema(ref_template="#/$defs/{model}")
    defs = schema.setdefault("$defs", {})

    def branches(registry: Registry) -> list[dict[str, Any]]:
        by_class: dict[Any, list[str]] = {}
        for kind in registry.names():
            cls = registry.get(kind)
            by_class.setdefault(cls, []).append(kind)
        out = []
        for cls, kinds in by_class.items():
            out.append(_kind_schema(cls.spec_model, kinds, defs))
            if "rubric" in kinds:  # `kind: rubric` with `agent_file` is the Letta agent judge
                agent_judge = cls.resolve({"kind": "rubric", "agent_file": "x.af"})
                if agent_judge is not cls:
                    out.append(_kind_schema(agent_judge.spec_model, ["rubric"], defs))
        return out

    schema["properties"]["target"] = {"anyOf": branches(TARGETS), "title": "Target"}
    grader_branches = branches(GRADER_KINDS)
    for branch in grader_branches:
        props = branch["properties"]
        props["type"] = {**props["kind"], "title": "Type (OpenAI spelling of kind)"}
        props.setdefault(
            "name", {"type": "string", "title": "Name (OpenAI spelling of display_name)"}
        )
        branch["required"] = [r for r in branch.get("required", []) if r != "kind"]
        branch["anyOf"] = [{"required": ["kind"]}, {"required": ["type"]}]
    # OpenAI grader objects may be pasted verbatim with `type` instead of `kind`.
    schema["properties"]["graders"] = {
        "type": "object",
        "title": "Graders",
        "minProperties": 1,
        "additionalProperties": {"anyOf": grader_branches},
    }
    extend_schema(schema)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "ci-evals suite"
    return portable(schema)


def extend_schema(schema: dict[str, Any]) -> None:
    """Add the letta-evals keys :func:`translate` reads to the suite JSON Schema (for editors)."""
    defs = schema.setdefault("$defs", {})

    def ref(model: type[BaseModel]) -> dict[str, Any]:
        sub = model.model_json_schema(ref_template="#/$defs/{model}")
        defs.update(sub.pop("$defs", {}))
        defs[model.__name__] = sub
        return {"$ref": f"#/$defs/{model.__name__}"}

    props = schema["properties"]
    typed = [ref(Condition), ref(WeightedGate), ref(LogicalGate)]
    native = props["gate"]
    props["gate"] = {
        "anyOf": [native, *typed],
        "title": "Gate (letta-evals 0.7-0.20: kind simple, weighted_average or logical)",
    }
    props["gates"] = {**props["gates"], "items": {"anyOf": [props["gates"]["items"], *typed]}}
    props["reward"] = {
        "anyOf": [ref(MetricReward), ref(CustomReward)],
        "title": "Reward (letta-evals 0.21+): the metric `reward`",
    }
    props["cleanup"] = {
        "type": "boolean",
        "title": "Cleanup (letta-evals 0.12+): the target's `cleanup`",
    }
    props["accuracy_scale"] = {
        "enum": list(SCALES),
        "title": "How accuracy thresholds are read: fraction "
        "(ci-evals, default) or percent (letta-evals 0.4-0.20's 0-100, to reproduce its verdict)",
    }
    props["sandbox"] = {
        "type": "object",
        "title": "Sandbox (letta-evals Modal): not supported, run refuses it",
    }
