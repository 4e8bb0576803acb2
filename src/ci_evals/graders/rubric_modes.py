"""Which rubric mode a judge gets, and the letta-evals 0.17+ ``verbatim`` mode itself.

``wrapped`` (letta-evals 0.4-0.16, ci-evals' own suites): the rubric goes inside the standard
judge prompt (see :mod:`ci_evals.graders.rubric`). ``verbatim`` (letta-evals 0.17+): the rubric,
filled by the ``str.format`` rules, is the whole user prompt; only the grader's ``system_prompt``
is sent as a system message; the reply is requested with letta-evals' JSON schema.

The rule (:func:`default_mode`), printed by ``validate``: a grader's ``rubric_mode`` wins; without
it, a grader gets ``verbatim`` when its suite is written in letta-evals 0.7+ syntax (a typed
``gate.kind`` or a ``reward``) and it has a ``system_prompt`` or its rubric has a ``{submission}``
placeholder (every 0.17+ rubric has one; none of 0.7-0.16 does); every other grader gets
``wrapped``.
"""

from __future__ import annotations

from typing import Any

from ci_evals._util.errors import ConfigError
from ci_evals.config.templating import TemplateError, brace_parts, format_braces
from ci_evals.core.sample import Sample

RESERVED = ("input", "submission", "ground_truth")
JUDGE_SCHEMA = {
    "properties": {
        "score": {
            "description": "Score between 0.0 and 1.0",
            "maximum": 1.0,
            "minimum": 0.0,
            "title": "Score",
            "type": "number",
        },
        "rationale": {
            "description": "Explanation of the grading decision",
            "title": "Rationale",
            "type": "string",
        },
    },
    "required": ["score", "rationale"],
    "title": "_JudgeResponse",
    "type": "object",
}
"""letta-evals' ``_JudgeResponse`` JSON schema, sent to every provider as letta-evals sends it."""
SCHEMA_FORMAT = {
    "type": "json_schema",
    "json_schema": {"name": "JudgeResponse", "schema": JUDGE_SCHEMA},
}
JSON_OBJECT = {"type": "json_object"}


def modern_suite(raw_suite: Any) -> bool:
    """Whether a suite uses letta-evals 0.7+ syntax: a typed ``gate.kind`` or a ``reward``."""
    if not isinstance(raw_suite, dict):
        return False
    gate = raw_suite.get("gate")
    return "reward" in raw_suite or (isinstance(gate, dict) and "kind" in gate)


def placeholders(rubric: str) -> set[str]:
    """The placeholder names of a rubric under the 0.17+ rules; TemplateError when malformed."""
    return {name for _, name in brace_parts(rubric) if name is not None}


def references_submission(rubric: str) -> bool:
    """Whether the rubric has a ``{submission}`` placeholder (``{{submission}}`` is literal text)."""
    try:
        return "submission" in placeholders(rubric)
    except TemplateError:
        return False


def default_mode(
    rubric_mode: str | None, system_prompt: str | None, rubric: str, raw_suite: Any
) -> tuple[str, str]:
    """(mode, why) by the rule in the module docstring."""
    if rubric_mode is not None:
        return rubric_mode, "rubric_mode"
    if not modern_suite(raw_suite):
        return "wrapped", "default: not a letta-evals 0.7+ suite"
    if system_prompt is not None:
        return "verbatim", "default: letta-evals 0.7+ suite, system_prompt set"
    if references_submission(rubric):
        return "verbatim", "default: letta-evals 0.7+ suite, rubric has {submission}"
    return "wrapped", "default: rubric has no {submission}"


def check_verbatim_sample(sample: Sample, grader_fields: set[str], grader: str) -> None:
    """ConfigError unless the rubric this sample is judged with can be filled from it."""
    given = sample.rubric_vars or {}
    key = f"graders.{grader}"
    clash = sorted(set(given) & set(RESERVED))
    if clash:
        raise ConfigError(
            f"sample {sample.id}: rubric_vars key '{clash[0]}' collides with a built-in placeholder "
            f"({', '.join(RESERVED)})",
            key=key,
        )
    where, fields = f"sample {sample.id}", grader_fields
    if sample.rubric is not None:
        where = f"sample {sample.id}'s own rubric"
        try:
            fields = placeholders(sample.rubric)
        except TemplateError as exc:
            raise ConfigError(f"{where}: {exc}", key=key) from None
    missing = sorted(fields - set(RESERVED) - set(given))
    if missing:
        raise ConfigError(
            f"{where} has no value for rubric placeholder {{{missing[0]}}} of grader '{grader}' "
            "(add it to the sample's rubric_vars)",
            key=key,
        )


def verbatim_messages(
    template: str, sample: Sample, input_text: str, submission: str, system_prompt: str | None
) -> list[dict[str, Any]]:
    """The judge's messages in verbatim mode; TemplateError for a placeholder without a value."""
    values: dict[str, Any] = {
        "input": input_text,
        "ground_truth": sample.ground_truth or "",
        "submission": submission,
    }
    values.update((k, v) for k, v in (sample.rubric_vars or {}).items() if k not in values)
    system = [{"role": "system", "content": system_prompt}] if system_prompt is not None else []
    return system + [{"role": "user", "content": format_braces(template, values)}]
