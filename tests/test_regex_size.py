"""F15: a regex is compiled only up to MAX_PATTERN_CHARS (compiling cannot be interrupted), once per
distinct pattern; a huge pattern is an error for its sample and never delays a signal."""

from __future__ import annotations

import json
import signal
import subprocess
import time

from ci_evals._util import rx
from tests.conftest import replay_suite
from tests.test_time_limits import CLI

HUGE = "|".join(f"word{i}" for i in range(200_000))  # 2.1 million characters: seconds to compile


def test_a_200000_alternative_pattern_is_an_error_without_compiling(sd):
    sd.write(
        "dataset.jsonl",
        [{"id": i, "input": "q", "ground_truth": HUGE if i else "^a+$"} for i in range(3)],
    )
    sd.write("outputs.jsonl", [{"id": i, "output": "aaa"} for i in range(3)])
    sd.suite(
        replay_suite(
            {"r": {"kind": "tool", "function": "regex_match"}}, {"op": "gte", "value": 0.5}
        )
    )
    t0 = time.monotonic()
    assert sd.run() == 1
    assert time.monotonic() - t0 < 10
    grades = {r["sample_id"]: r["grades"]["r"] for r in sd.results()}
    assert (grades[0]["score"], grades[0]["error"]) == (1.0, None)
    assert grades[1]["error"] == (
        "regex_match: the pattern is 2,088,889 characters long; at most 10,000 are "
        "compiled (compiling cannot be interrupted)"
    )
    assert sd.summary()["verdict"] == "errored"


def test_a_huge_pattern_extractor_is_a_configuration_error(sd, capsys):
    sd.write("dataset.jsonl", [{"id": 1, "input": "q", "ground_truth": "a"}])
    sd.write("outputs.jsonl", [{"id": 1, "output": "a"}])
    sd.suite(
        replay_suite(
            {
                "c": {
                    "kind": "tool",
                    "function": "contains",
                    "extractor": "pattern",
                    "extractor_config": {"pattern": "(" + "x" * 10_001 + ")"},
                }
            },
            {"op": "gte", "value": 0.5},
        )
    )
    assert sd.run() == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the pattern is 10,003 characters long; at most 10,000" in err


def test_each_distinct_pattern_is_compiled_once(monkeypatch):
    rx.compile_pattern.cache_clear()
    p = "^(ab|cd)+$"
    assert rx.compile_pattern(p) is rx.compile_pattern(p)
    assert rx.compile_pattern.cache_info().hits == 1


def test_sigint_during_huge_patterns_exits_within_2_seconds(sd):
    sd.write("dataset.jsonl", [{"id": i, "input": "q", "ground_truth": HUGE} for i in range(40)])
    sd.write("outputs.jsonl", [{"id": i, "output": "zzz"} for i in range(40)])
    sd.write(
        "slow.py",
        "import time\nfrom ci_evals import grader, GradeResult\n\n@grader\n"
        "def slow(sample, submission):\n    time.sleep(0.2)\n    return GradeResult(score=1.0)\n",
    )
    sd.suite(
        replay_suite(
            {
                "r": {"kind": "tool", "function": "regex_match"},
                "s": {"kind": "tool", "function": "slow.py:slow"},
            },
            {"op": "gte", "value": 0.5},
            max_concurrent=2,
        )
    )
    proc = subprocess.Popen(
        [*CLI, "run", "suite.yaml", "--output", "out", "-q", "--no-cache"],
        cwd=sd.root,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    results = sd.root / "out" / "results.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (
        results.exists() and results.read_text().count("\n") >= 2
    ):
        time.sleep(0.02)
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert time.monotonic() - t0 < 2.0
    assert json.loads((sd.root / "out" / "summary.json").read_text())["interrupted_by"] == "SIGINT"
