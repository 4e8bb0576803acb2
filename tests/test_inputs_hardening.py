"""Inputs that used to be mishandled: empty shards, CSV from Excel, huge cells, NaN, non-ASCII
digits, YAML limits timing (issue 15 items 13, 18, 19, 20, 21)."""

from __future__ import annotations

import csv
import json
import time

import pytest

from ci_evals.cli.app import main
from ci_evals.config.dataset import shard_of
from tests.conftest import custom_grade_suite, replay_suite


def _two_samples(sd):
    sd.write(
        "dataset.jsonl",
        [
            {"id": 1, "input": "a", "ground_truth": "a"},
            {"id": 2, "input": "b", "ground_truth": "b"},
        ],
    )
    sd.write("outputs.jsonl", [{"id": 1, "output": "a"}, {"id": 2, "output": "b"}])
    sd.suite(
        replay_suite(
            {"e": {"kind": "tool", "function": "exact_match"}}, {"op": "gte", "value": 0.5}
        )
    )


def test_an_empty_shard_succeeds_and_merge_accepts_it(sd, capsys):
    _two_samples(sd)
    used = {shard_of(1, 5), shard_of(2, 5)}
    empty = next(k for k in range(1, 6) if k - 1 not in used)
    assert sd.run("--shard", f"{empty}/5", out="empty") == 0
    out = capsys.readouterr().out
    assert (
        f"t: shard {empty}/5 selects no sample, nothing to gate here (merge the shards for the verdict)."
        in out
    )
    assert (sd.root / "empty" / "results.jsonl").read_text() == ""
    summary = sd.summary("empty")
    assert (summary["n_samples"], summary["verdict"], summary["verdict_reason"]) == (
        0,
        "passed",
        f"shard {empty}/5 holds none of the 2 selected samples: nothing to gate here; "
        "the merged shards carry the verdict",
    )
    for k in range(1, 6):
        if k != empty:
            sd.run("--shard", f"{k}/5", out=f"s{k}")
    dirs = [str(sd.root / ("empty" if k == empty else f"s{k}")) for k in range(1, 6)]
    assert main(["merge", *dirs, "--output", str(sd.root / "merged")]) == 0
    merged = sd.summary("merged")
    assert (merged["n_samples"], merged["gate"]["passed"]) == (2, True)


def test_csv_with_a_utf8_bom_keeps_its_id_column(sd):
    (sd.root / "dataset.csv").write_bytes(
        "\ufeffid,input,ground_truth\nq1,hello,hello\nq2,bye,bye\n".encode()
    )
    sd.write("outputs.jsonl", [{"id": "q1", "output": "hello"}, {"id": "q2", "output": "bye"}])
    sd.suite(
        replay_suite(
            {"e": {"kind": "tool", "function": "exact_match"}},
            {"op": "gte", "value": 0.5},
            dataset="dataset.csv",
        )
    )
    assert sd.run() == 0
    assert [(r["sample_id"], r["grades"]["e"]["score"]) for r in sd.results()] == [
        ("q1", 1.0),
        ("q2", 1.0),
    ]


def test_csv_cells_over_131072_characters_are_accepted(sd):
    big = "word " * 60_000  # 300,000 characters, over csv's default field limit
    with (sd.root / "dataset.csv").open("w", newline="", encoding="utf-8") as fh:
        csv.writer(fh).writerows([["id", "input", "ground_truth"], ["1", big, "word"]])
    sd.write("outputs.jsonl", [{"id": 1, "output": "word"}])
    sd.suite(
        replay_suite(
            {"e": {"kind": "tool", "function": "exact_match"}},
            {"op": "gte", "value": 0.5},
            dataset="dataset.csv",
        )
    )
    assert sd.run() == 0
    rec = sd.results()[
        0
    ]  # read whole; stored under the results file's per-field cap, with its length
    assert rec["input"].endswith("… [truncated by ci-evals: 300,000 characters in all]")
    assert rec["input"].startswith("word word ") and rec["truncated"] == {"input": 300_000}


def test_summary_json_stays_valid_json_when_a_grade_holds_nan(sd):
    custom_grade_suite(
        sd, "GradeResult(score=1.0, metadata={'ratio': float('nan'), 'big': float('inf')})"
    )
    assert sd.run() == 0
    line = (sd.root / "out" / "results.jsonl").read_text().strip()
    assert "NaN" not in line and "Infinity" not in line
    assert json.loads(line)["grades"]["g"]["metadata"] == {"ratio": None, "big": None}
    text = (sd.root / "out" / "summary.json").read_text()
    json.loads(text, parse_constant=lambda c: pytest.fail(f"summary.json holds {c}"))


@pytest.mark.parametrize("name", ["INPUT_MAX-CONCURRENT", "INPUT_PR-NUMBER"])
@pytest.mark.parametrize("value", ["\u00b2", "\u0661\u0662"])
def test_non_ascii_digits_in_action_inputs_are_input_errors(name, value):
    from ci_evals.action.inputs import InputError, parse_inputs

    env = {"INPUT_SUITE": "x.yaml", name: value}
    with pytest.raises(InputError) as info:
        parse_inputs(env)
    assert repr(value) in str(info.value)


@pytest.mark.parametrize(
    "case", ["yaml_alias_bomb", "yaml_nesting_too_deep", "dataset_jsonl_nesting_too_deep"]
)
def test_hostile_files_fail_in_under_a_second(case, capsys):
    from pathlib import Path

    folder = Path(__file__).parent / "bad_inputs" / case
    t0 = time.perf_counter()
    assert main(["validate", str(folder / "suite.yaml")]) == 2
    took = time.perf_counter() - t0
    assert took < 1.0, f"{took:.2f} s"
    assert capsys.readouterr().err.count("\n") == 1
