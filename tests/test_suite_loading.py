"""Strict suite validation: unknown keys, typos, gates, paths, custom code; exact messages and exit 2."""

from __future__ import annotations

from ci_evals.cli.app import main
from tests.conftest import replay_suite

DATA = [
    {"id": 1, "input": "q1", "ground_truth": "a"},
    {"id": 2, "input": "q2", "ground_truth": "b"},
]
OUT = [{"id": 1, "output": "a"}, {"id": 2, "output": "x"}]
ACC = {"acc": {"kind": "tool", "function": "exact_match"}}


def setup(sd, spec):
    sd.write("dataset.jsonl", DATA)
    sd.write("outputs.jsonl", OUT)
    return sd.suite(spec)


def validate(sd, capsys) -> tuple[int, str]:
    rc = main(["validate", str(sd.root / "suite.yaml")])
    err = capsys.readouterr().err.strip()
    return rc, err


def test_valid_suite_validates(sd, capsys):
    setup(sd, replay_suite(ACC, {"op": "gte", "value": 0.5}))
    assert main(["validate", str(sd.root / "suite.yaml")]) == 0
    out = capsys.readouterr().out
    assert (
        "valid. 2 samples (2 in dataset.jsonl), target replay, graders: acc (tool, last_assistant, pass score >= 0.5); gates: acc avg_score gte 0.5"
        in out
    )


def test_typo_at_top_level_names_key_line_and_closest(sd, capsys):
    spec = replay_suite(ACC, {"op": "gte", "value": 0.5})
    spec["max_concurent"] = 3
    setup(sd, spec)
    rc, err = validate(sd, capsys)
    assert rc == 2
    assert (
        err
        == f"error: {sd.root / 'suite.yaml'}:13: max_concurent: unknown key 'max_concurent' (did you mean 'max_concurrent'?)"
    )


def test_typo_in_grader_names_yaml_path(sd, capsys):
    setup(
        sd,
        replay_suite(
            {"acc": {"kind": "tool", "fucntion": "exact_match"}}, {"op": "gte", "value": 0.5}
        ),
    )
    rc, err = validate(sd, capsys)
    assert rc == 2
    assert err.endswith("graders.acc.fucntion: unknown key 'fucntion' (did you mean 'function'?)")
    assert ":9: " in err


def test_typo_in_target_is_an_error(sd, capsys):
    spec = replay_suite(ACC, {"op": "gte", "value": 0.5})
    spec["target"]["output"] = "outputs.jsonl"
    del spec["target"]["outputs"]
    setup(sd, spec)
    rc, err = validate(sd, capsys)
    assert rc == 2
    assert err.endswith("target.output: unknown key 'output' (did you mean 'outputs'?)")


def test_typo_in_gate_is_an_error(sd, capsys):
    setup(sd, replay_suite(ACC, {"op": "gte", "valeu": 0.5}))
    rc, err = validate(sd, capsys)
    assert rc == 2
    assert err.endswith("gate.valeu: unknown key 'valeu' (did you mean 'value'?)")


def test_metric_key_naming_no_grader_is_an_error(sd, capsys):
    setup(sd, replay_suite(ACC, {"metric_key": "acuracy", "op": "gte", "value": 0.5}))
    rc, err = validate(sd, capsys)
    assert rc == 2
    assert err.endswith(
        "gate.metric_key: metric_key 'acuracy' names no grader and no built-in metric (did you mean 'acc'?)"
    )


def test_accuracy_above_100_is_rejected(sd, capsys):
    setup(sd, replay_suite(ACC, {"metric": "accuracy", "op": "gte", "value": 150}))
    rc, err = validate(sd, capsys)
    assert rc == 2
    assert err.endswith(
        "gate.value: accuracy value 150 is above 100 (a fraction in [0, 1], or a percentage up to 100)"
    )


def test_unknown_op_is_an_error(sd, capsys):
    setup(sd, replay_suite(ACC, {"op": "ge", "value": 0.5}))
    rc, err = validate(sd, capsys)
    assert rc == 2
    assert err.endswith("suite.yaml:11: gate.op: unknown op 'ge' (did you mean 'gte'?)")


def test_unknown_grader_function_names_closest(sd, capsys):
    setup(
        sd,
        replay_suite(
            {"acc": {"kind": "tool", "function": "exact_mach"}}, {"op": "gte", "value": 1}
        ),
    )
    rc, err = validate(sd, capsys)
    assert rc == 2
    assert err.endswith(
        "graders.acc.function: unknown grader function 'exact_mach' (did you mean 'exact_match'?)"
    )


def test_unknown_grader_kind_names_closest(sd, capsys):
    setup(
        sd,
        replay_suite(
            {"acc": {"kind": "tol", "function": "exact_match"}}, {"op": "gte", "value": 1}
        ),
    )
    rc, err = validate(sd, capsys)
    assert rc == 2
    assert err.endswith("graders.acc.kind: unknown grader kind 'tol' (did you mean 'tool'?)")


def test_missing_dataset_is_an_error_naming_it(sd, capsys):
    sd.write("outputs.jsonl", OUT)
    sd.suite(replay_suite(ACC, {"op": "gte", "value": 1}))
    rc, err = validate(sd, capsys)
    assert rc == 2
    assert err == (
        f"error: {sd.root / 'suite.yaml'}:2: dataset: dataset file not found: 'dataset.jsonl', "
        f"relative to the suite ({sd.root / 'dataset.jsonl'})"
    )


def test_yaml_syntax_error_names_line(sd, capsys):
    sd.write("suite.yaml", "name: t\ngraders:\n  acc: [unclosed\n")
    rc, err = validate(sd, capsys)
    assert rc == 2
    assert err.startswith(f"error: {sd.root / 'suite.yaml'}:4: YAML syntax error:")


def test_missing_required_key(sd, capsys):
    spec = replay_suite(ACC, {"op": "gte", "value": 1})
    del spec["dataset"]
    setup(sd, spec)
    rc, err = validate(sd, capsys)
    assert rc == 2
    assert err == f"error: {sd.root / 'suite.yaml'}: dataset: required key is missing"


def test_gate_metric_key_may_be_omitted_with_one_grader(sd):
    setup(sd, replay_suite(ACC, {"op": "gte", "value": 0.5}))
    assert sd.run() == 0
    assert sd.summary()["gates"][0]["metric_key"] == "acc"


def test_relative_paths_resolve_against_the_suite_folder(sd, tmp_path, monkeypatch):
    setup(sd, replay_suite(ACC, {"op": "gte", "value": 0.5}))
    monkeypatch.chdir(tmp_path.parent)
    assert sd.run() == 0


def test_zero_max_concurrent_is_rejected(sd, capsys):
    setup(sd, replay_suite(ACC, {"op": "gte", "value": 0.5}, max_concurrent=0))
    rc, err = validate(sd, capsys)
    assert rc == 2
    assert err.endswith("max_concurrent: Input should be greater than or equal to 1 (got 0)")


def test_letta_evals_grader_file_loads_without_letta_evals(sd):
    sd.write(
        "graders.py",
        (
            "from letta_evals.decorators import grader\n"
            "from letta_evals.models import GradeResult, Sample\n\n"
            "@grader\n"
            "def first_letter(sample: Sample, submission: str) -> GradeResult:\n"
            "    ok = submission[:1] == sample.ground_truth[:1]\n"
            "    return GradeResult(score=1.0 if ok else 0.0, rationale='first letter', metadata={'n': 1})\n"
        ),
    )
    setup(
        sd,
        replay_suite(
            {"fl": {"kind": "tool", "function": "graders.py:first_letter"}},
            {"op": "gte", "value": 0.5},
        ),
    )
    assert sd.run() == 0
    assert [r["grades"]["fl"]["score"] for r in sd.results()] == [1.0, 0.0]


def test_custom_evaluators_file_beside_suite_is_found_by_name(sd):
    sd.write(
        "custom_evaluators.py",
        (
            "from ci_evals import grader, GradeResult\n\n"
            "@grader\n"
            "def shouty(sample, submission):\n"
            "    return GradeResult(score=1.0 if submission.isupper() else 0.0)\n"
        ),
    )
    sd.write("dataset.jsonl", DATA)
    sd.write("outputs.jsonl", [{"id": 1, "output": "YES"}, {"id": 2, "output": "no"}])
    sd.suite(
        replay_suite({"loud": {"kind": "tool", "function": "shouty"}}, {"op": "gte", "value": 0.5})
    )
    assert sd.run() == 0
    assert sd.summary()["metrics"]["loud"]["mean"] == 0.5


def test_custom_grader_file_with_syntax_error_exits_2(sd, capsys):
    sd.write("g.py", "def broken(:\n")
    setup(
        sd,
        replay_suite({"x": {"kind": "tool", "function": "g.py:broken"}}, {"op": "gte", "value": 1}),
    )
    rc, err = validate(sd, capsys)
    assert rc == 2
    assert err == f"error: {sd.root / 'g.py'}:1: graders.x.function: syntax error: invalid syntax"


def test_custom_grader_missing_function_lists_names(sd, capsys):
    sd.write("g.py", "def other(sample, submission):\n    pass\n")
    setup(
        sd,
        replay_suite({"x": {"kind": "tool", "function": "g.py:mine"}}, {"op": "gte", "value": 1}),
    )
    rc, err = validate(sd, capsys)
    assert rc == 2
    assert err.endswith("graders.x.function: 'mine' not found in g.py (defined: other)")


def test_setup_script_that_raises_exits_2(sd, capsys):
    sd.write("setup.py", "def prepare(suite):\n    raise RuntimeError('no fixtures')\n")
    setup(sd, replay_suite(ACC, {"op": "gte", "value": 0.5}, setup_script="setup.py:prepare"))
    assert sd.run() == 2
    assert (
        capsys.readouterr()
        .err.strip()
        .endswith("setup_script: setup script raised RuntimeError: no fixtures")
    )


def test_setup_script_can_register_graders(sd):
    sd.write(
        "more.py",
        "from ci_evals import grader, GradeResult\n\n@grader\ndef always(sample, submission):\n"
        "    return GradeResult(score=1.0)\n",
    )
    sd.write(
        "setup.py", "import more  # registers @grader functions\n\ndef prepare(suite):\n    pass\n"
    )
    setup(
        sd,
        replay_suite(
            {"a": {"kind": "tool", "function": "always"}},
            {"op": "gte", "value": 1},
            setup_script="setup.py:prepare",
        ),
    )
    assert sd.run() == 0


def test_schema_command_prints_json_schema(capsys):
    import json

    assert main(["schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert schema["title"] == "ci-evals suite"
    assert schema["additionalProperties"] is False
    assert "max_concurrent" in schema["properties"]
    kinds = {
        k
        for b in schema["properties"]["graders"]["additionalProperties"]["anyOf"]
        for k in b["properties"]["kind"]["enum"]
    }
    assert {"tool", "rubric", "model_judge", "letta_judge", "string_check", "multi"} <= kinds


def test_committed_schema_is_up_to_date():
    import json
    from pathlib import Path

    from ci_evals.suite.schema import suite_schema

    committed = json.loads(
        (Path(__file__).parent.parent / "docs" / "suite.schema.json").read_text()
    )
    assert committed == json.loads(json.dumps(suite_schema())), (
        "run: ci-evals schema > docs/suite.schema.json"
    )


def test_example_suites_validate_against_the_json_schema():
    from pathlib import Path

    import jsonschema
    import yaml

    from ci_evals.suite.schema import suite_schema

    root = Path(__file__).parent.parent / "examples"
    validator = jsonschema.Draft202012Validator(suite_schema())
    suites = sorted(root.glob("**/*suite*.yaml"))
    assert len(suites) >= 5
    for path in suites:
        errors = [e.message for e in validator.iter_errors(yaml.safe_load(path.read_text()))]
        assert errors == [], f"{path}: {errors}"
