"""The Letta judge's tool: its offline check in the judge's .af, and the grade read from its call.

The tool (``judge_tool_name``, default ``submit_grade``) must exist in the .af, be attached to its
agent, need no approval, and take ``score: float`` and ``rationale: str`` (read from its source
code and from its JSON schema, whichever the .af holds): checked before anything runs. At run time
the judge's first call of the tool gives the grade, its score clamped to [0, 1] (the raw score is
kept in ``metadata.raw_score``); no call, arguments that are not a JSON object, or a score that is
not a finite number give score 0 with an error.
"""

from __future__ import annotations

import ast
import json
import math
from typing import Any

from ci_evals._util.errors import ConfigError
from ci_evals._util.redact import scrub_and_shorten
from ci_evals.core.sample import GradeResult
from ci_evals.letta.client import AgentFile
from ci_evals.letta.messages import FAILED_STOPS, calls_of, to_turn

DEFAULT_TOOL = "submit_grade"
_SCHEMA_TYPES = {
    "number": "float",
    "string": "str",
    "integer": "int",
    "boolean": "bool",
    "array": "list",
    "object": "dict",
}


# -- offline checks of the judge's .af ------------------------------------------------------------


def _source_params(source: str, name: str) -> dict[str, str] | None:
    """``{param: annotation}`` of function ``name`` in the tool's source; None if not found."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
            args = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
            return {a.arg: ast.unparse(a.annotation) if a.annotation else "" for a in args}
    return None


def _schema_params(schema: Any) -> dict[str, str] | None:
    """``{param: python type}`` from the tool's JSON schema; None when it has none."""
    props = (
        ((schema or {}).get("parameters") or {}).get("properties")
        if isinstance(schema, dict)
        else None
    )
    if not isinstance(props, dict):
        return None
    out = {}
    for k, v in props.items():
        kind = v.get("type", "") if isinstance(v, dict) else ""
        out[k] = _SCHEMA_TYPES.get(kind, str(kind)) if isinstance(kind, str) else json.dumps(kind)
    return out


def _signature(params: dict[str, str]) -> str:
    return "(" + ", ".join(f"{k}: {v}" if v else k for k, v in params.items()) + ")"


def check_judge_tool(af: AgentFile, tool_name: str) -> None:
    """The judge tool exists, is attached, needs no approval, and takes score: float, rationale: str."""
    names = [t.get("name") for t in af.tools]
    tool = next((t for t in af.tools if t.get("name") == tool_name), None)
    if tool is None:
        raise ConfigError(
            f"Judge tool '{tool_name}' not found in agent file {af.ref}. Available tools: {names}"
        )
    attached = af.agent.get("tool_ids")
    if isinstance(attached, list) and tool.get("id") is not None and tool["id"] not in attached:
        raise ConfigError(
            f"Judge tool '{tool_name}' is in agent file {af.ref} but not attached to its agent "
            f"(its id '{tool['id']}' is not in the agent's tool_ids)"
        )
    rules = af.agent.get("tool_rules") or []
    needs_approval = tool.get("default_requires_approval") or any(
        isinstance(r, dict)
        and r.get("type") == "requires_approval"
        and r.get("tool_name") == tool_name
        for r in rules
    )
    if needs_approval:
        raise ConfigError(
            f"Judge tool '{tool_name}' in agent file {af.ref} requires approval, "
            "so the judge could never submit a grade"
        )
    found = [
        p
        for p in (
            _source_params(tool.get("source_code") or "", tool_name),
            _schema_params(tool.get("json_schema")),
        )
        if p is not None
    ]
    if not found:
        raise ConfigError(
            f"Judge tool '{tool_name}' in agent file {af.ref} has neither source code defining "
            f"{tool_name}() nor a JSON schema, so its parameters cannot be checked"
        )
    for params in found:
        if params.get("score") != "float" or params.get("rationale") != "str":
            raise ConfigError(
                f"Judge tool '{tool_name}' in agent file {af.ref} must take parameters "
                f"score: float and rationale: str; it takes {_signature(params)}"
            )


# -- the judge's call ---------------------------------------------------------------------------


def read_verdict(
    messages: list[dict[str, Any]], stop: str | None, tool: str, meta: dict[str, Any]
) -> GradeResult:
    """The grade from the judge's first call of the judge tool."""
    call = next(
        (
            c
            for m in messages
            if m.get("message_type") in ("tool_call_message", "approval_request_message")
            for c in calls_of(m)
            if c.name == tool
        ),
        None,
    )
    if call is None:
        said = [m.content for m in to_turn(messages) if m.role == "assistant" and m.content]
        why = f" (the run stopped with '{stop}')" if stop in FAILED_STOPS else ""
        return GradeResult(
            score=0.0,
            rationale=said[-1] if said else None,
            metadata=meta,
            error=f"the judge agent did not call the {tool} tool{why}",
        )
    try:
        args = json.loads(call.arguments)
    except ValueError:
        args = None
    if not isinstance(args, dict):
        return GradeResult(
            score=0.0,
            metadata=meta,
            error=f"the judge called {tool} with arguments that are not a JSON object: "
            f"{scrub_and_shorten(call.arguments, 200)}",
        )
    raw: Any = args.get("score")  # any JSON value: float() decides
    try:
        score = float(raw)
    except (TypeError, ValueError, OverflowError):
        score = math.nan
    if math.isnan(score):
        return GradeResult(
            score=0.0,
            metadata=meta,
            rationale=_text(args.get("rationale")),
            error=f"the judge called {tool} without a numeric score (score={raw!r})",
        )
    if not math.isfinite(score):  # "inf", or 1e999 (which float() reads as inf): never clamped to 1
        return GradeResult(
            score=0.0,
            metadata=meta,
            rationale=_text(args.get("rationale")),
            error=f"the judge called {tool} with a score that is not finite "
            f"(score={scrub_and_shorten(str(raw), 60)})",
        )
    clamped = min(1.0, max(0.0, score))
    if clamped != score:
        meta["raw_score"] = score
    return GradeResult(score=clamped, rationale=_text(args.get("rationale")), metadata=meta)


def _text(value: Any) -> str:
    return "" if value is None else value if isinstance(value, str) else json.dumps(value)
