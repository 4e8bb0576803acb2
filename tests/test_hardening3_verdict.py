"""Issue 37 (a low): a grader that errors on every sample but is not gated is named in the verdict line."""

from __future__ import annotations

from tests.conftest import replay_suite


def test_an_ungated_grader_that_errors_is_named_in_the_verdict_line(sd, capsys):
    sd.write(
        "g.py",
        "from ci_evals import grader, GradeResult\n\n@grader\ndef broken(sample, submission):\n"
        "    raise RuntimeError('no luck')\n",
    )
    sd.write("dataset.jsonl", [{"id": i, "input": "q", "ground_truth": "a"} for i in range(3)])
    sd.write("outputs.jsonl", [{"id": i, "output": "a"} for i in range(3)])
    sd.suite(
        replay_suite(
            {
                "ok": {"kind": "tool", "function": "exact_match"},
                "style": {"kind": "tool", "function": "g.py:broken"},
            },
            gate={"metric_key": "ok", "op": "gte", "value": 1.0},
        )
    )
    assert sd.run() == 0
    s = sd.summary()
    assert s["verdict_reason"] == "1 of 1 gates passed; not gated: 3 of 3 samples errored in style"
    assert (
        "t: PASSED (1 of 1 gates passed; not gated: 3 of 3 samples errored in style)\n"
        in capsys.readouterr().out
    )
