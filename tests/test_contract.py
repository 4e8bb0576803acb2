"""The results contract written once (issue 39): the TypedDicts of ci_evals.results.records are
what a folder from elsewhere is validated against and what docs/schemas/ publishes.

- The published JSON Schemas are the ones the types generate (drift fails here).
- Every example's output (summary.json and every results.jsonl line) validates against them,
  with an independent validator (jsonschema, Draft 2020-12).
- A document of another shape is one line naming the key, and validation never changes what
  the caller read.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from ci_evals.cli.app import main
from ci_evals.results.contract import json_schemas, record_problem, schema_text, summary_problem
from tests.fakes.openai_server import FakeOpenAI

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
SCHEMAS = ROOT / "docs" / "schemas"


def test_the_published_schemas_are_the_ones_the_types_generate():
    generated = json_schemas()
    assert sorted(generated) == ["result-line.schema.json", "summary.schema.json"]
    for name, schema in generated.items():
        assert (SCHEMAS / name).read_text(encoding="utf-8") == schema_text(schema), name
    out = subprocess.run(
        [sys.executable, "scripts/schemas.py", "--check"], cwd=ROOT, capture_output=True, text=True
    )
    assert (out.returncode, out.stdout) == (0, "")


def test_the_published_schemas_leave_out_what_only_newer_pydantic_writes():
    """pydantic 2.11+ writes ``additionalProperties: true`` (the default) for a ``dict[str, Any]``,
    2.10 does not: the published text leaves it out, so both generate the same files."""
    from ci_evals._util.schemas import portable

    schema = {
        "type": "object",
        "additionalProperties": True,
        "properties": {
            "meta": {"type": "object", "additionalProperties": True},
            "closed": {"type": "object", "additionalProperties": False},
            "typed": {"additionalProperties": {"type": "integer"}},
            "additionalProperties": {"type": "string"},  # a field of that name stays
        },
        "anyOf": [{"additionalProperties": True, "title": "x"}],
    }
    assert portable(schema) == {
        "type": "object",
        "properties": {
            "meta": {"type": "object"},
            "closed": {"type": "object", "additionalProperties": False},
            "typed": {"additionalProperties": {"type": "integer"}},
            "additionalProperties": {"type": "string"},
        },
        "anyOf": [{"title": "x"}],
    }
    for name, generated in json_schemas().items():
        assert '"additionalProperties": true' not in schema_text(generated), name


def _validators():
    summary = json.loads((SCHEMAS / "summary.schema.json").read_text(encoding="utf-8"))
    line = json.loads((SCHEMAS / "result-line.schema.json").read_text(encoding="utf-8"))
    for schema in (summary, line):
        jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(summary), jsonschema.Draft202012Validator(line)


def _check_folder(folder: Path) -> int:
    summary_v, line_v = _validators()
    summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
    summary_v.validate(summary)
    assert summary_problem(summary) is None
    n = 0
    for raw in (folder / "results.jsonl").read_text(encoding="utf-8").splitlines():
        rec = json.loads(raw)
        line_v.validate(rec)
        assert record_problem(rec) is None
        n += 1
    assert n == summary["records"] > 0
    return n


RUNS = {
    "quickstart": "quickstart/suite.yaml",
    "quickstart-failing": "quickstart/failing-suite.yaml",
    "lower-is-better": "lower-is-better/suite.yaml",
    "openai-graders": "openai-graders/suite.yaml",
}


def _cli(cwd: Path, seed: str, *args: str) -> int:
    """The noisy-judge example in a process of its own: its grader counts its calls in a module
    global, which another run in this process would carry on (tests/test_example_noisy_judge.py)."""
    env = {**os.environ, "NOISY_JUDGE_SEED": seed}
    return subprocess.run(
        [sys.executable, "-m", "ci_evals", "run", *args, "-q"],
        cwd=cwd,
        env=env,
        capture_output=True,
    ).returncode


@pytest.mark.parametrize("name", sorted(RUNS))
def test_every_offline_example_writes_documents_the_schemas_accept(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    main(["run", str(EXAMPLES / RUNS[name]), "--output", "out", "-q"])
    assert _check_folder(tmp_path / "out") > 0


def test_the_noisy_judge_with_its_baseline_and_the_rubric_example_write_documents_the_schemas_accept(
    tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    suite = EXAMPLES / "noisy-judge"
    assert _cli(tmp_path, "1", str(suite / "suite.yaml"), "--output", "base") == 0
    assert _check_folder(tmp_path / "base") > 0
    assert (
        _cli(tmp_path, "3", str(suite / "suite-regressed.yaml"), "--baseline", "base", "-o", "ab")
        == 1
    )
    assert _check_folder(tmp_path / "ab") > 0
    summary = json.loads((tmp_path / "ab" / "summary.json").read_text(encoding="utf-8"))
    assert summary["baseline"]["folder"] and any(g.get("tests") for g in summary["gates"])
    answers = json.loads((EXAMPLES / "rubric" / "fake_answers.json").read_text(encoding="utf-8"))
    with FakeOpenAI(answers=answers) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        main(["run", str(EXAMPLES / "rubric" / "suite.yaml"), "--output", "rubric", "-q"])
    assert _check_folder(tmp_path / "rubric") > 0


@pytest.mark.parametrize(
    ("doc", "line"),
    [
        ({"sample_id": True, "grades": {}}, "'sample_id' must be a string or an integer"),
        ({"sample_id": "a", "grades": {"g": {"passed": True}}}, "grades.g.score must be a number"),
        (
            {"sample_id": "a", "grades": {"g": {"score": None, "error": "boom"}}, "run": -1},
            "'run' must be a non-negative integer",
        ),
        (
            {"sample_id": "a", "grades": {}, "trajectory": {"turns": [[{"tool_calls": "x"}]]}},
            "trajectory.turns[0][0].tool_calls must be a list",
        ),
        ({"sample_id": "a", "grades": {}, "duration_s": 1e301}, "'duration_s' must be a number"),
        ({"sample_id": "a", "grades": {}, "error": {"category": "t"}}, "error.message is required"),
        ({"grades": {}}, "not a ci-evals results record (it needs 'sample_id' and 'grades')"),
    ],
)
def test_a_record_of_another_shape_is_one_line_naming_the_key(doc, line):
    assert record_problem(doc) == line


@pytest.mark.parametrize(
    ("doc", "line"),
    [
        ({"shard": {"index": 3, "count": 2}}, "'shard' must have 1 <= index <= count"),
        ({"shard": {"index": 0, "count": 2}}, "shard.index must be an integer of at least 1"),
        (
            {"interrupted_by": "SIGKILL"},
            "'interrupted_by' must be one of SIGINT, SIGTERM, SIGHUP, not \"SIGKILL\"",
        ),
        (
            {"gates": [{"children": [{"n": "4"}]}]},
            "gates[0].children[0].n must be a non-negative integer",
        ),
        ({"metrics": {"q": {"pass_rate": True}}}, "metrics.q.pass_rate must be a number"),
        ({"endpoints": [{"calls": -2}]}, "endpoints[0].calls must be a non-negative integer"),
    ],
)
def test_a_summary_of_another_shape_is_one_line_naming_the_key(doc, line):
    assert summary_problem(doc) == line


def test_validation_keeps_unknown_keys_and_changes_nothing_it_read():
    rec = {
        "sample_id": 7,
        "grades": {"g": {"score": 1, "passed": True, "new": [1]}},
        "later": {"x": 1},
    }
    before = json.dumps(rec, sort_keys=True)
    assert record_problem(rec) is None
    assert json.dumps(rec, sort_keys=True) == before  # 1 stays 1, not 1.0; unknown keys stay


def test_a_partial_run_reads_back_as_a_baseline_and_a_report(tmp_path, monkeypatch):
    """summary.json's ``selection.by`` is the list of options that chose the samples."""
    monkeypatch.chdir(tmp_path)
    suite = str(EXAMPLES / "quickstart" / "suite.yaml")
    assert main(["run", suite, "--sample-id", "capital-fr", "-o", "part", "-q"]) == 0
    summary = json.loads((tmp_path / "part" / "summary.json").read_text(encoding="utf-8"))
    assert summary["selection"] == {"by": ["--sample-id capital-fr"], "selected": 1, "total": 6}
    assert _check_folder(tmp_path / "part") == 1
    assert main(["report", "part"]) == 0
    assert main(["run", suite, "--baseline", "part", "-o", "full", "-q"]) == 0
