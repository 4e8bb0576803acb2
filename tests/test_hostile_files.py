"""F18, F19: hostile files that used to hang or end in exit 3 (generated here: a repository cannot
hold a FIFO, a symlink to /dev/zero or a 100,000-deep .af) give one line and exit 2; a score of
1e999 is not finite and never passes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ci_evals._util import bounds
from tests.conftest import replay_suite
from tests.fakes.letta_server import letta_fake_fixture, tool_call  # noqa: F401 - provides `letta_fake`
from tests.test_letta_judge import grade, make


def _validate(root: Path, *args: str) -> tuple[int, list[str], float]:
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "ci_evals", *args],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=60,
    )
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    return proc.returncode, lines, time.monotonic() - t0


def _suite(root: Path, **changes) -> None:
    (root / "dataset.jsonl").write_text('{"id": 1, "input": "q", "ground_truth": "a"}\n')
    (root / "outputs.jsonl").write_text('{"id": 1, "output": "a"}\n')
    spec = replay_suite(
        {"acc": {"kind": "tool", "function": "exact_match"}}, {"op": "gte", "value": 0.5}
    )
    spec.update(changes)
    (root / "suite.yaml").write_text(json.dumps(spec))


@pytest.mark.parametrize(
    ("name", "kind"), [("dataset.jsonl", "a FIFO"), ("outputs.jsonl", "a FIFO"), ("g.py", "a FIFO")]
)
def test_a_fifo_in_place_of_a_file_is_refused_without_waiting(tmp_path, name, kind):
    extra = {"graders": {"acc": {"kind": "tool", "function": "g.py:g"}}} if name == "g.py" else {}
    _suite(tmp_path, **extra)
    (tmp_path / name).unlink(missing_ok=True)
    os.mkfifo(tmp_path / name)
    rc, lines, took = _validate(tmp_path, "validate", "suite.yaml")
    what = {"dataset.jsonl": "dataset", "outputs.jsonl": "replay outputs", "g.py": "file"}[name]
    assert (rc, len(lines)) == (2, 1), lines
    assert (
        lines[0].startswith("error: ")
        and f"{name}" in lines[0]
        and f"{what} is {kind}, expected a regular file" in lines[0]
    ), lines
    assert took < 10


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_a_suite_file_that_is_a_symlink_to_a_device_is_refused(tmp_path, device):
    (tmp_path / "suite.yaml").symlink_to(device)
    rc, lines, took = _validate(tmp_path, "run", "suite.yaml", "-o", "out")
    assert (rc, lines) == (2, ["error: suite.yaml: file is a device, expected a regular file"])
    assert not (tmp_path / "out").exists() and took < 10


def test_a_suite_file_that_is_a_fifo_is_refused(tmp_path):
    os.mkfifo(tmp_path / "suite.yaml")
    rc, lines, _ = _validate(tmp_path, "validate", "suite.yaml")
    assert (rc, lines) == (2, ["error: suite.yaml: file is a FIFO, expected a regular file"])


@pytest.mark.parametrize("bracket", ["[", '{"a":'])
def test_a_100000_deep_agent_file_is_one_line(tmp_path, bracket):
    close = "]" if bracket == "[" else "}"
    (tmp_path / "deep.af").write_text(bracket * 100_000 + "1" + close * 100_000)
    _suite(tmp_path, target={"kind": "letta_agent", "agent_file": "deep.af"})
    rc, lines, _ = _validate(tmp_path, "validate", "suite.yaml")
    assert (rc, lines) == (
        2,
        [
            "error: suite.yaml:1: target.agent_file: agent file deep.af is nested too deeply to "
            "be an agent export"
        ],
    )


@pytest.mark.parametrize("raw", ['"1e999"', "1e999", '"-1e999"', '"inf"'])
def test_a_judge_score_of_1e999_is_an_error_not_a_pass(letta_fake, tmp_path, raw):
    args = '{"score": ' + raw + ', "rationale": "perfect"}'
    letta_fake.behaviours["judge"] = lambda fake, agent, text: [
        tool_call("submit_grade", args, "c1")
    ]
    result = grade(make(tmp_path, letta_fake), "4")
    assert (result.score, result.rationale) == (0.0, "perfect")
    shown = {"1e999": "inf"}.get(raw, raw.strip('"'))  # a bare 1e999 arrives as the float inf
    assert (
        result.error
        == f"the judge called submit_grade with a score that is not finite (score={shown})"
    )


@pytest.mark.parametrize("text", ['{"score": 1e999}', "[1.5e400]", '{"a": -1E+999}'])
def test_bounded_json_refuses_literals_too_large_for_a_float(text):
    with pytest.raises(ValueError, match=r"is too large \(numbers must be finite\)"):
        bounds.loads(text)
    assert bounds.loads('{"score": 1e308}') == {"score": 1e308}
