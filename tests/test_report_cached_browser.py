"""report.html in Chromium: samples and calls answered from the LLM cache are marked "cached" (not
"Tokens 0"), the run facts name the target's model and the judges' models, the histograms have axes.

A real run of examples/rubric (a model target and an LLM judge) against the fake OpenAI server,
twice with one cache folder: the second run's every call comes from the cache.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.fakes.openai_server import FakeOpenAI
from tests.test_report_browser import Page, browser  # noqa: F401 (fixture)

pytestmark = pytest.mark.browser
ROOT = Path(__file__).resolve().parent.parent
SUITE = ROOT / "examples" / "rubric" / "suite.yaml"


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    """``first/`` (every call made) and ``second/`` (every call from the cache) of the rubric example.

    The runs are processes of their own: Playwright's sync API holds an event loop in this one."""
    import os
    import subprocess
    import sys

    root = tmp_path_factory.mktemp("cached")
    answers = json.loads((ROOT / "examples" / "rubric" / "fake_answers.json").read_text())
    with FakeOpenAI(answers=answers) as fake:
        env = {**os.environ, "OPENAI_BASE_URL": fake.url, "OPENAI_API_KEY": "sk-test-cache-0000"}
        for out in ("first", "second"):
            proc = subprocess.run(
                [sys.executable, "-m", "ci_evals", "run", str(SUITE), "-o", out, "-q"],
                cwd=root,
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert proc.returncode == 0, proc.stderr
            assert (
                fake.count("/v1/chat/completions") == 8
            )  # 4 answers + 4 judgements, the first time only
    return root


@pytest.fixture
def tab(browser):  # noqa: F811 (the imported fixture)
    return Page(browser)


def test_cached_samples_and_calls_say_cached_instead_of_zero_tokens(tab, runs):
    report = runs / "second" / "report.html"
    tab.open(report)
    cells = [tab.page.locator("#sample-body tr").nth(i).locator("td").last for i in range(4)]
    assert [c.inner_text() for c in cells] == ["cached"] * 4
    assert (
        cells[0].get_attribute("title") == "2 LLM calls answered from the cache (no tokens spent)"
    )
    assert (
        tab.text("#fact-tokens")
        == "0 prompt + 0 completion · 8 LLM calls answered from the cache cached"
    )
    sid = tab.page.locator("#sample-body tr").first.get_attribute("data-id")
    tab.open(report, "#sample=" + quote(sid))
    tab.page.wait_for_selector("#detail:not([hidden])")
    detail = tab.page.locator("#detail")
    assert (
        "cached\n2 LLM calls answered from the cache (no tokens spent): the target's 1, the graders' 1"
        in detail.inner_text()
    )
    grader = detail.locator("table.grades tbody tr").first.locator("td").first
    assert grader.inner_text() == "Answer quality cached"
    tab.shot("report-cached")
    tab.close(report)


def test_a_run_that_called_the_model_shows_its_tokens_and_no_cached_mark(tab, runs):
    report = runs / "first" / "report.html"
    tab.open(report)
    tokens = [
        tab.page.locator("#sample-body tr").nth(i).locator("td").last.inner_text() for i in range(4)
    ]
    assert all(t.isdigit() and int(t) > 0 for t in tokens), tokens
    assert tab.page.locator(".badge.cached").count() == 0
    tab.close(report)


def test_the_run_facts_name_the_target_model_and_the_judge_model(tab, runs):
    report = runs / "first" / "report.html"
    tab.open(report)
    assert tab.text("#fact-target") == "model · gpt-4o-mini"
    assert tab.text("#fact-judges") == "gpt-4o-mini (Answer quality, quality)"
    tab.close(report)


def test_histograms_have_labelled_axes(tab, runs):
    report = runs / "first" / "report.html"
    tab.open(report)
    svg = tab.page.locator("#metrics svg.hist").first
    assert svg.locator("line.axis").count() == 2
    assert [svg.locator(f"text.{c}").inner_html() for c in ("x-min", "x-max", "y-max")] == [
        "0",
        "1",
        "4",
    ]
    assert svg.locator("rect").count() == 10
    heights = [float(svg.locator("rect").nth(i).get_attribute("height")) for i in range(10)]
    assert heights == [0.0] * 9 + [
        36.0
    ]  # all 4 judged 1.0: the last bucket, as tall as the axis says
    assert svg.locator("rect").last.locator("title").inner_html() == "0.9–1.0: 4 samples"
    tab.close(report)
