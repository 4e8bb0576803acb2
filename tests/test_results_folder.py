"""The results folder: one name per suite path, one run at a time, and --resume only of the same suite."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from ci_evals.results.layout import suite_slug, unique_slugs
from ci_evals.run.folderlock import LOCK_NAME, hold
from tests.conftest import replay_suite


def test_suite_paths_that_read_alike_get_different_folders():
    assert unique_slugs(
        [
            "evals/a-b/suite.yaml",
            "evals/a/b/suite.yaml",
            "evals/one-suite.yaml",
            "X/s.yaml",
            "x/s.yaml",
        ]
    ) == {
        "evals/a-b/suite.yaml": "evals-a-b-suite-e1edf7a7",
        "evals/a/b/suite.yaml": "evals-a-b-suite-d00c5cd5",
        "evals/one-suite.yaml": "evals-one-suite",
        "X/s.yaml": "X-s-a96e0204",
        "x/s.yaml": "x-s-aa50043b",
    }
    assert suite_slug("evals/a/b/suite.yaml") == "evals-a-b-suite"


def _env() -> dict[str, str]:
    return {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OPENAI_", "LETTA_", "INPUT_", "GITHUB_"))
    }


def cli(cwd: Path, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ci_evals", *argv],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


def write_suite(root: Path, rel: str = "suite.yaml", n: int = 3, **extra) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [{"id": i, "input": f"q{i}", "ground_truth": f"a{i}"} for i in range(n)]
    (path.parent / "dataset.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8"
    )
    (path.parent / "outputs.jsonl").write_text(
        "".join(json.dumps({"id": i, "output": f"a{i}"}) + "\n" for i in range(n)), encoding="utf-8"
    )
    spec = replay_suite(
        {"acc": {"kind": "tool", "function": "exact_match"}}, {"op": "gte", "value": 0.5}, **extra
    )
    path.write_text(json.dumps(spec), encoding="utf-8")
    return path


def test_two_suites_whose_paths_read_alike_write_two_folders(tmp_path):
    write_suite(tmp_path, "evals/a-b/suite.yaml", n=1)
    write_suite(tmp_path, "evals/a/b/suite.yaml", n=2)
    proc = cli(
        tmp_path, "run", "evals/a-b/suite.yaml", "evals/a/b/suite.yaml", "--output", "out", "-q"
    )
    assert proc.returncode == 0, proc.stderr
    rows = json.loads((tmp_path / "out" / "suites.json").read_text(encoding="utf-8"))
    assert [Path(r["output"]).name for r in rows] == ["a-b-suite-1dc7d63f", "a-b-suite-e8cf3860"]
    assert [
        len((tmp_path / r["output"] / "results.jsonl").read_text().splitlines()) for r in rows
    ] == [1, 2]


def test_a_second_run_into_a_held_folder_exits_2_naming_the_holder(tmp_path):
    write_suite(tmp_path)
    lock = hold(tmp_path / "out", {"suite_sha256": "s", "config_sha256": "c"}, resume=False)
    try:
        proc = cli(tmp_path, "run", "suite.yaml", "--output", "out", "-q")
    finally:
        lock.release()
    assert proc.returncode == 2
    record = json.loads((tmp_path / "out" / LOCK_NAME).read_text(encoding="utf-8"))
    assert proc.stderr == (
        f"error: out: the results folder is in use by another ci-evals run (pid {os.getpid()} on host "
        f"{socket.gethostname()}, since {record['holder']['started_at']}); use another --output or wait "
        "for it to finish\n"
    )
    assert not (tmp_path / "out" / "results.jsonl").exists()


def test_the_lock_is_released_after_a_run(tmp_path):
    write_suite(tmp_path)
    assert cli(tmp_path, "run", "suite.yaml", "--output", "out", "-q").returncode == 0
    assert cli(tmp_path, "run", "suite.yaml", "--output", "out", "-q").returncode == 0


def _first_run(tmp_path: Path) -> Path:
    suite = write_suite(tmp_path)
    proc = cli(tmp_path, "run", "suite.yaml", "--output", "out", "-q", "--max-samples", "2")
    assert proc.returncode == 0, proc.stderr
    return suite


@pytest.mark.parametrize(
    ("change", "args", "what"),
    [
        ("gate", [], "the suite file or its dataset and the configuration or sample selection"),
        ("dataset", [], "the suite file or its dataset"),
        (None, ["--max-samples", "3"], "the configuration or sample selection"),
    ],
)
def test_resume_with_another_suite_or_configuration_is_refused(tmp_path, change, args, what):
    suite = _first_run(tmp_path)
    if change == "gate":
        spec = json.loads(suite.read_text(encoding="utf-8"))
        spec["gate"]["value"] = 0.9
        suite.write_text(json.dumps(spec), encoding="utf-8")
    elif change == "dataset":
        with (tmp_path / "dataset.jsonl").open("a", encoding="utf-8") as fh:
            fh.write(json.dumps({"id": 9, "input": "q9", "ground_truth": "a9"}) + "\n")
    before = (tmp_path / "out" / "results.jsonl").read_text(encoding="utf-8")
    proc = cli(
        tmp_path, "run", "suite.yaml", "--resume", "out", "-q", *(args or ["--max-samples", "2"])
    )
    assert proc.returncode == 2
    assert proc.stderr == (
        f"error: out: cannot resume: {what} changed since this folder was written (its "
        "grades would not match); run again without --resume\n"
    )
    assert (tmp_path / "out" / "results.jsonl").read_text(encoding="utf-8") == before


def test_resume_of_the_same_suite_and_configuration_runs(tmp_path):
    _first_run(tmp_path)
    proc = cli(tmp_path, "run", "suite.yaml", "--resume", "out", "-q", "--max-samples", "2")
    assert proc.returncode == 0, proc.stderr


def test_resume_of_a_folder_without_its_record_is_refused(tmp_path):
    _first_run(tmp_path)
    (tmp_path / "out" / LOCK_NAME).unlink()
    proc = cli(tmp_path, "run", "suite.yaml", "--resume", "out", "-q", "--max-samples", "2")
    assert proc.returncode == 2
    assert proc.stderr.startswith(
        "error: out: cannot resume: no record of the suite that wrote this folder"
    )
