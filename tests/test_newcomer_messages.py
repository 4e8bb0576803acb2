"""What a new user sees for common mistakes: the exact line, exit code 2 (issue 17, items 6-9)."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

import pytest

from ci_evals.cli.app import main
from tests.conftest import replay_suite

ROWS = [{"id": 1, "input": "q", "ground_truth": "yes"}]
TOOL = {"acc": {"kind": "tool", "function": "contains"}}
GATE = {"op": "gte", "value": 0.5}


def validate(sd, capsys, spec: dict, rows: list[dict] | str = ROWS) -> tuple[int, str]:
    """``ci-evals validate`` on the suite over ``rows`` (or raw dataset text): (exit code, stderr)."""
    sd.write("dataset.jsonl", rows)
    sd.write("outputs.jsonl", [{"id": 1, "output": "yes"}])
    sd.suite(spec)
    rc = main(["validate", str(sd.root / "suite.yaml")])
    err = capsys.readouterr().err
    return rc, err.replace(str(sd.root) + "/", "")


# ---------------------------------------------------------------- item 9: every enumerated value

SC = {"type": "string_check", "name": "sc", "input": "{{ sample.output_text }}", "reference": "x"}
TS = {
    "type": "text_similarity",
    "name": "ts",
    "input": "{{ sample.output_text }}",
    "reference": "x",
}


@pytest.mark.parametrize(
    ("spec", "line"),
    [
        (
            replay_suite(TOOL, {"metric": "acuracy", **GATE}),
            "suite.yaml:11: gate.metric: unknown metric 'acuracy' (did you mean 'accuracy'?)",
        ),
        (
            replay_suite(TOOL, {"op": "gtee", "value": 0.5}),
            "suite.yaml:11: gate.op: unknown op 'gtee' (did you mean 'gte'?)",
        ),
        (
            replay_suite(TOOL, {"op": "gte", "value": 0.5, "pass_op": "lt_"}),
            "suite.yaml:13: gate.pass_op: unknown pass_op 'lt_' (did you mean 'lt'?)",
        ),
        (
            replay_suite(TOOL, {"max_drop": 0.1, "on_missing_baseline": "fial"}),
            "suite.yaml:12: gate.on_missing_baseline: unknown on_missing_baseline 'fial' (did you mean 'fail'?)",
        ),
        (
            replay_suite(TOOL, GATE, reducer="meen"),
            "suite.yaml:13: reducer: unknown reducer 'meen' (did you mean 'mean'?)",
        ),
        (
            replay_suite({"acc": {"kind": "tool", "function": "contians"}}, GATE),
            "suite.yaml:9: graders.acc.function: unknown grader function 'contians' (did you mean 'contains'?)",
        ),
        (
            replay_suite(
                {"acc": {"kind": "tool", "function": "contains", "extractor": "last_asistant"}},
                GATE,
            ),
            "suite.yaml:10: graders.acc.extractor: unknown extractor 'last_asistant' (did you mean 'last_assistant'?)",
        ),
        (
            replay_suite({"acc": {"kind": "toll", "function": "contains"}}, GATE),
            "suite.yaml:8: graders.acc.kind: unknown grader kind 'toll' (did you mean 'tool'?)",
        ),
        (
            replay_suite({"sc": {**SC, "type": "string_chek", "operation": "eq"}}, GATE),
            "suite.yaml:8: graders.sc.type: unknown grader kind 'string_chek' (did you mean 'string_check'?)",
        ),
        (
            replay_suite({"sc": {**SC, "operation": "ilke"}}, GATE),
            "suite.yaml:12: graders.sc.operation: unknown operation 'ilke' (did you mean 'ilike'?)",
        ),
        (
            replay_suite({"ts": {**TS, "evaluation_metric": "blue"}}, GATE),
            "suite.yaml:12: graders.ts.evaluation_metric: unknown evaluation_metric 'blue' (did you mean 'bleu'?)",
        ),
        (
            replay_suite(
                {"q": {"kind": "rubric", "prompt": "Grade {submission}", "provider": "opnai"}}, GATE
            ),
            "suite.yaml:10: graders.q.provider: unknown provider 'opnai' (did you mean 'openai'?)",
        ),
        (
            {**replay_suite(TOOL, GATE), "target": {"kind": "replya", "outputs": "outputs.jsonl"}},
            "suite.yaml:4: target.kind: unknown target kind 'replya' (did you mean 'replay'?)",
        ),
        (
            replay_suite(TOOL, {"op": "between", "value": 0.5}),
            "suite.yaml:11: gate.op: unknown op 'between' (valid: eq, gt, gte, lt, lte)",
        ),
        (
            replay_suite(TOOL, {"op": 5, "value": 0.5}),
            "suite.yaml:11: gate.op: unknown op 5 (valid: eq, gt, gte, lt, lte)",
        ),
    ],
)
def test_every_enumerated_value_gets_one_line_with_the_closest_choice(sd, capsys, spec, line):
    rc, err = validate(sd, capsys, spec)
    assert (rc, err) == (2, f"error: {line}\n")


# ---------------------------------------------------------------- item 6: rows without an id


def test_row_without_id_that_clashes_says_it_has_no_id(sd, capsys):
    rows = [{"id": 2, "input": "a"}, {"input": "b"}, {"input": "c"}]
    rc, err = validate(sd, capsys, replay_suite(TOOL, GATE), rows)
    assert (rc, err) == (
        2,
        "error: dataset.jsonl:3: row has no 'id', so its id is its row index 2, "
        "which line 1 already uses: give every row an 'id'\n",
    )


def test_id_that_clashes_with_an_earlier_row_without_id_names_that_row(sd, capsys):
    rows = [{"input": "a"}, {"id": 0, "input": "b"}]
    rc, err = validate(sd, capsys, replay_suite(TOOL, GATE), rows)
    assert (rc, err) == (
        2,
        "error: dataset.jsonl:2: duplicate sample id 0: line 1 has no 'id', so its id "
        "is its row index 0: give every row an 'id'\n",
    )


def test_two_rows_with_the_same_id_keep_the_plain_message(sd, capsys):
    rows = [{"id": "a", "input": "x"}, {"id": "a", "input": "y"}]
    rc, err = validate(sd, capsys, replay_suite(TOOL, GATE), rows)
    assert (rc, err) == (2, "error: dataset.jsonl:2: duplicate sample id 'a' (first on line 1)\n")


def test_csv_row_with_an_empty_id_cell_says_it_has_no_id(sd, capsys):
    sd.write("data.csv", "id,input\n1,a\n,b\n")
    rc, err = validate(sd, capsys, {**replay_suite(TOOL, GATE), "dataset": "data.csv"})
    assert (rc, err) == (
        2,
        "error: data.csv:3: row has no 'id', so its id is its row index 1, "
        "which line 2 already uses: give every row an 'id'\n",
    )


# ---------------------------------------------------------------- item 7: one position for broken JSON


@pytest.mark.parametrize(
    ("text", "line"),
    [
        (
            '{"input": "a"}\n{"id": 2 "input": "b"}\n',
            "dataset.jsonl:2: invalid JSON at column 10: Expecting ',' delimiter",
        ),
        (
            '{"input": "a"}\n\n  {"input": }\n',
            "dataset.jsonl:3: invalid JSON at column 13: Expecting value",
        ),
        (
            '{"input": "a", "id": 1,\n',
            "dataset.jsonl:1: invalid JSON at column 24: Expecting property name enclosed in double quotes",
        ),
        (
            '{"input": "a"}\r\n{"input": "b",\r\n',
            "dataset.jsonl:2: invalid JSON at column 15: Expecting property name enclosed in double quotes",
        ),
        (
            '{"input": "a"} {"input": "b"}\n',
            "dataset.jsonl:1: invalid JSON at column 16: Extra data",
        ),
    ],
)
def test_broken_jsonl_line_reports_the_dataset_line_and_column(sd, capsys, text, line):
    rc, err = validate(sd, capsys, replay_suite(TOOL, GATE), text)
    assert (rc, err) == (2, f"error: {line}\n")


# ---------------------------------------------------------------- item 8: regression gates print the count


def test_regression_gate_prints_the_count_it_compared(sd, capsys):
    sd.write("dataset.jsonl", [{"id": i, "input": "q", "ground_truth": "yes"} for i in range(4)])
    gates = [
        {"metric_key": "acc", "max_regressions": 1},
        {"metric_key": "acc", "max_drop": 0.1},
        {
            "metric_key": "acc",
            "metric": "accuracy",
            "op": "gte",
            "value": 0.5,
            "max_regressions": 1,
        },
    ]
    sd.suite(replay_suite(TOOL, None, gates=gates))
    sd.write("outputs.jsonl", [{"id": i, "output": "yes"} for i in range(4)])
    assert (
        main(
            [
                "run",
                str(sd.root / "suite.yaml"),
                "--output",
                str(sd.root / "base"),
                "--no-cache",
                "-q",
            ]
        )
        == 0
    )
    sd.write("outputs.jsonl", [{"id": i, "output": "yes" if i == 3 else "no"} for i in range(4)])
    capsys.readouterr()
    assert (
        main(
            [
                "run",
                str(sd.root / "suite.yaml"),
                "--output",
                str(sd.root / "pr"),
                "--no-cache",
                "--baseline",
                str(sd.root / "base"),
            ]
        )
        == 1
    )
    gate_lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("Gate")]
    # a deterministic grader: exact counts; each line says how often a rerun (resampling 4 samples) agrees
    assert gate_lines == [
        "Gate: acc avg_score max_regressions 1: 3 regressions, max 1 -> FAIL (holds in 95 % of reruns)",
        "Gate: acc avg_score max_drop 0.1: drop 0.7500 from baseline 1.0000 (max_drop 0.1) -> FAIL "
        "(holds in >99 % of reruns)",
        "Gate: acc accuracy gte 0.5 max_regressions 1: accuracy 0.2500, needs >= 0.5; 3 regressions, max 1 -> "
        "UNSTABLE: FAIL (holds in 79 % of reruns)",
    ]
    md = (sd.root / "pr" / "summary.md").read_text(encoding="utf-8")
    assert (
        "| acc avg_score max_regressions 1 | 3 regressions, max 1 |  | 4/4 | 0 | ❌ failed (holds in 95 % of reruns) | "
        "3 regressions, max 1 |"
    ) in md
    junit = (sd.root / "pr" / "junit.xml").read_text(encoding="utf-8")
    assert 'message="failed: 3 regressions, max 1"' in junit


def test_regression_gate_without_baseline_says_so(sd, capsys):
    sd.write("dataset.jsonl", ROWS)
    sd.write("outputs.jsonl", [{"id": 1, "output": "yes"}])
    sd.suite(replay_suite(TOOL, None, gates=[{"metric_key": "acc", "max_regressions": 0}]))
    assert (
        main(["run", str(sd.root / "suite.yaml"), "--output", str(sd.root / "o"), "--no-cache"])
        == 0
    )
    gate_lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("Gate")]
    assert gate_lines == [
        "Gate: acc avg_score max_regressions 0: no baseline: run without --baseline (on_missing_baseline: pass) "
        "-> NO BASELINE (passes)"
    ]


# ---------------------------------------------------------------- item 5: what the README (now docs/reference.md) promises

README = (Path(__file__).resolve().parent.parent / "docs" / "reference.md").read_text(
    encoding="utf-8"
)


def test_readme_says_like_is_a_substring_test_without_sql_wildcards():
    row = next(line for line in README.splitlines() if line.startswith("| `string_check` |"))
    assert row == (
        "| `string_check` | `operation`: `eq` (equal), `ne`/`neq` (not equal), `like` (`input` contains "
        "`reference`: a plain substring test, case-sensitive), `ilike` (the same, ignoring case). Not SQL: "
        "`%` and `_` are ordinary characters, so `'you said%'` looks for those very characters |"
    )


@pytest.mark.parametrize(
    ("operation", "reference", "output", "score"),
    [
        ("like", "you said", "Well, you said hello", 1.0),
        ("like", "you said%", "Well, you said hello", 0.0),
        ("like", "you said%", "you said% literally", 1.0),
        ("like", "You Said", "you said hello", 0.0),
        ("ilike", "You Said", "you said hello", 1.0),
    ],
)
def test_like_and_ilike_behave_as_the_readme_says(sd, operation, reference, output, score):
    sd.write("dataset.jsonl", ROWS)
    sd.write("outputs.jsonl", [{"id": 1, "output": output}])
    sd.suite(replay_suite({"sc": {**SC, "reference": reference, "operation": operation}}, None))
    sd.run()
    assert sd.results()[0]["grades"]["sc"]["score"] == score


def test_readme_says_a_string_command_is_not_run_by_a_shell():
    row = next(line for line in README.splitlines() if line.startswith("| `command` |"))
    assert row.endswith(
        "A string is split like a shell line (quotes work) but not run by a shell: no `$HOME` or "
        "other variables, globs, pipes or `&&`. For those, run a shell yourself: "
        '`command: ["bash", "-c", "cd $HOME/agent && python run.py | tail -1"]`. |'
    )


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        # A string is split like a shell line: the quotes group, "$HOME" reaches the program as is.
        (
            f"{shlex.quote(sys.executable)} -c 'import sys; print(sys.argv[1:])' $HOME '*' 'a | b'",
            "['$HOME', '*', 'a | b']",
        ),
        # The bash -c form gets a real shell: variables expand and pipes work.
        (["bash", "-c", "echo $HOME | tr a-z A-Z"], os.environ["HOME"].upper()),
    ],
)
def test_string_command_is_split_not_run_by_a_shell(sd, command, expected):
    sd.write("dataset.jsonl", [{"id": 1, "input": "q", "ground_truth": expected}])
    spec = replay_suite({"same": {"kind": "tool", "function": "exact_match"}}, None)
    spec["target"] = {"kind": "command", "command": command}
    sd.suite(spec)
    sd.run()
    row = sd.results()[0]
    assert (row["error"], row["submission"]["same"], row["grades"]["same"]["score"]) == (
        None,
        expected,
        1.0,
    )


def test_gate_text_survives_missing_figures():
    from ci_evals.reports.markdown import gate_compared

    gate = {
        "op": None,
        "actual": None,
        "drop": 0.0,
        "baseline_value": None,
        "max_drop": 0.1,
        "status": "passed",
    }
    assert gate_compared(gate, lambda x: f"{x:.4f}") == "drop 0.0000 from none, max 0.1"
    assert gate_compared({"op": "gte", "actual": None, "status": "failed"}) == "actual none"
