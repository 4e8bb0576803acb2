"""multi: the seed's examples, the formula grammar and precedence, errors, sub-graders."""

from __future__ import annotations

import asyncio

import pytest

from ci_evals._util.errors import ConfigError
from ci_evals.core.sample import Sample
from ci_evals.core.trajectory import Message, ToolCall, Trajectory
from ci_evals.graders.multi import Formula, evaluate
from tests.fakes.openai_server import FakeOpenAI, openai_env, openai_server  # noqa: F401
from tests.test_string_check import grade_all, make, run_grader

# --- the seed's examples, verbatim -----------------------------------------------------------

SEED_MULTI = {
    "type": "multi",
    "graders": {
        "accuracy": {
            "type": "string_check",
            "name": "Correct answer",
            "input": "{{ sample.output_json.answer }}",
            "reference": "{{ item.correct_answer }}",
            "operation": "eq",
        },
        "format": {
            "type": "text_similarity",
            "name": "Format match",
            "input": "{{ sample.output_text }}",
            "reference": "{{ item.expected_format }}",
            "evaluation_metric": "fuzzy_match",
            "pass_threshold": 0.8,
        },
    },
    "calculate_output": "(accuracy * 0.7) + (format * 0.3)",
}


def fuzzy(a: str, b: str) -> float:
    from rapidfuzz import fuzz, utils

    return fuzz.WRatio(a, b, processor=utils.default_process) / 100


def test_seed_multigrader_weighted_sum():
    out = '{"answer": "42"}'
    fmt = '{"answer": "<number>"}'
    g = run_grader(SEED_MULTI, out, correct_answer="42", expected_format=fmt)
    assert g.score == pytest.approx(0.7 + 0.3 * fuzzy(out, fmt), abs=1e-12)
    assert g.metadata["sub_scores"] == {"accuracy": 1.0, "format": fuzzy(out, fmt)}
    assert g.error is None


def test_seed_multigrader_uses_raw_scores_not_pass_fail():
    # format scores below its pass_threshold (0.8) yet still contributes its raw score.
    out = '{"answer": "41"}'
    g = run_grader(
        SEED_MULTI, out, correct_answer="42", expected_format="completely different text"
    )
    sub = fuzzy(out, "completely different text")
    assert 0 < sub < 0.8
    assert g.score == pytest.approx(0.3 * sub, abs=1e-12)
    assert g.metadata["sub_scores"] == {"accuracy": 0.0, "format": sub}


def eq(field: str) -> dict:
    return {
        "type": "string_check",
        "name": field,
        "input": f"{{{{ sample.output_json.{field} }}}}",
        "operation": "eq",
        "reference": f"{{{{ item.{field} }}}}",
    }


WEIGHTED = {
    "type": "multi",
    "graders": {"name_match": eq("name"), "email_match": eq("email"), "phone_match": eq("phone")},
    "calculate_output": "(name_match * 0.4) + (email_match * 0.4) + (phone_match * 0.2)",
}


@pytest.mark.parametrize(
    "output,expected",
    [
        ('{"name": "Ann", "email": "a@x.io", "phone": "555"}', 1.0),
        ('{"name": "Ann", "email": "a@x.io", "phone": "000"}', 0.8),
        ('{"name": "Ann", "email": "b@x.io", "phone": "555"}', 0.6000000000000001),
        ('{"name": "Bob", "email": "b@x.io", "phone": "555"}', 0.2),
    ],
)
def test_seed_weighted_scoring(output, expected):
    g = run_grader(WEIGHTED, output, name="Ann", email="a@x.io", phone="555")
    assert g.score == expected


def test_documented_tool_call_idiom():
    raw = {
        "type": "multi",
        "name": "tool call",
        "graders": {
            "function_name": {
                "type": "string_check",
                "name": "fn",
                "operation": "eq",
                "reference": "get_weather",
                "input": "{{ sample.output_tools[0].function.name }}",
            },
            "arguments": {
                "type": "string_check",
                "name": "args",
                "operation": "eq",
                "reference": '{"city": "Oslo"}',
                "input": "{{ sample.output_tools[0].function.arguments }}",
            },
        },
        "calculate_output": "0.5 * function_name + 0.5 * arguments",
    }
    traj = Trajectory(
        turns=[
            [
                Message(
                    role="assistant",
                    tool_calls=[
                        ToolCall(id="1", name="get_weather", arguments='{"city": "Bergen"}')
                    ],
                )
            ]
        ]
    )
    assert run_grader(raw, "", traj).score == 0.5


# --- formula: the operator table of the seed, precedence, functions --------------------------


@pytest.mark.parametrize(
    "formula,values,expected",
    [
        ("(a + b) / 2", {"a": 1, "b": 0.5}, 0.75),
        ("a ^ 2", {"a": 0.5}, 0.25),
        ("min(a, b)", {"a": 0.3, "b": 0.6}, 0.3),
        ("max(a, b)", {"a": 0.3, "b": 0.6}, 0.6),
        ("min(a)", {"a": 0.3}, 0.3),
        ("max(a, b, 0.9)", {"a": 0.3, "b": 0.6}, 0.9),
        ("abs(a - b)", {"a": 0.25, "b": 1}, 0.75),
        ("floor(a)", {"a": 0.99}, 0.0),
        ("ceil(a)", {"a": 0.01}, 1.0),
        ("sqrt(a)", {"a": 0.25}, 0.5),
        ("log(a)", {"a": 1}, 0.0),
        ("exp(a)", {"a": 0}, 1.0),
        ("2 * 3 ^ 2", {}, 18.0),  # ^ binds tighter than *
        ("18 / 3 ^ 2", {}, 2.0),  # ... and than /
        ("2 ^ 3 ^ 2", {}, 512.0),  # right-associative
        ("-a ^ 2", {"a": 3}, -9.0),  # -(a^2)
        ("(-a) ^ 2", {"a": 3}, 9.0),
        ("2 ^ -1", {}, 0.5),
        ("a - -b", {"a": 1, "b": 1}, 2.0),
        ("+a", {"a": 0.5}, 0.5),
        ("1 + 2 * 3", {}, 7.0),
        ("1e-1 * 10", {}, 1.0),
        ("a\n  + b", {"a": 0.25, "b": 0.25}, 0.5),
    ],
)
def test_formula_values(formula, values, expected):
    assert Formula(formula, values).evaluate(
        {k: float(v) for k, v in values.items()}
    ) == pytest.approx(expected, abs=1e-12)


def test_log_is_natural():
    assert Formula("log(a)", ["a"]).evaluate({"a": 2.718281828459045}) == 1.0


@pytest.mark.parametrize(
    "formula,values,problem",
    [
        ("a / b", {"a": 1.0, "b": 0.0}, "division by zero"),
        ("sqrt(a - 1)", {"a": 0.0}, "math domain error (math domain error)"),
        ("log(a)", {"a": 0.0}, "math domain error (math domain error)"),
        ("(a - 1) ^ 0.5", {"a": 0.0}, "math domain error (math domain error)"),
        ("exp(1000 * a)", {"a": 1.0}, "numeric overflow"),
        ("10 ^ 400", {}, "numeric overflow"),
        ("1e999 - 1e999", {}, "the result is nan"),
    ],
)
def test_formula_errors_per_sample(formula, values, problem):
    assert evaluate(Formula(formula, values), values) == (None, problem)


@pytest.mark.parametrize(
    "formula,message",
    [
        ("a.real", "uses attribute access, which is not allowed"),
        ("a[0]", "uses indexing, which is not allowed"),
        ("a if b else 0", "uses if/else, which is not allowed"),
        (
            "(lambda: 1)()",
            "calls 'lambda: 1': only min, max, abs, floor, ceil, exp, sqrt, log may be called",
        ),
        ("lambda: 1", "uses lambda, which is not allowed"),
        ("[x for x in (a, b)]", "uses comprehensions, which is not allowed"),
        ("'a'", "contains 'a': only numbers are allowed"),
        ("True", "contains True: only numbers are allowed"),
        ("1j", "contains 1j: only numbers are allowed"),
        ("a > b", "uses comparisons, which is not allowed"),
        ("a and b", "uses and/or, which is not allowed"),
        ("a % b", "uses operator '%': only + - * / ^ are allowed"),
        ("a // b", "uses operator '//': only + - * / ^ are allowed"),
        ("~a", "uses operator '~': only unary - and + are allowed"),
        ("a ** 2", "uses '**'; write powers with '^' (a ^ 2)"),
        ("c + a", "uses 'c', not a grader name (valid: a, b)"),
        ("min + a", "uses 'min', a function, call it (valid: a, b)"),
        (
            "__import__('os')",
            "calls '__import__': only min, max, abs, floor, ceil, exp, sqrt, log may be called",
        ),
        ("pow(a, 2)", "calls 'pow': only min, max, abs, floor, ceil, exp, sqrt, log may be called"),
        ("sqrt(a, b)", "calls sqrt() with 2 arguments; it takes exactly one argument"),
        ("max()", "calls max() with 0 arguments; it takes one or more arguments"),
        ("log(a, base=2)", "passes keyword or * arguments to log()"),
        ("min(*a)", "passes keyword or * arguments to min()"),
        ("(a := 1)", "uses assignments, which is not allowed"),
        ("a +", "is not a valid expression (invalid syntax)"),
        ("a; b", "is not a valid expression (invalid syntax)"),
        ("", "is empty"),
    ],
)
def test_formula_rejected_at_load(formula, message):
    with pytest.raises(ConfigError) as exc:
        Formula(formula, ["a", "b"])
    assert exc.value.message == f"calculate_output '{formula}' {message}"


def test_formula_too_long():
    text = " + ".join(["a"] * 300)
    with pytest.raises(ConfigError) as exc:
        Formula(text, ["a"])
    assert (
        exc.value.message
        == f"calculate_output '{text[:77]}...' is {len(text)} characters long (at most 1000)"
    )


def test_formula_too_deep():
    text = "(" * 60 + "a" + ")" * 60
    Formula("(" * 30 + "a" + ")" * 30, ["a"])  # parentheses alone add no depth
    deep = "-" * 60 + "a"
    with pytest.raises(ConfigError) as exc:
        Formula(deep, ["a"])
    assert exc.value.message == f"calculate_output '{deep}' is nested more than 40 levels deep"
    Formula(text, ["a"])


# --- grading ---------------------------------------------------------------------------------


def sc(reference: str) -> dict:
    return {"type": "string_check", "name": reference, "operation": "eq", "reference": reference}


def test_result_is_clamped_and_raw_kept():
    raw = {"type": "multi", "graders": {"a": sc("x"), "b": sc("x")}, "calculate_output": "a + b"}
    g = run_grader(raw, "x")
    assert (g.score, g.metadata["raw_score"]) == (1.0, 2.0)
    assert g.rationale == "a + b = 2, clamped to 1 (a=1, b=1)"
    g = run_grader(dict(raw, calculate_output="a - b - 1"), "x")
    assert (g.score, g.metadata["raw_score"]) == (0.0, -1.0)


def test_division_by_zero_is_an_error_for_the_sample():
    raw = {"type": "multi", "graders": {"a": sc("x"), "b": sc("y")}, "calculate_output": "a / b"}
    g = run_grader(raw, "x")
    assert (g.score, g.error) == (0.0, "calculate_output 'a / b': division by zero")
    assert g.metadata["sub_scores"] == {"a": 1.0, "b": 0.0}


def test_sub_grader_error_makes_the_grade_an_error():
    raw = {
        "type": "multi",
        "graders": {
            "a": sc("x"),
            "b": {
                "type": "string_check",
                "name": "b",
                "operation": "eq",
                "reference": "{{ item.nope }}",
            },
        },
        "calculate_output": "a + b",
    }
    g = run_grader(raw, "x")
    assert g.score == 0.0
    assert (
        g.error
        == "sub-grader 'b' failed: template variable {{ item.nope }} is missing ('nope' not found)"
    )
    assert g.metadata["sub_scores"] == {"a": 1.0, "b": 0.0}
    assert g.metadata["sub_errors"] == {
        "b": "template variable {{ item.nope }} is missing ('nope' not found)"
    }


def test_python_and_text_similarity_sub_graders():
    raw = {
        "type": "multi",
        "graders": {
            "words": {
                "type": "python",
                "source": "def grade(sample, item):\n    return len(sample['output_text'].split()) / 4",
            },
            "overlap": {
                "type": "text_similarity",
                "reference": "{{ item.ground_truth }}",
                "evaluation_metric": "rouge_1",
            },
        },
        "calculate_output": "min(words, overlap)",
    }
    g = run_grader(raw, "the cat sat", ground_truth="the cat sat down")
    # words = 3/4; rouge_1 F1 = 2 * 1 * 0.75 / 1.75
    assert g.metadata["sub_scores"] == {"words": 0.75, "overlap": pytest.approx(6 / 7, abs=1e-12)}
    assert g.score == 0.75


def test_sub_grader_extractor_is_honoured():
    raw = {
        "type": "multi",
        "graders": {
            "first": {"kind": "tool", "function": "exact_match", "extractor": "first_assistant"},
            "last": {"kind": "tool", "function": "exact_match"},
        },
        "calculate_output": "first * 0.25 + last * 0.75",
    }
    traj = Trajectory(
        turns=[
            [Message(role="assistant", content="Paris")],
            [Message(role="assistant", content="Lyon")],
        ]
    )
    g = run_grader(raw, "Lyon", traj, ground_truth="Paris")
    assert g.metadata["sub_scores"] == {"first": 1.0, "last": 0.0}
    assert g.score == 0.25


def test_sub_graders_run_concurrently_and_usage_is_summed(monkeypatch):
    with FakeOpenAI(latency=0.3) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key-000000")
        cos = {
            "type": "text_similarity",
            "reference": "{{ item.ground_truth }}",
            "evaluation_metric": "cosine",
        }
        raw = {
            "type": "multi",
            "graders": {"a": cos, "b": dict(cos, input="{{ item.input }}")},
            "calculate_output": "(a + b) / 2",
        }
        g = run_grader(raw, "red apple", input="green pear", ground_truth="red apple")
        assert server.max_in_flight == 2
    assert g.metadata["usage"] == {"prompt_tokens": 8, "completion_tokens": 0}
    assert (g.metadata["cache_hits"], g.metadata["retries"]) == (0, 0)
    assert g.metadata["sub_scores"]["a"] == pytest.approx(1.0, abs=1e-12)


def test_many_samples():
    raw = {
        "type": "multi",
        "graders": {
            "a": sc("x"),
            "b": {"type": "python", "source": "def grade(s, i):\n    return 0.5"},
        },
        "calculate_output": "a * b",
    }
    cases = [(Sample(id=i, input="q"), "x" if i % 2 else "y", None) for i in range(20)]
    grades = asyncio.run(grade_all(make(raw), cases))
    assert [g.score for g in grades] == [0.5 if i % 2 else 0.0 for i in range(20)]


# --- configuration errors --------------------------------------------------------------------


def test_nested_multi_is_rejected():
    inner = {"type": "multi", "graders": {"x": sc("x")}, "calculate_output": "x"}
    with pytest.raises(ConfigError) as exc:
        make({"type": "multi", "graders": {"inner": inner}, "calculate_output": "inner"})
    assert (exc.value.key, exc.value.message) == (
        "graders.g.graders.inner",
        "a multi grader cannot contain another multi grader",
    )


@pytest.mark.parametrize("key", ["name-match", "1st", "lambda", "min"])
def test_grader_key_must_be_a_variable(key):
    with pytest.raises(ConfigError) as exc:
        make({"type": "multi", "graders": {key: sc("x")}, "calculate_output": "1"})
    assert exc.value.key == f"graders.g.graders.{key}"
    assert exc.value.message.startswith(f"'{key}' cannot be a formula variable")


def test_sub_grader_config_error_names_its_path():
    with pytest.raises(ConfigError) as exc:
        make(
            {
                "type": "multi",
                "graders": {"acc": {"type": "string_check", "operation": "eq"}},
                "calculate_output": "acc",
            }
        )
    assert (exc.value.key, exc.value.message) == (
        "graders.g.graders.acc.reference",
        "required key is missing",
    )


def test_misspelled_name_suggests_the_closest():
    with pytest.raises(ConfigError) as exc:
        make({"type": "multi", "graders": {"accuracy": sc("x")}, "calculate_output": "acuracy * 2"})
    assert (
        exc.value.message
        == "calculate_output 'acuracy * 2' uses 'acuracy', not a grader name (did you mean 'accuracy'?)"
    )


def test_formula_error_is_a_load_error():
    with pytest.raises(ConfigError) as exc:
        make({"type": "multi", "graders": {"acc": sc("x")}, "calculate_output": "acc.real"})
    assert (
        str(exc.value)
        == "graders.g: calculate_output 'acc.real' uses attribute access, which is not allowed"
    )


def test_empty_graders_rejected():
    with pytest.raises(ConfigError) as exc:
        make({"type": "multi", "graders": {}, "calculate_output": "1"})
    assert exc.value.key == "graders.g.graders"


def test_needs_memory_when_a_sub_grader_reads_a_memory_block():
    mem = {
        "kind": "tool",
        "function": "contains",
        "extractor": "memory_block",
        "extractor_config": {"block_label": "human"},
    }
    assert (
        make({"type": "multi", "graders": {"m": mem}, "calculate_output": "m"}).needs_memory is True
    )
    assert (
        make({"type": "multi", "graders": {"a": sc("x")}, "calculate_output": "a"}).needs_memory
        is False
    )
