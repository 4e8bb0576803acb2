"""Start-up imports happen before the run's clock: ``prepare()`` on the target and every grader
(a multi grader's sub-graders too) runs before any ``start()``, and summary.json's ``duration_s``
does not include it. An LLM's ``prepare`` imports its provider's HTTP library or SDK and never raises."""

from __future__ import annotations

import sys
import time

import pytest

from ci_evals.graders.base import Grader
from ci_evals.llm import transport
from ci_evals.llm.client import LLM
from ci_evals.targets.base import Target
from tests.conftest import replay_suite

SLOW = 0.6


def test_prepare_runs_before_start_and_outside_the_runs_clock(sd, monkeypatch):
    calls: list[str] = []

    def slow_target_prepare(self):
        calls.append("prepare target")
        time.sleep(SLOW)

    def grader_prepare(self):
        calls.append(f"prepare {self.name}")

    orig_target_start, orig_grader_start = Target.start, Grader.start

    async def target_start(self):
        calls.append("start target")
        await orig_target_start(self)

    async def grader_start(self):
        calls.append(f"start {self.name}")
        await orig_grader_start(self)

    monkeypatch.setattr(Target, "prepare", slow_target_prepare)
    monkeypatch.setattr(Grader, "prepare", grader_prepare)
    monkeypatch.setattr(Target, "start", target_start)
    monkeypatch.setattr(Grader, "start", grader_start)
    sd.write("dataset.jsonl", [{"id": 1, "input": "q", "ground_truth": "4"}])
    sd.write("outputs.jsonl", [{"id": 1, "output": "4"}])
    sd.suite(
        replay_suite(
            {
                "exact": {"kind": "tool", "function": "exact_match"},
                "both": {
                    "kind": "multi",
                    "graders": {
                        "a": {"kind": "tool", "function": "contains"},
                        "b": {"kind": "tool", "function": "exact_match"},
                    },
                    "calculate_output": "a * b",
                },
            },
            {"metric_key": "exact", "op": "gte", "value": 1.0},
        )
    )
    assert sd.run() == 0
    assert calls[:4] == ["prepare target", "prepare exact", "prepare both.a", "prepare both.b"]
    assert set(calls[4:]) == {"start target", "start exact", "start both.a", "start both.b"}
    assert sd.summary()["duration_s"] < SLOW


def test_an_openai_llm_prepares_aiohttp_and_a_vendor_llm_its_sdk(monkeypatch):
    seen: list[str] = []
    monkeypatch.setattr(transport, "preload_sdk", seen.append)
    monkeypatch.setitem(
        sys.modules, "aiohttp", None
    )  # importing it raises: prepare() swallows that
    LLM().prepare()
    LLM(provider="anthropic").prepare()
    LLM(provider="google").prepare()
    assert seen == ["anthropic", "google"]
    with pytest.raises(ImportError):  # what openai's prepare() tried and swallowed
        transport.preload("openai")


def test_a_vendor_sdk_that_breaks_on_import_is_left_for_start_to_report(monkeypatch):
    def broken(provider):
        raise AttributeError("module 'httpx' has no attribute 'Timeout'")  # a version clash

    monkeypatch.setattr(transport, "preload_sdk", broken)
    LLM(provider="anthropic").prepare()  # the run goes on to start(), as before prepare() existed


def test_preload_imports_aiohttp_only_on_the_direct_path(monkeypatch):
    monkeypatch.setitem(sys.modules, "aiohttp", None)
    monkeypatch.setattr(transport, "USE_AIOHTTP", False)
    transport.preload()  # httpx's transport: nothing to import ahead
