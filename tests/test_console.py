"""The console after a run: which samples failed and why, colour only where it belongs, one number format."""

from __future__ import annotations

import heapq
import io
import os
import random

import pytest

from ci_evals.reports.console import failing_lines, render, use_color, verdict_line
from ci_evals.reports.failing import FailingPass, failing_entries
from tests.conftest import replay_suite

DATASET = [{"id": f"s{i:02d}", "input": f"q{i}", "ground_truth": "yes"} for i in range(14)]


def write_case(sd, outputs: dict[str, str]) -> None:
    sd.write("dataset.jsonl", DATASET)
    sd.write("outputs.jsonl", [{"id": k, "output": v} for k, v in outputs.items()])
    sd.write(
        "g.py",
        "from ci_evals import grader, GradeResult\n\n@grader\ndef short(sample, submission):\n"
        "    if submission == 'boom':\n        raise ValueError('grader broke\\non two lines')\n"
        "    return GradeResult(score=0.25 if len(submission) > 3 else 1.0, rationale=submission)\n",
    )
    sd.suite(
        replay_suite(
            {
                "answer": {"kind": "tool", "function": "contains", "display_name": "Answer"},
                "short": {"kind": "tool", "function": "g.py:short"},
            },
            {"metric_key": "answer", "metric": "accuracy", "op": "gte", "value": 0.9},
            max_errors=20,
        )
    )


def run_lines(sd, capsys, monkeypatch, *env: tuple[str, str]) -> list[str]:
    for name in ("FORCE_COLOR", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(
        "TERM", "xterm-256color"
    )  # TERM=dumb (CI's fresh root) means no colour at all
    for name, value in env:
        monkeypatch.setenv(name, value)
    code = sd.run("--max-concurrent", "3")
    capsys.readouterr()
    from ci_evals.cli.app import main

    assert (
        main(["run", str(sd.root / "suite.yaml"), "--output", str(sd.root / "out2"), "--no-cache"])
        == code
        == 1
    )
    return capsys.readouterr().out.splitlines()


OUTPUTS = {
    **{f"s{i:02d}": "yes" for i in range(13)},
    "s03": "no",
    "s05": "yes but long",
    "s07": "boom",
    "s09": "n\x1b[2J\x1b]0;pwned\x07o",
}  # s13 has no record: a target error


def test_the_console_lists_failing_and_errored_samples_with_a_reason(sd, capsys, monkeypatch):
    write_case(sd, OUTPUTS)
    lines = run_lines(sd, capsys, monkeypatch)
    start = lines.index("Failing samples: 5 of 14 result lines (7 failures):")
    assert lines[start : start + 8] == [
        "Failing samples: 5 of 14 result lines (7 failures):",
        "  FAIL     s03  Answer (answer)  0.000  Contains ground_truth: false",
        "  FAIL     s05  short            0.250  yes but long",
        "  FAIL     s07  Answer (answer)  0.000  Contains ground_truth: false",
        "  ERRORED  s07  short            -      grading error: grader 'g.py:short' raised ValueError: grader broke "
        "on two lines",
        "  FAIL     s09  Answer (answer)  0.000  Contains ground_truth: false",
        "  FAIL     s09  short            0.250  n\ufffd[2J\ufffd]0;pwned\ufffdo",
        "  ERRORED  s13  target           -      target error: no recorded output for sample id 's13' in outputs.jsonl",
    ]
    assert lines[start + 8] == ""
    assert "\x1b" not in "\n".join(lines)
    assert lines[-2] == (
        "Verdict: FAILED (Answer (answer): accuracy 0.7143, needs >= 0.9; "
        "1 of 14 samples errored (within max_errors 20))"
    )
    gate = next(ln for ln in lines if ln.startswith("Gate: "))
    assert gate.endswith(
        "-> UNSTABLE: FAIL (holds in 86 % of reruns)"
    )  # 0.71 against 0.9 with 14 samples


def test_one_number_format_rates_in_percent_means_in_fractions(sd, capsys, monkeypatch):
    write_case(sd, OUTPUTS)
    lines = run_lines(sd, capsys, monkeypatch)
    row = next(ln for ln in lines if ln.startswith("Answer (answer)"))
    assert row.split() == [
        "Answer",
        "(answer)",
        "0.769",
        "[0.538,",
        "1.000]",
        "71.4%",
        "[45.4%,",
        "88.3%]",
        "13/14",
        "1",
        "score",
        ">=",
        "1",
    ]


def test_force_color_paints_the_words_and_nothing_else(sd, capsys, monkeypatch):
    write_case(sd, OUTPUTS)
    lines = run_lines(sd, capsys, monkeypatch, ("FORCE_COLOR", "1"))
    start = lines.index("Failing samples: 5 of 14 result lines (7 failures):")
    assert (
        lines[start + 1]
        == "  \x1b[1;31mFAIL\x1b[0m     s03  Answer (answer)  0.000  Contains ground_truth: false"
    )
    assert lines[start + 4] == (
        "  \x1b[1;35mERRORED\x1b[0m  s07  short            -      "
        "grading error: grader 'g.py:short' raised ValueError: grader broke on two lines"
    )
    assert (
        lines[start + 6]
        == "  \x1b[1;31mFAIL\x1b[0m     s09  short            0.250  n\ufffd[2J\ufffd]0;pwned\ufffdo"
    )
    assert lines[-2].startswith(
        "Verdict: \x1b[1;31mFAILED\x1b[0m (Answer (answer): accuracy 0.7143, needs >= 0.9;"
    )
    assert next(ln for ln in lines if ln.startswith("Gate: ")).endswith(
        "-> UNSTABLE: \x1b[1;31mFAIL\x1b[0m (holds in 86 % of reruns)"
    )
    assert sum(ln.count("\x1b[") for ln in lines) == 2 * 9  # 7 entries, the gate, the verdict


def test_no_color_wins_over_force_color(sd, capsys, monkeypatch):
    write_case(sd, OUTPUTS)
    lines = run_lines(sd, capsys, monkeypatch, ("FORCE_COLOR", "1"), ("NO_COLOR", "1"))
    assert "\x1b" not in "\n".join(lines)


def test_a_passing_run_is_green_and_lists_nothing(sd, capsys, monkeypatch):
    write_case(sd, {f"s{i:02d}": "yes" for i in range(14)})
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.setenv(
        "TERM", "xterm-256color"
    )  # TERM=dumb (CI's fresh root) means no colour at all
    monkeypatch.delenv("NO_COLOR", raising=False)
    from ci_evals.cli.app import main

    assert (
        main(["run", str(sd.root / "suite.yaml"), "--output", str(sd.root / "out"), "--no-cache"])
        == 0
    )
    out = capsys.readouterr().out
    assert "Failing samples" not in out
    assert (
        "-> \x1b[1;32mPASS\x1b[0m (holds in 100 % of reruns)\nVerdict: \x1b[1;32mPASSED\x1b[0m (1 of 1 gates passed)\n"
        in out
    )


def test_quiet_run_colours_only_its_verdict_word(sd, capsys, monkeypatch):
    write_case(sd, OUTPUTS)
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.setenv(
        "TERM", "xterm-256color"
    )  # TERM=dumb (CI's fresh root) means no colour at all
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert sd.run() == 1
    assert (
        capsys.readouterr().out.splitlines()[0]
        == "t: \x1b[1;31mFAILED\x1b[0m (Answer (answer): accuracy 0.7143, needs >= 0.9; 1 of 14 samples errored "
        "(within max_errors 20))"
    )


def _terminal():
    master, slave = os.openpty()
    return master, os.fdopen(slave, "w")


@pytest.mark.parametrize(
    ("tty", "env", "expected"),
    [
        (True, {}, True),
        (True, {"NO_COLOR": "1"}, False),
        (True, {"TERM": "dumb"}, False),
        (False, {}, False),
        (False, {"FORCE_COLOR": "1"}, True),
        (False, {"FORCE_COLOR": "1", "NO_COLOR": "1"}, False),
    ],
)
def test_colour_on_a_terminal_honouring_no_color_and_force_color(monkeypatch, tty, env, expected):
    for name in ("FORCE_COLOR", "NO_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    if tty:
        master, stream = _terminal()
        try:
            assert use_color(stream) is expected
        finally:
            stream.close()
            os.close(master)
    else:
        assert use_color(io.StringIO()) is expected


def test_a_summary_without_a_verdict_is_printed_as_having_none():
    # Its gate failed; the console still does not decide a verdict in gating's stead.
    summary = {
        "suite": "qa",
        "n_samples": 1,
        "duration_s": 1.0,
        "metrics": {},
        "gates": [
            {
                "metric_key": "q",
                "description": "q avg_score gte 0.5",
                "status": "failed",
                "passed": False,
                "reason": "avg_score 0.2",
            }
        ],
    }
    assert verdict_line(summary, color=True) == "Verdict: NO VERDICT"
    assert render(summary).splitlines()[-2:] == [
        "Gate: q avg_score gte 0.5: avg_score 0.2 -> FAIL",
        "Verdict: NO VERDICT",
    ]


def test_the_list_stops_after_ten_and_says_how_many_more():
    results = [
        {
            "sample_id": f"x{i:02d}",
            "run": 0,
            "error": None,
            "grades": {"g": {"score": 0.5, "passed": False, "rationale": "half", "error": None}},
        }
        for i in range(23, -1, -1)
    ]
    lines = failing_lines({"records": 30, "metrics": {}}, iter(results))
    assert lines[0] == "Failing samples: 24 of 30 result lines (24 failures):"
    assert lines[1:] == [f"  FAIL  x{i:02d}  g  0.500  half" for i in range(10)] + [
        "  and 14 more (results.jsonl, report.html)"
    ]


def test_the_failing_pass_fed_line_by_line_keeps_what_heapq_nsmallest_keeps():
    rng = random.Random(7)
    rows = [
        {
            "sample_id": rng.choice(["a", "b", 3, 10, 11]),
            "run": rng.randrange(2),
            "model": rng.choice([None, "m"]),
            "error": None if rng.random() > 0.1 else {"category": "target", "message": "down"},
            "grades": {
                n: {
                    "score": rng.choice([0.0, 0.5, None]),
                    "passed": rng.random() > 0.6,
                    "rationale": str(i),
                    "error": None if rng.random() > 0.1 else "x",
                }
                for n in ("g", "h")
            },
        }
        for i in range(300)
    ]  # the same key many times: the earlier line first, as nsmallest keeps it
    for limit in (0, 1, 10, 1000):
        want = heapq.nsmallest(limit, failing_entries(rows, 2), key=lambda e: e[0])
        gather = FailingPass(2, limit)
        for row in rows:
            gather.add(row)
        tally = gather.tally()
        assert tally.shown == want and tally.failures == sum(1 for _ in failing_entries(rows, 2))
        assert tally.samples == len({e[0][:3] for e in failing_entries(rows, 2)})
        summary = {"records": 300, "num_runs": 2, "metrics": {}}
        assert failing_lines(summary, (), tally=tally, limit=limit) == failing_lines(
            summary, rows, limit=limit
        )


def test_repeats_and_models_tell_result_lines_apart():
    results = [
        {
            "sample_id": 7,
            "run": r,
            "model": "m/a",
            "error": None,
            "grades": {"g": {"score": 0.0, "passed": False, "rationale": "no", "error": None}},
        }
        for r in (1, 0)
    ]
    assert failing_lines(
        {"records": 2, "num_runs": 2, "metrics": {"g": {"label": "Good"}}}, results
    ) == [
        "Failing samples: 2 of 2 result lines (2 failures):",
        "  FAIL  7 run 0 [m/a]  Good (g)  0.000  no",
        "  FAIL  7 run 1 [m/a]  Good (g)  0.000  no",
    ]


def test_endpoint_lines_are_bounded_in_number_and_length():
    """A merged or downloaded summary.json is another machine's: 25 throttled endpoints with
    100,000-character names and a breaker's 100,000-character cause give 21 console lines of
    bounded length, and the verdict quotes the same cut cause."""
    from ci_evals.gating.verdict import decide
    from ci_evals.reports.console import ENDPOINTS_SHOWN, endpoint_lines

    cause = "stopped calling x: " + "@here\nline " * 20_000
    endpoints = [{"stopped": cause}] + [
        {"endpoint": "u" * 100_000 + str(i), "calls": 9, "rejected": 3, "waited_s": 1.25,
         "concurrency": 2, "lowest_concurrency": 1, "max_concurrent": 4}
        for i in range(24)
    ]  # fmt: skip
    lines = endpoint_lines({"endpoints": endpoints})
    assert len(lines) == ENDPOINTS_SHOWN + 1 == 21
    assert lines[-1] == "… and 5 more (all in summary.json, key endpoints)"
    assert lines[0] == "stopped: " + ("stopped calling x: " + "@here line " * 60)[:599] + "…"
    assert lines[1] == (
        f"throttled: {'u' * 199}…: 3 of 9 calls rejected (429/503/529), calls held back 1.2 s, "
        "settled at 2 in flight (lowest 1, cap 4)"
    )
    verdict, reason = decide({"errors": {"samples": 2}, "n_samples": 2, "endpoints": endpoints})
    assert verdict == "errored" and reason.startswith(lines[0][len("stopped: ") :] + "; ")
