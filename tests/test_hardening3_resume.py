"""Issue 37 G6 and a low: ``--resume`` checks before it writes (ci_evals.run.lanes, run.folderlock).

A part file a killed split run left (``.results.worker-*.jsonl``) used to be appended to
results.jsonl before anything read it: a planted line (NaN, garbage) changed the folder's record
and left it unresumable. A part's state file that is a folder made every run an internal error.
A results.jsonl record of a sample the dataset does not have was counted (7 of 7 graded for 6).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ci_evals.cli.app import main
from tests.conftest import replay_suite

N = 6


@pytest.fixture
def done(sd, monkeypatch):
    """A finished run of N samples in sd.root/out (one process)."""
    monkeypatch.setenv("CI_EVALS_WORKERS", "1")
    sd.write(
        "dataset.jsonl", [{"id": i, "input": f"q{i}", "ground_truth": str(i)} for i in range(N)]
    )
    sd.write("outputs.jsonl", [{"id": i, "output": str(i)} for i in range(N)])
    sd.suite(
        replay_suite(
            {"exact": {"kind": "tool", "function": "exact_match"}},
            {"metric_key": "exact", "op": "gte", "value": 0.5},
        )
    )
    assert main(["run", str(sd.root / "suite.yaml"), "--output", str(sd.root / "out"), "-q"]) == 0
    return sd.root / "out"


def _resume(out, capsys) -> tuple[int, str]:
    capsys.readouterr()
    rc = main(["run", str(out.parent / "suite.yaml"), "--resume", str(out), "-q"])
    return rc, capsys.readouterr().err


def _line(out, **changes) -> str:
    rec = json.loads((out / "results.jsonl").read_text().splitlines()[0])
    rec.update(changes)
    return json.dumps(rec)


@pytest.mark.parametrize(
    ("planted", "problem"),
    [
        ("garbage", "not valid JSON: Expecting value: line 1 column 1 (char 0)"),
        ("nan", "NaN is not valid JSON (numbers must be finite)"),
        ("other sample", None),
    ],
)
def test_a_bad_part_file_is_one_line_exit_2_and_results_jsonl_is_untouched(
    done, capsys, planted, problem
):
    good = _line(done, sample_id=1)
    bad = {
        "garbage": "garbage",
        "nan": _line(done, sample_id=2).replace('"score": 1.0', '"score": NaN'),
        "other sample": _line(done, sample_id=999),
    }[planted]
    assert "NaN" in bad or planted != "nan"
    part = done / ".results.worker-1.jsonl"
    part.write_text(good + "\n" + bad + "\n")
    before = (done / "results.jsonl").read_bytes()
    rc, err = _resume(done, capsys)
    assert rc == 2
    if problem is None:
        problem = (
            "cannot resume: a record of sample '999' (model 'None', run 0), whose sample this run does not "
            "have (dataset and selection, models, num_runs); run again without --resume"
        )
    else:
        problem = f".results.worker-1.jsonl: {problem}"
    assert err == f"error: {part}:2: {problem}\n"
    assert (done / "results.jsonl").read_bytes() == before
    part.unlink()
    assert _resume(done, capsys)[0] == 0  # the folder stays resumable
    assert json.loads((done / "summary.json").read_text())["records"] == N


def test_a_record_of_a_sample_not_in_the_dataset_is_not_counted(done, capsys):
    """Refused (exit 2, one line naming results.jsonl) rather than counted as a 7th of 6 samples."""
    with open(done / "results.jsonl", "a") as fh:
        fh.write(_line(done, sample_id="stranger") + "\n")
    before = (done / "results.jsonl").read_bytes()
    rc, err = _resume(done, capsys)
    assert rc == 2
    assert err == (
        f"error: {done / 'results.jsonl'}: cannot resume: a record of sample 'stranger' (model 'None', "
        "run 0), whose sample this run does not have (dataset and selection, models, num_runs); run "
        "again without --resume\n"
    )
    assert (done / "results.jsonl").read_bytes() == before
    (done / "results.jsonl").write_text(
        _line(done, run=1) + "\n"
    )  # a run number past num_runs: refused too
    rc, err = _resume(done, capsys)
    assert rc == 2 and "whose run number this run does not have" in err


def test_a_state_file_that_is_a_folder_is_left_alone_not_an_internal_error(done, capsys):
    (done / ".results.worker-1.jsonl").write_text(_line(done, sample_id=3) + "\n")
    (done / ".results.worker-1.state.json").mkdir()
    assert _resume(done, capsys)[0] == 0
    assert json.loads((done / "summary.json").read_text())["records"] == N
    (done / ".results.worker-1.jsonl").write_text(_line(done, sample_id=3) + "\n")
    capsys.readouterr()
    assert (
        main(["run", str(done.parent / "suite.yaml"), "--output", str(done), "-q"]) == 0
    )  # a new run
    assert sorted(p.name for p in done.iterdir() if p.name.startswith(".results")) == [
        ".results.worker-1.state.json"
    ]


def test_a_split_run_refuses_a_folder_where_a_worker_writes(done):
    """A split run needs those names: one line naming the folder, exit 2 (fork only in a fresh process)."""
    (done / ".results.worker-1.state.json").mkdir()
    env = {**os.environ, "CI_EVALS_WORKERS": "2"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "ci_evals",
            "run",
            str(done.parent / "suite.yaml"),
            "--output",
            str(done),
            "-q",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (proc.returncode, proc.stderr) == (
        2,
        f"error: {done / '.results.worker-1.state.json'}: is a folder "
        "where a worker process writes its records: remove it\n",
    )
