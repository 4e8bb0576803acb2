"""Issue 37 G8: async user code is contained like sync user code. A coroutine raising a
BaseException of its own or asyncio.CancelledError (what wait_for and client timeouts raise) is
that sample's error, counted, with a summary; a coroutine that blocks (time.sleep) neither holds
off SIGINT nor the samples after it."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from tests.conftest import replay_suite
from tests.test_time_limits import sigint_when

RAISES = {
    "CancelledError": ("import asyncio\n", "raise asyncio.CancelledError()", "CancelledError()"),
    "own BaseException": ("class Stop(BaseException):\n    pass\n", "raise Stop('x')", "Stop('x')"),
    "KeyboardInterrupt": ("", "raise KeyboardInterrupt", "KeyboardInterrupt()"),
    "leaked cancellation": (
        "import asyncio\n",
        "t = asyncio.ensure_future(asyncio.sleep(5)); await asyncio.sleep(0); t.cancel(); await t",
        "CancelledError()",
    ),
}


def _two_samples(sd) -> None:
    sd.write(
        "dataset.jsonl",
        [
            {"id": 1, "input": "q", "ground_truth": "a"},
            {"id": 2, "input": "r", "ground_truth": "b"},
        ],
    )
    sd.write("outputs.jsonl", [{"id": 1, "output": "a"}, {"id": 2, "output": "b"}])


@pytest.mark.parametrize("case", RAISES)
def test_an_async_grader_raising_any_base_exception_is_that_samples_error(sd, case):
    head, body, shown = RAISES[case]
    _two_samples(sd)
    sd.write(
        "g.py",
        head
        + "from ci_evals import grader, GradeResult\n\n@grader\nasync def g(sample, submission):\n"
        f"    if sample.id == 2:\n        {body}\n    return GradeResult(score=1.0)\n",
    )
    sd.suite(
        replay_suite({"g": {"kind": "tool", "function": "g.py:g"}}, {"op": "gte", "value": 0.5})
    )
    assert sd.run() == 1
    rows = sorted(sd.results(), key=lambda r: r["sample_id"])
    assert [r["grades"]["g"]["score"] for r in rows] == [1.0, None]
    assert rows[1]["grades"]["g"]["error"] == f"grader 'g.py:g' raised {shown}"
    summary = sd.summary()
    assert (summary["verdict"], summary["metrics"]["g"]["errors"]) == ("errored", 1)


@pytest.mark.parametrize("case", RAISES)
def test_an_async_reward_composer_raising_any_base_exception_is_that_samples_error(sd, case):
    head, body, shown = RAISES[case]
    _two_samples(sd)
    sd.write(
        "rewards.py",
        head + "from ci_evals import reward_composer\n\n@reward_composer\nasync def compose(ctx):\n"
        f"    if ctx.sample.id == 2:\n        {body}\n    return 1.0\n",
    )
    sd.suite(
        replay_suite(
            {"acc": {"kind": "tool", "function": "exact_match"}},
            {"metric_key": "reward", "op": "gte", "value": 0.5},
            reward={"kind": "custom", "function": "rewards.py:compose"},
        )
    )
    assert sd.run() == 1
    rows = sorted(sd.results(), key=lambda r: r["sample_id"])
    assert [r["grades"]["reward"]["score"] for r in rows] == [1.0, None]
    assert (
        rows[1]["grades"]["reward"]["error"]
        == f"reward composer rewards.py:compose failed: {shown}"
    )
    assert sd.summary()["metrics"]["reward"]["errors"] == 1


def test_an_async_setup_script_raising_cancelled_error_is_a_one_line_configuration_error(
    sd, capsys
):
    _two_samples(sd)
    sd.write(
        "setup.py",
        "import asyncio\nfrom ci_evals import suite_setup\n\n@suite_setup\nasync def prepare():\n"
        "    raise asyncio.CancelledError()\n",
    )
    sd.suite(
        replay_suite(
            {"acc": {"kind": "tool", "function": "exact_match"}},
            {"op": "gte", "value": 0.5},
            setup_script="setup.py:prepare",
        )
    )
    assert sd.run() == 2
    assert (
        capsys.readouterr().err
        == f"error: {sd.root / 'suite.yaml'}: setup_script: setup script raised CancelledError()\n"
    )


def test_a_module_raising_its_own_base_exception_at_import_is_a_configuration_error(sd, capsys):
    _two_samples(sd)
    sd.write("g.py", "class Stop(BaseException):\n    pass\n\nraise Stop('at import')\n")
    sd.suite(
        replay_suite({"g": {"kind": "tool", "function": "g.py:f"}}, {"op": "gte", "value": 0.5})
    )
    assert sd.run() == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "importing it failed: Stop: at import" in err


BLOCKING = (
    "import time\nfrom ci_evals import grader, GradeResult\n\n@grader\nasync def g(sample, submission):\n"
    "    if sample.input == 'stuck':\n        time.sleep(60)\n    return GradeResult(score=1.0)\n"
)


def test_sigint_ends_the_run_within_2_seconds_while_a_coroutine_blocks(sd):
    sd.write("g.py", BLOCKING)
    sd.write("dataset.jsonl", [{"id": i, "input": "stuck", "ground_truth": "ok"} for i in range(3)])
    sd.write("outputs.jsonl", [{"id": i, "output": "ok"} for i in range(3)])
    sd.suite(
        replay_suite({"g": {"kind": "tool", "function": "g.py:g"}}, {"op": "gte", "value": 0.5})
    )
    started = time.monotonic()
    rc, err, took = sigint_when(sd, lambda: time.monotonic() - started > 2.5)  # loaded, and blocked
    assert rc == 130, err
    assert took < 2, f"{took:.2f} s"
    assert sd.summary()["partial"] is True
    assert "Traceback" not in err


def test_a_blocking_coroutine_is_abandoned_at_its_limit_and_the_samples_after_it_are_graded(
    sd, monkeypatch
):
    from ci_evals.usercode import aio, lane

    monkeypatch.setattr(lane, "USER_CODE_SECONDS", 0.5)
    monkeypatch.setattr(aio, "GRACE_SECONDS", 0.3)
    sd.write("g.py", BLOCKING.replace("time.sleep(60)", "time.sleep(8)"))
    inputs = ["fine", "stuck", "fine", "fine"]
    sd.write(
        "dataset.jsonl", [{"id": i, "input": x, "ground_truth": "ok"} for i, x in enumerate(inputs)]
    )
    sd.write("outputs.jsonl", [{"id": i, "output": "ok"} for i in range(len(inputs))])
    sd.suite(
        replay_suite(
            {"g": {"kind": "tool", "function": "g.py:g"}},
            {"op": "gte", "value": 0.5},
            max_concurrent=1,
        )
    )
    t0 = time.monotonic()
    assert sd.run() == 1
    assert time.monotonic() - t0 < 5
    grades = [r["grades"]["g"] for r in sorted(sd.results(), key=lambda r: r["sample_id"])]
    assert [(g["score"], g["error"]) for g in grades] == [
        (1.0, None),
        (None, "grader 'g.py:g' took over 0.5 s and was abandoned"),
        (1.0, None),
        (1.0, None),
    ]


def test_cli_process_with_a_cancelled_async_grader_writes_its_summary(tmp_path):
    from tests.conftest import SuiteDir

    sd = SuiteDir(tmp_path)
    _two_samples(sd)
    sd.write(
        "g.py",
        "import asyncio\nfrom ci_evals import grader, GradeResult\n\n@grader\n"
        "async def g(sample, submission):\n    raise asyncio.CancelledError()\n",
    )
    sd.suite(
        replay_suite({"g": {"kind": "tool", "function": "g.py:g"}}, {"op": "gte", "value": 0.5})
    )
    proc = subprocess.run(
        [sys.executable, "-m", "ci_evals", "run", "suite.yaml", "-o", "out", "-q", "--no-cache"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr
    assert sd.summary()["verdict"] == "errored"
    assert "Traceback" not in proc.stderr
