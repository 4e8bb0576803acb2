"""string_check: every operation, the seed's examples, templating and load-time errors."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from ci_evals._util.errors import ConfigError
from ci_evals.config.specs import Context
from ci_evals.core.sample import GradeResult, Sample
from ci_evals.core.trajectory import Message, ToolCall, Trajectory
from ci_evals.graders.base import Grader, build_grader


def make(raw: dict[str, Any], ctx: Context | None = None) -> Grader:
    """Build a grader from a raw spec (an OpenAI object pasted verbatim works)."""
    return build_grader("g", raw, ctx or Context(Path(".")))


async def grade_all(
    grader: Grader, cases: list[tuple[Sample, str, Trajectory | None]]
) -> list[GradeResult]:
    await grader.start()
    try:
        return list(
            await asyncio.gather(
                *(grader.grade(s, sub, t or Trajectory.from_text(sub)) for s, sub, t in cases)
            )
        )
    finally:
        await grader.aclose()


def run_grader(
    raw: dict[str, Any] | Grader, submission: str, trajectory: Trajectory | None = None, **row: Any
) -> GradeResult:
    """Grade one submission against a dataset row given as keyword arguments."""
    grader = raw if isinstance(raw, Grader) else make(raw)
    row.setdefault("input", "q")
    known = {k: row.pop(k) for k in ("id", "input", "ground_truth", "metadata", "tags") if k in row}
    sample = Sample(id=known.pop("id", 1), **known, extra_vars=row)
    return asyncio.run(grade_all(grader, [(sample, submission, trajectory)]))[0]


def check(operation: str, text: str, reference: str) -> float:
    return run_grader(
        {
            "type": "string_check",
            "name": "n",
            "input": text,
            "operation": operation,
            "reference": reference,
        },
        "unused",
    ).score


# --- the seed's examples, pasted verbatim ----------------------------------------------------

CORRECT_CATEGORY = {
    "type": "string_check",
    "name": "Correct category",
    "input": "{{ sample.output_text }}",
    "operation": "eq",
    "reference": "{{ item.correct_label }}",
}
MENTIONS_PRODUCT = {
    "type": "string_check",
    "name": "Mentions product",
    "input": "{{ sample.output_text }}",
    "operation": "ilike",
    "reference": "{{ item.product_name }}",
}
NO_PROFANITY = {
    "type": "string_check",
    "name": "No profanity",
    "input": "{{ sample.output_text }}",
    "operation": "neq",
    "reference": "inappropriate_word",
}


def test_seed_exact_match_classification():
    assert run_grader(CORRECT_CATEGORY, "billing", correct_label="billing").score == 1.0
    assert run_grader(CORRECT_CATEGORY, "Billing", correct_label="billing").score == 0.0
    assert run_grader(CORRECT_CATEGORY, "billing ", correct_label="billing").score == 0.0


def test_seed_contains_keyword_ignores_case():
    assert (
        run_grader(MENTIONS_PRODUCT, "Try the ACME Widget today", product_name="acme widget").score
        == 1.0
    )
    assert run_grader(MENTIONS_PRODUCT, "Try our gadget", product_name="acme widget").score == 0.0


def test_seed_neq_is_whole_string_inequality_not_doesnt_contain():
    # The seed's warning: neq is 1 unless the entire input equals the reference.
    assert run_grader(NO_PROFANITY, "this has inappropriate_word inside").score == 1.0
    assert run_grader(NO_PROFANITY, "inappropriate_word").score == 0.0


def test_seed_display_name_comes_from_name():
    assert make(CORRECT_CATEGORY).label == "Correct category"


# --- operations ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "operation,text,reference,expected",
    [
        ("eq", "Paris", "Paris", 1.0),
        ("eq", "Paris", "paris", 0.0),
        ("eq", "", "", 1.0),
        ("ne", "Paris", "paris", 1.0),
        ("ne", "Paris", "Paris", 0.0),
        ("neq", "a", "b", 1.0),
        ("like", "The capital is Paris.", "Paris", 1.0),
        ("like", "The capital is paris.", "Paris", 0.0),
        ("like", "100% sure", "%", 1.0),
        ("like", "abc", "a%c", 0.0),  # no SQL wildcards
        ("like", "anything", "", 1.0),  # an empty reference is a substring of everything
        ("ilike", "The capital is PARIS.", "paris", 1.0),
        ("ilike", "STRASSE", "straße", 1.0),  # casefold
        ("ilike", "東京は首都", "東京", 1.0),
        ("ilike", "Lyon", "paris", 0.0),
    ],
)
def test_operation(operation, text, reference, expected):
    assert check(operation, text, reference) == expected


def test_no_trimming():
    assert check("eq", " Paris", "Paris") == 0.0


def test_input_defaults_to_output_text():
    raw = {"kind": "string_check", "operation": "eq", "reference": "{{ item.ground_truth }}"}
    assert run_grader(raw, "Paris", ground_truth="Paris").score == 1.0


def test_rationale_shows_both_sides():
    g = run_grader(CORRECT_CATEGORY, "billing", correct_label="sales")
    assert g.rationale == "'billing' eq 'sales': false"
    assert g.error is None


# --- templating ----------------------------------------------------------------------------


def test_output_json_path():
    raw = {
        "type": "string_check",
        "name": "a",
        "input": "{{ sample.output_json.answer }}",
        "operation": "eq",
        "reference": "{{ item.correct_answer }}",
    }
    assert run_grader(raw, '{"answer": "42"}', correct_answer="42").score == 1.0


def test_output_tools_path():
    traj = Trajectory(
        turns=[
            [
                Message(role="user", content="q"),
                Message(
                    role="assistant",
                    tool_calls=[
                        ToolCall(id="c1", name="get_weather", arguments='{"city": "Oslo"}')
                    ],
                ),
            ]
        ]
    )
    name = {
        "type": "string_check",
        "name": "fn",
        "input": "{{ sample.output_tools[0].function.name }}",
        "operation": "eq",
        "reference": "get_weather",
    }
    args = {
        "type": "string_check",
        "name": "args",
        "input": "{{ sample.output_tools[0].function.arguments }}",
        "operation": "eq",
        "reference": '{"city": "{{ item.city }}"}',
    }
    assert run_grader(name, "", traj).score == 1.0
    assert run_grader(args, "", traj, city="Oslo").score == 1.0


def test_nested_item_path():
    raw = {"kind": "string_check", "operation": "eq", "reference": "{{ item.metadata.label }}"}
    assert run_grader(raw, "spam", metadata={"label": "spam"}).score == 1.0


def test_missing_variable_is_a_sample_error_not_empty_string():
    g = run_grader(CORRECT_CATEGORY, "")
    assert g.score == 0.0
    assert (
        g.error
        == "template variable {{ item.correct_label }} is missing ('correct_label' not found)"
    )


def test_output_json_missing_when_not_json():
    raw = {
        "kind": "string_check",
        "input": "{{ sample.output_json.answer }}",
        "operation": "eq",
        "reference": "x",
    }
    g = run_grader(raw, "not json")
    assert (g.score, g.error) == (
        0.0,
        "template variable {{ sample.output_json.answer }} is missing ('output_json' not found)",
    )


# --- load-time errors ----------------------------------------------------------------------


def test_unknown_operation_is_config_error():
    with pytest.raises(ConfigError) as exc:
        make({"type": "string_check", "name": "n", "operation": "contains", "reference": "x"})
    assert exc.value.key == "graders.g.operation"


def test_unknown_template_namespace_is_config_error():
    with pytest.raises(ConfigError) as exc:
        make(
            {"type": "string_check", "name": "n", "operation": "eq", "reference": "{{ row.label }}"}
        )
    assert str(exc.value) == (
        "graders.g: reference: bad template variable '{{ row.label }}'; use "
        "'{{ item.<column> }}' or '{{ sample.output_text }}' (namespaces: item, sample)"
    )


def test_unknown_key_is_config_error():
    with pytest.raises(ConfigError) as exc:
        make(
            {
                "type": "string_check",
                "name": "n",
                "operation": "eq",
                "reference": "x",
                "refrence": "y",
            }
        )
    assert exc.value.message == "unknown key 'refrence' (did you mean 'reference'?)"


def test_reference_is_required():
    with pytest.raises(ConfigError) as exc:
        make({"type": "string_check", "name": "n", "operation": "eq"})
    assert (exc.value.key, exc.value.message) == ("graders.g.reference", "required key is missing")
