"""Stored output stays bounded: a field is cut at the cap (saying how long it was) and a
submission that several graders saw is stored once."""

from __future__ import annotations

import json

from ci_evals.results.line import FIELD_CAP, finish_record, submission_of, submissions_of
from tests.conftest import replay_suite
from tests.test_results_folder import cli

BIG = 300_000


def test_a_long_submission_shared_by_graders_is_stored_once_and_capped(tmp_path):
    (tmp_path / "dataset.jsonl").write_text(
        json.dumps({"id": 1, "input": "q", "ground_truth": "ok"}) + "\n"
    )
    (tmp_path / "outputs.jsonl").write_text(
        json.dumps({"id": 1, "output": "ok " * (BIG // 3)}) + "\n"
    )
    graders = {f"g{i}": {"kind": "tool", "function": "contains"} for i in range(5)}
    (tmp_path / "suite.yaml").write_text(
        json.dumps(replay_suite(graders, {"op": "gte", "value": 0.5}))
    )
    proc = cli(tmp_path, "run", "suite.yaml", "-o", "out", "-q", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    raw = (tmp_path / "out" / "results.jsonl").read_text(encoding="utf-8")
    rec = json.loads(raw)
    assert list(rec["submission"]) == ["g0"]
    assert rec["submission_same_as"] == {"g1": "g0", "g2": "g0", "g3": "g0", "g4": "g0"}
    assert rec["truncated"] == {"submission.g0": BIG, "trajectory.turns[0][0].content": BIG}
    assert rec["submission"]["g0"].endswith("… [truncated by ci-evals: 300,000 characters in all]")
    assert (
        len(raw) < 2 * FIELD_CAP + 5_000
    )  # the submission once, and the trajectory's reply: each capped
    assert [r["score"] for r in rec["grades"].values()] == [1.0] * 5  # graded on the whole text
    junit = (tmp_path / "out" / "junit.xml").read_text(encoding="utf-8")
    assert junit.count("submission: ok ok") == 5  # every grader's testcase still shows it


def test_short_submissions_stay_per_grader():
    rec = finish_record({"submission": {"a": "same", "b": "same"}}, [])
    assert rec == {"submission": {"a": "same", "b": "same"}}


def test_reading_back_follows_the_shared_reference():
    row = {"submission": {"a": "x" * 300}, "submission_same_as": {"b": "a"}}
    assert submission_of(row, "b") == "x" * 300 and submission_of(row, "c") is None
    assert submissions_of(row) == {"a": "x" * 300, "b": "x" * 300}


def test_secrets_in_any_field_are_masked_before_the_cut():
    rec = finish_record(
        {
            "input": "k" * 95 + "TOPSECRET-123456",
            "grades": {"g": {"rationale": "TOPSECRET-123456"}},
        },
        ["TOPSECRET-123456"],
        cap=100,
    )
    assert rec["input"] == "k" * 95 + "***" and rec["grades"]["g"]["rationale"] == "***"
