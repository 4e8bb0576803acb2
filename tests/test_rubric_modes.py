"""letta-evals 0.17+ rubrics: verbatim template rules, per-sample rubrics, the mode rule, validate."""

from __future__ import annotations

import pytest

from ci_evals._util.errors import ConfigError
from ci_evals.cli.app import main
from ci_evals.config.specs import Context
from ci_evals.config.templating import TemplateError, format_braces
from ci_evals.core.sample import Sample
from ci_evals.graders.base import build_grader
from ci_evals.graders.judge_prompt import JUDGE_SYSTEM_PROMPT
from ci_evals.graders.rubric_modes import JUDGE_SCHEMA, SCHEMA_FORMAT, default_mode
from ci_evals.suite.loader import load_suite
from tests.fakes.openai_server import openai_env, openai_server  # noqa: F401
from tests.test_rubric_grader import grade

REPLY = {"score": 1, "rationale": "ok"}
SAMPLE = Sample(
    id=3, input="Name a dog breed.", ground_truth="beagle", rubric_vars={"tone": "friendly"}
)


def make(raw: dict, tmp_path):
    ctx = Context(tmp_path, tmp_path / "suite.yaml")
    return build_grader("quality", {"kind": "model_judge", **raw}, ctx)


def judge(grader, sample: Sample = SAMPLE):
    return grade(grader, sample, "A beagle {x}.")


# --- the template rules -------------------------------------------------------------------------


def test_format_braces_fills_once_and_keeps_doubled_braces_literal():
    out = format_braces(
        'Q: {input}\nA: {submission}\nJSON: {{"score": 1}}',
        {"input": "{submission}", "submission": "x"},
    )
    assert out == 'Q: {submission}\nA: x\nJSON: {"score": 1}'


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("A {missing}", "rubric references {missing} but no value was given (available: input)"),
        (
            "A {input.upper}",
            "rubric placeholder {input.upper} is not a plain name; write {{ and }} for literal braces",
        ),
        (
            "A {input!r}",
            "rubric placeholder {input!r} is not a plain name; write {{ and }} for literal braces",
        ),
        ("A {}", "rubric placeholder {} is not a plain name; write {{ and }} for literal braces"),
        (
            'A {"score": 1}',
            'rubric placeholder {"score": 1} is not a plain name; write {{ and }} for literal braces',
        ),
        (
            "A } B",
            "rubric template: Single '}' encountered in format string; write {{ and }} for literal braces",
        ),
    ],
)
def test_format_braces_rejects_what_str_format_would(template, message):
    with pytest.raises(TemplateError) as info:
        format_braces(template, {"input": "q"})
    assert str(info.value) == message


# --- verbatim mode ------------------------------------------------------------------------------


def test_verbatim_sends_the_filled_rubric_alone_with_the_json_schema(openai_env, tmp_path):  # noqa: F811
    openai_env.script(REPLY)
    rubric = 'Q: {input}\nExpected: {ground_truth}\nTone: {tone}\nAnswer: {submission}\nReply {{"score": s}}'
    g = judge(make({"prompt": rubric, "rubric_mode": "verbatim"}, tmp_path))
    [body] = openai_env.bodies()
    assert body["messages"] == [
        {
            "role": "user",
            "content": (
                'Q: Name a dog breed.\nExpected: beagle\nTone: friendly\nAnswer: A beagle {x}.\nReply {"score": s}'
            ),
        }
    ]
    assert body["response_format"] == SCHEMA_FORMAT and body["temperature"] == 0.0
    assert (g.score, g.error) == (1.0, None)


def test_verbatim_system_prompt_is_sent_as_given(openai_env, tmp_path):  # noqa: F811
    openai_env.script(REPLY)
    judge(
        make(
            {
                "prompt": "Judge: {submission}",
                "rubric_mode": "verbatim",
                "system_prompt": "Be strict.",
            },
            tmp_path,
        )
    )
    assert openai_env.bodies()[0]["messages"] == [
        {"role": "system", "content": "Be strict."},
        {"role": "user", "content": "Judge: A beagle {x}."},
    ]


def test_wrapped_system_prompt_replaces_the_standard_one(openai_env, tmp_path):  # noqa: F811
    openai_env.script(REPLY)
    judge(make({"prompt": "Judge it", "system_prompt": "Be strict."}, tmp_path))
    [body] = openai_env.bodies()
    assert body["messages"][0] == {"role": "system", "content": "Be strict."}
    assert "## Evaluation Rubric\nJudge it" in body["messages"][1]["content"]
    assert body["response_format"] == {"type": "json_object"}


def test_a_samples_own_rubric_replaces_the_graders_in_both_modes(openai_env, tmp_path):  # noqa: F811
    openai_env.script(REPLY, REPLY)
    own = SAMPLE.model_copy(update={"rubric": "Own: {submission}"})
    judge(make({"prompt": "Grader: {submission}", "rubric_mode": "verbatim"}, tmp_path), own)
    judge(make({"prompt": "Grader rubric"}, tmp_path), own)
    verbatim, wrapped = openai_env.bodies()
    assert verbatim["messages"] == [{"role": "user", "content": "Own: A beagle {x}."}]
    assert wrapped["messages"][0]["content"] == JUDGE_SYSTEM_PROMPT
    assert "## Evaluation Rubric\nOwn: A beagle {x}." in wrapped["messages"][1]["content"]


def test_schema_is_letta_evals_judge_response():
    from pydantic import BaseModel, Field

    class _JudgeResponse(BaseModel):
        score: float = Field(ge=0.0, le=1.0, description="Score between 0.0 and 1.0")
        rationale: str = Field(description="Explanation of the grading decision")

    assert JUDGE_SCHEMA == _JudgeResponse.model_json_schema()


# --- the default rule ---------------------------------------------------------------------------

TYPED = {"gate": {"kind": "simple", "metric_key": "quality"}}


@pytest.mark.parametrize(
    ("mode", "system", "rubric", "suite", "expected"),
    [
        (
            None,
            None,
            "Answer: {submission}",
            {"gate": {"metric_key": "quality"}},
            ("wrapped", "default: not a letta-evals 0.7+ suite"),
        ),
        (
            None,
            None,
            "Answer: {submission}",
            TYPED,
            ("verbatim", "default: letta-evals 0.7+ suite, rubric has {submission}"),
        ),
        (
            None,
            None,
            "Answer: {{submission}}",
            TYPED,
            ("wrapped", "default: rubric has no {submission}"),
        ),
        (
            None,
            None,
            "Rate it.",
            {"reward": {"kind": "metric"}},
            ("wrapped", "default: rubric has no {submission}"),
        ),
        (
            None,
            "Judge.",
            "Rate it.",
            {"reward": {}},
            ("verbatim", "default: letta-evals 0.7+ suite, system_prompt set"),
        ),
        ("wrapped", None, "Answer: {submission}", TYPED, ("wrapped", "rubric_mode")),
        ("verbatim", None, "Rate it.", {}, ("verbatim", "rubric_mode")),
    ],
)
def test_default_mode_rule(mode, system, rubric, suite, expected):
    assert default_mode(mode, system, rubric, suite) == expected


# --- validate: everything checked before any judge call -----------------------------------------


def write_suite(sd, grader: dict, rows: list[dict]):
    sd.write("dataset.jsonl", rows)
    sd.write("outputs.jsonl", [{"id": r.get("id", i), "output": "x"} for i, r in enumerate(rows)])
    sd.suite(
        {
            "name": "t",
            "dataset": "dataset.jsonl",
            "target": {"kind": "replay", "outputs": "outputs.jsonl"},
            "graders": {"quality": {"kind": "model_judge", **grader}},
        }
    )


def test_validate_prints_provider_model_and_mode(sd, capsys):
    write_suite(
        sd,
        {"prompt": "Rate {submission}", "provider": "google", "model": "gemini-2.5-flash"},
        [{"input": "q"}],
    )
    assert main(["validate", str(sd.root / "suite.yaml")]) == 0
    out = capsys.readouterr().out
    assert out.startswith(
        f"{sd.root / 'suite.yaml'}: valid. 1 samples (1 in dataset.jsonl), target replay, "
        "graders: quality (model_judge, last_assistant, pass score >= 1"
    )
    assert out.endswith(
        ", google gemini-2.5-flash, rubric wrapped (default: not a letta-evals 0.7+ suite)); "
        "gates: none (add one with --gate)\n"
    )


@pytest.mark.parametrize(
    ("grader", "rows", "message"),
    [
        (
            {"prompt": "Tone {tone}: {submission}", "rubric_mode": "verbatim"},
            [{"input": "q", "rubric_vars": {"tone": "a"}}, {"id": "b", "input": "q"}],
            "graders.quality: sample b has no value for rubric placeholder {tone} of grader 'quality' "
            "(add it to the sample's rubric_vars)",
        ),
        (
            {"prompt": "ok {submission}", "rubric_mode": "verbatim"},
            [{"input": "q", "rubric": "Own {level}"}],
            "graders.quality: sample 0's own rubric has no value for rubric placeholder {level} of grader 'quality' "
            "(add it to the sample's rubric_vars)",
        ),
        (
            {"prompt": "ok {submission}", "rubric_mode": "verbatim"},
            [{"input": "q", "rubric_vars": {"input": "x"}}],
            "graders.quality: sample 0: rubric_vars key 'input' collides with a built-in placeholder "
            "(input, submission, ground_truth)",
        ),
        (
            {"prompt": 'Reply {"score": 1} for {submission}', "rubric_mode": "verbatim"},
            [{"input": "q"}],
            'graders.quality.prompt: rubric placeholder {"score": 1} is not a plain name; write {{ and }} for literal braces',
        ),
    ],
)
def test_validate_fails_before_any_call_on_unfillable_rubrics(sd, capsys, grader, rows, message):
    write_suite(sd, grader, rows)
    assert main(["validate", str(sd.root / "suite.yaml")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {sd.root / 'suite.yaml'}") and err.rstrip("\n").endswith(message)


def test_wrapped_mode_leaves_unknown_braces_alone_and_validates(sd):
    write_suite(sd, {"prompt": 'Reply {"score": 1} for {submission}'}, [{"input": "q"}])
    assert (
        load_suite(sd.root / "suite.yaml", offline=True).graders["quality"].grader.mode == "wrapped"
    )


# --- per-sample rubric / rubric_path in the dataset ---------------------------------------------


def test_rubric_path_is_relative_to_the_dataset_file(sd):
    sd.write("data/rubrics/dog.txt", "Dog rubric: {submission}")
    sd.write(
        "data/set.jsonl",
        [
            {"input": "q", "rubric_path": "rubrics/dog.txt"},
            {"input": "r", "rubric": "Inline"},
            {"input": "s"},
        ],
    )
    sd.write("outputs.jsonl", [{"id": i, "output": "x"} for i in range(3)])
    sd.suite(
        {
            "name": "t",
            "dataset": "data/set.jsonl",
            "target": {"kind": "replay", "outputs": "outputs.jsonl"},
            "graders": {"quality": {"kind": "model_judge", "prompt": "Grader"}},
        }
    )
    suite = load_suite(sd.root / "suite.yaml", offline=True)
    assert [s.rubric for s in suite.dataset] == ["Dog rubric: {submission}", "Inline", None]


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (
            {"input": "q", "rubric": "a", "rubric_path": "b.txt"},
            "give 'rubric' or 'rubric_path', not both",
        ),
        (
            {"input": "q", "rubric_path": "nope.txt"},
            "cannot read rubric_path 'nope.txt' ({dir}/nope.txt): file not found",
        ),
        ({"input": "q", "rubric": 5}, "'rubric' must be a string"),
    ],
)
def test_bad_per_sample_rubrics_name_file_and_line(sd, capsys, row, message):
    sd.write("dataset.jsonl", [{"input": "fine"}, row])
    sd.write("outputs.jsonl", [{"id": 0, "output": "x"}, {"id": 1, "output": "x"}])
    sd.suite(
        {
            "name": "t",
            "dataset": "dataset.jsonl",
            "target": {"kind": "replay", "outputs": "outputs.jsonl"},
            "graders": {"quality": {"kind": "model_judge", "prompt": "Grader"}},
        }
    )
    with pytest.raises(ConfigError) as info:
        load_suite(sd.root / "suite.yaml", offline=True)
    assert str(info.value) == f"{sd.root / 'dataset.jsonl'}:2: " + message.format(dir=sd.root)


def test_csv_rubric_columns(sd):
    sd.write("r.txt", "From file")
    sd.write("dataset.csv", "input,rubric,rubric_path\nq1,Inline,\nq2,,r.txt\nq3,,\n")
    sd.write("outputs.jsonl", [{"id": i, "output": "x"} for i in range(3)])
    sd.suite(
        {
            "name": "t",
            "dataset": "dataset.csv",
            "target": {"kind": "replay", "outputs": "outputs.jsonl"},
            "graders": {"quality": {"kind": "model_judge", "prompt": "Grader"}},
        }
    )
    assert [s.rubric for s in load_suite(sd.root / "suite.yaml", offline=True).dataset] == [
        "Inline",
        "From file",
        None,
    ]
