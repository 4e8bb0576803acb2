"""The LLM judge's prompt kit: the system prompt, the rubric's placeholders, and reading the reply.

Shared by the LLM rubric judge (:mod:`ci_evals.graders.rubric`), the Letta agent judge
(:mod:`ci_evals.graders.letta_judge`) and the OpenAI-format model graders: the same prompt and the
same rules for a usable reply (a JSON object, ``score`` a finite number) whatever answers it.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from typing import Any

from ci_evals._util.errors import ConfigError
from ci_evals._util.redact import scrub_and_shorten
from ci_evals.config.templating import TemplateError, grader_context, substitute
from ci_evals.core.sample import Sample

JUDGE_SYSTEM_PROMPT = """You are an evaluation judge. You will be given:
1. A rubric describing evaluation criteria
2. An input/question
3. A submission to evaluate

Evaluate the submission according to the rubric and return a JSON response with:
{
    "score": (REQUIRED: a decimal number between 0.0 and 1.0 inclusive),
    "rationale": "explanation of your grading decision"
}

IMPORTANT:
- The score MUST be a number between 0.0 and 1.0 (inclusive)
- 0.0 means complete failure, 1.0 means perfect
- Use decimal values for partial credit (e.g., 0.25, 0.5, 0.75)
- Be objective and follow the rubric strictly"""

STANDARD_PLACEHOLDERS = ("input", "submission", "ground_truth")


class JudgeReplyError(ValueError):
    """The judge answered, but not with what the grader needs (bad JSON, a missing field)."""


# --- prompt building (shared with the agent judge) ----------------------------------------------


def input_text(sample: Sample) -> str:
    """The sample's input as the judge reads it: the string, or the turns one per line."""
    return (
        sample.input if isinstance(sample.input, str) else "\n".join(str(t) for t in sample.input)
    )


def truth_text(sample: Sample) -> str:
    """The sample's ground truth as the judge reads it: the string, or the turns one per line
    (none: empty)."""
    truth = sample.ground_truth
    return "\n".join(truth) if isinstance(truth, list) else truth or ""


def check_rubric_vars(sample: Sample, rubric_vars: Iterable[str], grader: str) -> None:
    """ConfigError naming the declared rubric variables ``sample`` does not give (before a run)."""
    given = sample.rubric_vars or {}
    missing = [v for v in rubric_vars if v not in given]
    if missing:
        names = ", ".join(f"'{v}'" for v in missing)
        raise ConfigError(
            f"sample {sample.id} is missing rubric variable {names} required by grader '{grader}'",
            key=f"graders.{grader}.rubric_vars",
        )


def fill_rubric(
    rubric: str,
    sample: Sample,
    submission: str,
    rubric_vars: Iterable[str] = (),
    tool_calls: list[dict[str, Any]] | None = None,
) -> str:
    """The rubric with ``{{ item.x }}``, ``{input}``, ``{submission}``, ``{ground_truth}`` and the
    declared rubric variables substituted in one pass (other braces stay; substituted text is
    never expanded again).

    Raises TemplateError for a missing ``{{ ... }}`` variable or rubric variable.
    """
    context = (
        grader_context(sample.item(), submission, tool_calls or []) if "{{" in rubric else None
    )
    values: dict[str, Any] = {
        "input": input_text(sample),
        "submission": submission,
        "ground_truth": sample.ground_truth or "",
    }
    given = sample.rubric_vars or {}
    for var in rubric_vars:
        if var not in given:
            raise TemplateError(f"sample {sample.id} has no rubric variable '{var}'")
        values[var] = given[var]
    return substitute(rubric, values, context)


def build_judge_prompt(
    rubric: str, sample: Sample, submission: str, *, tool_name: str | None = None
) -> str:
    """The judge's user prompt: rubric, original input, ground truth (if any), submission, steps.

    ``rubric`` is already filled. With ``tool_name`` (agent judges) the last step asks for a call
    to that tool instead of a JSON reply.
    """
    parts = [
        "You are an evaluation judge. An agent was given a task and returned a submission for that task.",
        "Your job is to evaluate the quality of that submission according to the rubric below.",
        "",
        "IMPORTANT: Do NOT answer the original question yourself. You are ONLY evaluating someone else's answer.",
        "",
        "---",
        "",
        "## Evaluation Rubric",
        rubric,
        "",
        "---",
        "",
        "## Original Question Given to the Agent",
        input_text(sample),
    ]
    if sample.ground_truth:
        parts += ["", "## Expected Answer (Ground Truth)", truth_text(sample)]
    parts += [
        "",
        "---",
        "",
        "## The Agent's Submission (What You Are Evaluating)",
        submission,
        "",
        "---",
        "",
        "## Your Instructions",
        "",
        "1. Review the evaluation rubric carefully",
        "2. Compare the agent's submission against the original question and rubric criteria",
        "3. Determine a score between 0.0 (complete failure) and 1.0 (perfect)",
    ]
    if tool_name:
        parts += [
            f"4. Use the {tool_name} tool to submit your evaluation with:",
            "   - score: a float between 0.0 and 1.0",
            "   - rationale: your reasoning for the score",
            "",
            f"Do NOT respond with text - you MUST call the {tool_name} tool to complete the evaluation.",
        ]
    else:
        parts += [
            "4. Return your evaluation as JSON with:",
            "   - score: a float between 0.0 and 1.0",
            "   - rationale: your reasoning for the score",
        ]
    return "\n".join(parts)


# --- reply parsing ------------------------------------------------------------------------------


_FENCE = re.compile(r"^```[\w-]*\s*\n?(.*?)\n?```\s*$", re.S)


def parse_json_object(text: str) -> dict[str, Any]:
    """The JSON object in a judge reply (a ```json fence or text around the braces is tolerated)."""
    stripped = text.strip()
    fenced = _FENCE.match(stripped)
    if fenced:
        stripped = fenced.group(1).strip()
    candidates = [stripped]
    start, end = stripped.find("{"), stripped.rfind("}")
    if 0 <= start < end and (start, end) != (0, len(stripped) - 1):
        candidates.append(stripped[start : end + 1])
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    raise JudgeReplyError(f"judge reply is not a JSON object: {scrub_and_shorten(text, 200)!r}")


def number_field(obj: dict[str, Any], name: str) -> float:
    """A required finite number (a numeric string is accepted) from a judge reply."""
    if name not in obj or obj[name] is None:
        raise JudgeReplyError(f"judge reply has no '{name}' (keys: {', '.join(obj) or 'none'})")
    value = obj[name]
    if isinstance(value, bool):
        raise JudgeReplyError(f"judge reply '{name}' is not a number: {value!r}")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise JudgeReplyError(f"judge reply '{name}' is not a number: {value!r}") from None
    if not math.isfinite(number):
        raise JudgeReplyError(f"judge reply '{name}' is not finite: {value!r}")
    return number
