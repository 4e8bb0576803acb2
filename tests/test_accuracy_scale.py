"""An accuracy threshold <= 1 in a letta-evals suite: one warning with both readings, and
``accuracy_scale`` to choose one (letta-evals 0.4-0.20 computed accuracy as 0-100)."""

from __future__ import annotations

import pytest

from ci_evals.cli.app import main

# 5 samples, 3 answered right: accuracy 0.6 (letta-evals: 60.0).
ROWS = [{"id": i, "input": f"q{i}", "ground_truth": "yes"} for i in range(5)]
OUTPUTS = [{"id": i, "output": "yes" if i < 3 else "no"} for i in range(5)]

TYPED = """\
name: scale
dataset: dataset.jsonl
target:
  kind: replay
  outputs: outputs.jsonl
graders:
  right:
    kind: tool
    function: exact_match
gate:
  kind: simple
  metric_key: right
  aggregation: accuracy
  op: gte
  value: 0.9
"""


def write(sd, text: str) -> None:
    sd.write("dataset.jsonl", ROWS)
    sd.write("outputs.jsonl", OUTPUTS)
    sd.write("suite.yaml", text)


def warnings(capsys) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]


def test_a_typed_gate_at_or_below_one_warns_once_with_both_readings(sd, capsys):
    write(sd, TYPED)
    assert sd.run() == 1  # ci-evals: 0.6 < 0.9; letta-evals: 60.0 >= 0.9 passed
    assert warnings(capsys) == [
        f"warning: {sd.root / 'suite.yaml'}:15: gate.value: accuracy 0.9: letta-evals 0.4-0.20 reads it as 0.9 % "
        "(its accuracy is 0-100; passes at almost any accuracy); ci-evals reads it as the fraction 0.9 (90 % of "
        "samples). Set accuracy_scale: percent to reproduce letta-evals' verdict, or accuracy_scale: fraction to "
        "keep ci-evals' reading without this warning"
    ]
    gate = sd.summary()["gates"][0]
    assert (gate["value"], gate["actual"], gate["status"]) == (0.9, 0.6, "failed")


def test_accuracy_scale_percent_gives_letta_evals_verdict(sd, capsys):
    write(sd, "accuracy_scale: percent\n" + TYPED)
    assert sd.run() == 0
    assert warnings(capsys) == []
    gate = sd.summary()["gates"][0]
    assert (gate["value"], gate["actual"], gate["status"]) == (0.9 / 100, 0.6, "passed")


def test_accuracy_scale_percent_reads_sixty_as_sixty_percent_without_warning(sd, capsys):
    write(sd, "accuracy_scale: percent\n" + TYPED.replace("value: 0.9", "value: 61"))
    assert sd.run() == 1
    assert warnings(capsys) == []
    assert sd.summary()["gates"][0]["value"] == 0.61


def test_accuracy_scale_fraction_keeps_the_reading_silently(sd, capsys):
    write(sd, "accuracy_scale: fraction\n" + TYPED)
    assert sd.run() == 1
    assert warnings(capsys) == []
    assert sd.summary()["gates"][0]["value"] == 0.9


def test_a_0_5_gate_on_a_letta_target_warns_and_an_lt_gate_says_it_fails(sd, capsys):
    text = TYPED.replace(
        "  kind: replay\n  outputs: outputs.jsonl\n", "  kind: agent\n  agent_id: agent-1\n"
    )
    text = text.replace("  kind: simple\n", "").replace(
        "aggregation: accuracy\n  op: gte\n  value: 0.9",
        "metric: accuracy\n  op: lt\n  value: 0.25",
    )
    write(sd, text)
    assert main(["validate", str(sd.root / "suite.yaml")]) == 0
    assert warnings(capsys) == [
        f"warning: {sd.root / 'suite.yaml'}:14: gate.value: accuracy 0.25: letta-evals 0.4-0.20 reads it as 0.25 % "
        "(its accuracy is 0-100; fails at almost any accuracy); ci-evals reads it as the fraction 0.25 (25 % of "
        "samples). Set accuracy_scale: percent to reproduce letta-evals' verdict, or accuracy_scale: fraction to "
        "keep ci-evals' reading without this warning"
    ]


def test_a_0_5_gate_on_another_target_is_ci_evals_own_and_silent(sd, capsys):
    write(
        sd,
        TYPED.replace("  kind: simple\n", "").replace("aggregation: accuracy", "metric: accuracy"),
    )
    assert sd.run() == 1
    assert warnings(capsys) == []


def test_each_nested_condition_warns_on_its_own_line(sd, capsys):
    gate = (
        "gate:\n  kind: logical\n  operator: or\n  conditions:\n"
        "    - {metric_key: right, aggregation: accuracy, op: gte, value: 1}\n"
        "    - {metric_key: right, aggregation: avg_score, op: gte, value: 0.5}\n"
        "    - {metric_key: right, aggregation: accuracy, op: gte, value: 0}\n"
    )
    write(sd, TYPED[: TYPED.index("gate:")] + gate)
    assert sd.run() == 0  # avg 0.6 >= 0.5
    found = warnings(capsys)
    assert [w.split(": accuracy")[0] for w in found] == [
        f"warning: {sd.root / 'suite.yaml'}:14: gate.conditions[0].value"
    ]  # 0 reads the same on both scales
    assert "reads it as 1 % " in found[0] and "fraction 1 (100 % of samples)" in found[0]


@pytest.mark.parametrize(
    ("top", "value", "message"),
    [
        (
            "accuracy_scale: percentage\n",
            "0.9",
            "accuracy_scale must be fraction or percent (got 'percentage')",
        ),
        (
            "accuracy_scale: fraction\n",
            "60",
            "accuracy value 60 is above 1 (accuracy_scale: fraction)",
        ),
        (
            "accuracy_scale: percent\n",
            "120",
            "accuracy value 120 is not a percentage in [0, 100] (accuracy_scale: percent)",
        ),
    ],
)
def test_a_bad_scale_or_value_is_one_line_naming_the_key(sd, capsys, top, value, message):
    write(sd, top + TYPED.replace("value: 0.9", f"value: {value}"))
    assert sd.run() == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0] and "suite.yaml" in err[0], err
