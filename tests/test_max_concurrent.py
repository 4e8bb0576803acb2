"""``max_concurrent`` has one default (ci_evals.config.rates.DEFAULT_MAX_CONCURRENT): the value the
docs state, the one a run uses when neither the command line nor the suite sets it, and the LLM
endpoint's highest in-flight limit. The suite's key wins over the default, the flag over both."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ci_evals.action.help import INPUTS
from ci_evals.config.rates import DEFAULT_MAX_CONCURRENT
from ci_evals.llm.limits import Limits
from ci_evals.llm.pool import EngineConfig
from ci_evals.run.runner import RunOptions
from tests.fakes.openai_server import FakeOpenAI

ROOT = Path(__file__).resolve().parent.parent


def test_the_documented_default_is_the_one_defined():
    reference = (ROOT / "docs" / "reference.md").read_text(encoding="utf-8")
    (row,) = re.findall(r"^\| `max_concurrent` \| (\d+) \|", reference, re.M)
    assert int(row) == DEFAULT_MAX_CONCURRENT == 10
    for doc in ("README.md", "docs/github-action.md", "action.yml"):
        text = (ROOT / doc).read_text(encoding="utf-8")
        said = re.findall(r"overrides max_concurrent in the suite; default (\d+)\)", text)
        assert said and {int(n) for n in said} == {DEFAULT_MAX_CONCURRENT}, doc
    (described,) = [what for name, _, what in INPUTS if name == "max-concurrent"]
    assert described.endswith(f"else {DEFAULT_MAX_CONCURRENT})")


def test_every_place_that_needs_a_default_uses_the_one_default():
    assert RunOptions(output=Path("out")).max_concurrent == DEFAULT_MAX_CONCURRENT
    assert EngineConfig().max_concurrent == DEFAULT_MAX_CONCURRENT
    assert Limits().max_concurrent == DEFAULT_MAX_CONCURRENT


@pytest.mark.parametrize(
    ("in_suite", "flag", "used"),
    [
        (None, None, DEFAULT_MAX_CONCURRENT),  # neither says: the documented default
        (3, None, 3),  # the suite's key
        (3, "2", 2),  # --max-concurrent wins over the suite
    ],
)
def test_a_run_holds_the_samples_in_flight_to_the_setting_that_applies(
    sd, monkeypatch, in_suite, flag, used
):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-max-concurrent-test-1234567890")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    n = 3 * DEFAULT_MAX_CONCURRENT
    sd.write(
        "dataset.jsonl",
        [
            {"id": f"s{i}", "input": f"what is {i} + {i}?", "ground_truth": str(2 * i)}
            for i in range(n)
        ],
    )
    with FakeOpenAI(latency=0.3) as server:
        spec = {
            "name": "concurrency",
            "dataset": "dataset.jsonl",
            "target": {"kind": "model", "model": "gpt-4o-mini", "base_url": server.url},
            "graders": {"has": {"kind": "tool", "function": "contains"}},
        }
        if in_suite is not None:
            spec["max_concurrent"] = in_suite
        sd.suite(spec)
        code = sd.run(*(["--max-concurrent", flag] if flag else []))
        peak = server.max_in_flight
    (endpoint,) = sd.summary()["endpoints"]
    assert (code, endpoint["max_concurrent"], endpoint["calls"]) == (0, used, n)
    assert peak == used  # every worker had a call in flight, never one more
