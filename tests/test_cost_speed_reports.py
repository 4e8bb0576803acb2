"""The "Cost and speed" block where people look: the console, summary.md, the PR comment,
report.html (the block, and per-sample latency/cost/steps columns that sort) and junit.xml.

One hand-built run: latency 3x slower than the baseline (a failed ``max_increase`` gate), an
answer from the LLM cache (no latency), a model with no known price whose name is hostile, and a
budget that stopped the run. And a summary from before ``cost_speed`` renders exactly as it did.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from ci_evals.reports import console, costspeed
from ci_evals.reports.comment import render_comment
from ci_evals.reports.html import render_report
from ci_evals.reports.junit import write_junit
from ci_evals.reports.markdown import render_summary_md
from ci_evals.results.records import ResultRecord, Summary
from tests.test_report_browser import Page, browser  # noqa: F401 (the fixture)

EVIL = "@evil/<b>x</b>|`[y](z)`"


def _entry(label: str, unit: str, **kw: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "label": label,
        "unit": unit,
        "n": 5,
        "measured": 4,
        "errors": 1,
        "cached": 0,
        "unknown": 0,
        "unknown_reasons": [],
        **{k: None for k in ("mean", "median", "p95", "p99", "min", "max", "sum")},
    }
    return {**out, **kw}


def _zero(label: str, unit: str) -> dict[str, Any]:
    return _entry(label, unit, mean=0.0, median=0.0, p95=0.0, p99=0.0, min=0.0, max=0.0, sum=0.0)


def cost_speed() -> dict[str, Any]:
    reason = f"model {EVIL!r} has no known price"
    return {
        "metrics": {
            "latency": _entry(
                "Latency",
                "s",
                measured=3,
                cached=1,
                mean=3.12,
                median=2.0,
                p95=4.7,
                p99=4.94,
                min=1.0,
                max=5.0,
                sum=9.36,
            ),
            "tokens": _entry(
                "Tokens",
                "",
                mean=367.5,
                median=65.0,
                p95=1065.0,
                p99=1185.0,
                min=0.0,
                max=1200.0,
                sum=1470.0,
            ),
            "prompt_tokens": _entry(
                "Prompt tokens", "", mean=277.5, min=0.0, max=1000.0, sum=1110.0
            ),
            "completion_tokens": _entry(
                "Completion tokens", "", mean=90.0, min=0.0, max=200.0, sum=360.0
            ),
            "cost_usd": _entry(
                "Cost",
                "$",
                measured=3,
                unknown=1,
                unknown_reasons=[reason],
                mean=0.00166667,
                median=0.001,
                p95=0.0037,
                p99=0.00394,
                min=0.0,
                max=0.004,
                sum=0.005,
            ),
            "steps": _entry(
                "Steps", "", mean=3.0, median=2.5, p95=5.55, p99=5.91, min=1.0, max=6.0, sum=12.0
            ),
            "tool_calls": _entry(
                "Tool calls", "", mean=1.0, median=0.5, p95=2.7, p99=2.94, min=0.0, max=3.0, sum=4.0
            ),
            "judge_tokens": _zero("Judge tokens", ""),
            "judge_cost_usd": _zero("Judge cost", "$"),
        },
        "queued_s": 1.234,
        "throttled": 3,
        "retries": 2,
        "cache_hits": 1,
        "cost_usd": 0.0123,
        "unpriced": [EVIL],
        "budget": {
            "max_steps": None,
            "max_tokens": None,
            "max_cost_usd": 0.01,
            "spent_usd": 0.0123,
            "stopped": "max_cost_usd $0.01 spent",
            "stopped_samples": 1,
        },
    }


def _gates() -> list[dict[str, Any]]:
    common = {"metric_key": "latency", "label": "Latency", "status": "failed", "passed": False}
    counts = {"errors": 1, "graded": 3, "n": 5}
    return [
        {
            **common,
            **counts,
            "metric": "p95",
            "op": "lte",
            "value": 4.0,
            "actual": 4.7,
            "description": "latency p95 lte 4",
            "reason": "p95 4.7 > 4",
        },
        {
            **common,
            **counts,
            "metric": "avg_score",
            "op": None,
            "value": None,
            "actual": 3.12,
            "description": "latency avg_score max_increase 0.2",
            "baseline_value": 1.0,
            "increase": 2.12,
            "max_increase": 0.2,
            "noisy": True,
            "tests": [],
            "reason": "3.12 against baseline 1 (+212.0%, max_increase 0.2)",
        },
    ]


def summary(with_cost_speed: bool = True) -> Summary:
    out: dict[str, Any] = {
        "schema_version": 1,
        "suite": "speedy",
        "n_samples": 5,
        "num_runs": 1,
        "records": 5,
        "duration_s": 12.5,
        "started_at": "2026-01-02T03:04:05+00:00",
        "verdict": "errored",
        "verdict_reason": "budget: max_cost_usd $0.01 spent",
        "target": {"kind": "python"},
        "gate": {"passed": False},
        "gates": _gates(),
        "metrics": {
            "answer": {
                "label": "Answer",
                "kind": "contains",
                "n": 5,
                "graded": 4,
                "errors": 1,
                "mean": 0.75,
                "passed": 3,
                "pass_rate": 0.6,
                "ci_mean": [0.25, 1.0],
                "ci_pass_rate": [0.23, 0.88],
                "rule": "score >= 1",
            }
        },
        "errors": {"total": 1, "samples": 1, "by_category": {"budget": 1}, "groups": []},
        "usage": {"total": {"prompt_tokens": 1110, "completion_tokens": 360}, "cost_usd": 0.0123},
        "cache": {"hits": 1},
        "retries": 2,
        "versions": {"ci_evals": "9.9.9"},
        "baseline": {
            "folder": "base-results",
            "metrics": {},
            "regressions": [],
            "improvements": [],
            "new": [],
            "removed": [],
            "cost_speed": {
                "latency": {"baseline_mean": 1.0, "mean": 3.12, "change_mean": 2.12},
                "tokens": {"baseline_mean": 367.5, "mean": 367.5, "change_mean": 0.0},
                "cost_usd": {"baseline_mean": 0.0033, "mean": 0.00166667, "change_mean": -0.4949},
                "steps": {"baseline_mean": 0.0, "mean": 3.0, "change_mean": None},
            },
        },
    }
    if with_cost_speed:
        out["cost_speed"] = cost_speed()
    else:  # a folder from before: no cost_speed, no gate on a built-in metric
        del out["baseline"]["cost_speed"]
        out["gates"] = [
            {
                "metric_key": "answer",
                "metric": "accuracy",
                "op": "gte",
                "value": 0.8,
                "actual": 0.6,
                "label": "Answer",
                "description": "answer accuracy gte 0.8",
                "status": "failed",
                "passed": False,
                "reason": "accuracy 0.6000, needs >= 0.8",
                "errors": 1,
                "graded": 4,
                "n": 5,
            }
        ]
    return out  # type: ignore[return-value]


def _line(sid: str, **kw: Any) -> dict[str, Any]:
    ok = {"score": 1.0, "passed": True, "rationale": "ok", "error": None, "metadata": {}}
    return {"sample_id": sid, "run": 0, "model": None, "input": "q", "grades": {"answer": ok}, **kw}


def records() -> list[ResultRecord]:
    return [  # type: ignore[list-item]
        _line(
            "fast",
            latency_s=1.0,
            usage={"prompt_tokens": 100, "completion_tokens": 30},
            target={"cost_usd": 0.001},
            steps=2,
            tool_calls=1,
            duration_s=1.1,
        ),
        _line(
            "slow",
            latency_s=5.0,
            usage={"prompt_tokens": 1000, "completion_tokens": 200},
            target={"cost_usd": 0.004},
            steps=6,
            tool_calls=3,
            duration_s=5.1,
        ),
        _line(
            "cached",
            latency_s=None,
            cache_hits=1,
            usage={},
            target={"cost_usd": 0.0},
            steps=1,
            tool_calls=0,
            duration_s=0.1,
        ),
        _line(
            "unpriced",
            latency_s=3.36,
            usage={"prompt_tokens": 10, "completion_tokens": 130},
            target={"unpriced": [EVIL]},
            steps=3,
            tool_calls=0,
            duration_s=3.4,
        ),
        _line(
            "stopped",
            error={"category": "budget", "message": "max_cost_usd $0.01 spent"},
            grades={
                "answer": {
                    "score": None,
                    "passed": False,
                    "error": "budget",
                    "error_category": "budget",
                }
            },
        ),
    ]


# ---------------------------------------------------------------- the console

CONSOLE_BLOCK = [
    "Cost and speed:",
    "  Latency     mean 3.12 s, p95 4.7 s, max 5 s; 1 of 5 from the LLM cache, not timed; "
    "1 errored (no value); +212% ▲ vs baseline",
    "  Tokens      mean 368, p95 1,065, max 1,200, total 1,470 (1,110 prompt + 360 completion); "
    "1 errored (no value); 0% = vs baseline",
    "  Cost        mean $0.0017, p95 $0.0037, max $0.0040, total ≥ $0.0050; unknown for 1 of 5: "
    f"model {EVIL!r} has no known price; 1 errored (no value); −49% ▼ vs baseline",
    "  Steps       mean 3, p95 5.55, max 6, total 12; 1 errored (no value); – vs baseline",
    "  Tool calls  mean 1, p95 2.7, max 3, total 4; 1 errored (no value); – vs baseline",
    "  Waits: queued 1.23 s, 3 throttled, 2 retries, 1 cache hit",
    f"  Run cost: ≥ $0.0123 (1 model unpriced: {EVIL})",
    "  Budget: stopped: max_cost_usd $0.01 spent (1 sample stopped)",
]


def test_console_block_follows_the_metric_table():
    text = console.render(summary(), records())
    lines = text.splitlines()
    start = lines.index("Cost and speed:")
    assert lines[start - 2] == console.INTERVALS_NOTE and lines[start - 1] == ""
    assert lines[start : start + len(CONSOLE_BLOCK)] == CONSOLE_BLOCK
    assert lines[start + len(CONSOLE_BLOCK)] == ""  # then the errors
    gates = [line for line in lines if line.startswith("Gate")]
    assert gates == [
        "Gate: Latency (latency) p95 lte 4: p95 4.7 > 4 -> FAIL",
        "Gate: Latency (latency) avg_score max_increase 0.2: "
        "3.12 against baseline 1 (+212.0%, max_increase 0.2) -> FAIL",
    ]


def test_console_flattens_control_characters_from_the_run():
    s = summary()
    s["cost_speed"]["unpriced"] = ["bad\x1b[31mred\nname"]
    line = next(x for x in console.render(s).splitlines() if "Run cost" in x)
    assert line == "  Run cost: ≥ $0.0123 (1 model unpriced: bad\ufffd[31mred name)"


# ---------------------------------------------------------------- summary.md and the PR comment

ESCAPED = "@\u200devil/&lt;b&gt;x&lt;/b&gt;\\|\\`\\[y\\](z)\\`"
MD_BLOCK = [
    "| Metric | Mean | p95 | Max | Total | vs baseline |",
    "|---|---:|---:|---:|---:|---:|",
    "| Latency | 3.12 s | 4.7 s | 5 s | – | +212% ▲ |",
    "| Tokens | 368 | 1,065 | 1,200 | 1,470 (1,110 prompt + 360 completion) | 0% = |",
    "| Cost | $0.0017 | $0.0037 | $0.0040 | ≥ $0.0050 | −49% ▼ |",
    "| Steps | 3 | 5.55 | 6 | 12 | – |",
    "| Tool calls | 1 | 2.7 | 3 | 4 | – |",
    "",
    "- Latency: 1 of 5 from the LLM cache, not timed; 1 errored (no value)",
    "- Tokens: 1 errored (no value)",
    f"- Cost: unknown for 1 of 5: model '{ESCAPED}' has no known price; 1 errored (no value)",
    "- Steps: 1 errored (no value)",
    "- Tool calls: 1 errored (no value)",
    "",
    "Waits: queued 1.23 s, 3 throttled, 2 retries, 1 cache hit · "
    f"run cost ≥ $0.0123 (1 model unpriced: {ESCAPED})",
    "",
    "**Budget:** stopped: max_cost_usd $0.01 spent (1 sample stopped)",
    "",
]


def test_summary_md_block_after_the_metrics():
    md = render_summary_md(summary(), records()).splitlines()
    start = md.index("### Cost and speed")
    assert md[start - 2].startswith("<sub>Means are over graded samples")  # the metric table's note
    assert md[start + 1 : start + 2 + len(MD_BLOCK)] == ["", *MD_BLOCK]
    assert md[start + 2 + len(MD_BLOCK)].startswith("**Errors:**")
    gates = [line for line in md if line.startswith("| Latency (latency)")]
    assert gates == [
        "| Latency (latency) p95 lte 4 | 4.7 s |  | 3/5 | 1 | ❌ failed | p95 4.7 &gt; 4 |",
        "| Latency (latency) avg_score max_increase 0.2 | increase +212.0% from 1 s, max 20% |"
        "  | 3/5 | 1 | ❌ failed | 3.12 against baseline 1 (+212.0%, max_increase 0.2) |",
    ]


def test_pr_comment_has_the_block_and_fits():
    body = render_comment(summary(), records(), run_url=None, marker_key="speedy")
    lines = body.splitlines()
    start = lines.index("**Cost and speed**")
    assert lines[start + 1 : start + 2 + len(MD_BLOCK)] == ["", *MD_BLOCK]
    assert "<b>" not in body and "@evil" not in body  # no markup, no mention
    # many hostile model names: the block stays bounded and the comment within its limit
    s = summary()
    s["cost_speed"]["unpriced"] = [f"@m{i}/" + "<i>" * 60 for i in range(50)]
    s["cost_speed"]["metrics"]["cost_usd"]["unknown_reasons"] = ["x" * 5000] * 5
    big = render_comment(s, records(), run_url=None, marker_key="speedy", max_chars=6000)
    assert len(big) <= 6000 and "**Cost and speed**" in big
    line = next(x for x in big.splitlines() if "models unpriced" in x)
    assert "50 models unpriced: @\u200dm0/&lt;i&gt;" in line and len(line) < 1000
    assert max(len(x) for x in big.splitlines()) < 1000  # each reason cut too
    assert "<i>" not in big


def test_no_baseline_no_change_column_and_nothing_to_show_no_block():
    s = summary()
    del s["baseline"]
    md = render_summary_md(s, [])
    assert "| Metric | Mean | p95 | Max | Total |\n|---|---:|---:|---:|---:|\n| Latency |" in md
    quiet = summary()
    quiet["gates"] = []
    quiet["cost_speed"] = {
        "metrics": {"latency": _entry("Latency", "s", measured=0, errors=5)},
        "queued_s": 0.0,
        "throttled": 0,
        "retries": 0,
        "cache_hits": 0,
        "cost_usd": None,
        "unpriced": [],
    }
    assert costspeed.has_block(quiet) is False
    assert "Cost and speed" not in render_summary_md(quiet, []) + console.render(quiet)


# ---------------------------------------------------------------- report.html


def _folder(tmp_path: Path, s: Summary) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "summary.json").write_text(json.dumps(s))
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records()))
    return tmp_path / "results.jsonl"


def _data(page: str) -> dict[str, Any]:
    raw = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', page, re.S)
    assert raw is not None
    return json.loads(raw.group(1))


def test_html_block_and_per_sample_values(tmp_path):
    page = render_report(summary(), _folder(tmp_path, summary()))
    block = page[page.index('<section id="cost-speed">') : page.index('<section id="samples">')]
    assert (
        "<thead><tr><th>Metric</th><th>Mean</th><th>p95</th><th>Max</th><th>Total</th>"
        "<th>vs baseline</th><th>Notes</th></tr></thead>" in block
    )
    assert (
        '<tr><td>Latency</td><td class="num">3.12 s</td><td class="num">4.7 s</td>'
        '<td class="num">5 s</td><td class="num">–</td><td class="num">+212% ▲</td>'
        "<td>1 of 5 from the LLM cache, not timed; 1 errored (no value)</td></tr>" in block
    )
    assert '<dd id="cs-waits">queued 1.23 s, 3 throttled, 2 retries, 1 cache hit</dd>' in block
    assert (
        '<dd id="cs-cost">≥ $0.0123 (1 model unpriced: @evil/&lt;b&gt;x&lt;/b&gt;|`[y](z)`)</dd>'
        in block
    )
    assert '<dd id="cs-budget">stopped: max_cost_usd $0.01 spent (1 sample stopped)</dd>' in block
    assert "<b>" not in block
    rows = {r["id"]: r.get("cs") for r in _data(page)["rows"]}
    assert rows == {
        "fast": {"latency": 1.0, "cost_usd": 0.001, "steps": 2.0, "tool_calls": 1.0},
        "slow": {"latency": 5.0, "cost_usd": 0.004, "steps": 6.0, "tool_calls": 3.0},
        "cached": {"latency": "cached", "cost_usd": 0.0, "steps": 1.0, "tool_calls": 0.0},
        "unpriced": {
            "latency": 3.36,
            "cost_usd": f"unknown: model {EVIL!r} has no known price",
            "steps": 3.0,
            "tool_calls": 0.0,
        },
        "stopped": None,
    }
    # the sort hook: the measured columns sort by their numbers, like every other column
    assert "if (MEASURES[key]) return typeof r.cs[key] ===" in page
    assert 'latency: ["Latency", fmtSeconds]' in page and 'cost_usd: ["Cost $", fmtUsd]' in page
    # the script runs under the page's CSP: allowed by its hash
    csp = re.search(r"script-src '(sha256-[^']+)'", page)
    script = re.search(r"<script>(.*?)</script>", page, re.S)
    assert csp and script
    from ci_evals.reports.html import _sha256

    assert csp.group(1) == _sha256(script.group(1))


def test_html_regression_gate_threshold_says_max_increase(tmp_path):
    page = render_report(summary(), _folder(tmp_path, summary()))
    assert '<td class="num"> max increase 20%</td>' in page


# ---------------------------------------------------------------- junit.xml


def test_junit_testcase_and_testsuite_properties(tmp_path):
    write_junit(summary(), records(), tmp_path / "junit.xml")
    xml = (tmp_path / "junit.xml").read_text()
    fast = re.search(r'<testcase name="sample fast"[^>]*>(<properties>.*?</properties>)', xml)
    assert fast is not None and fast.group(1) == (
        '<properties><property name="latency_s" value="1"/><property name="tokens" value="130"/>'
        '<property name="cost_usd" value="0.001"/><property name="steps" value="2"/>'
        '<property name="tool_calls" value="1"/></properties>'
    )
    cached = re.search(
        r'<testcase name="sample cached"[^>]*><properties><property name="latency_s" value="([^"]*)"',
        xml,
    )
    assert cached is not None and cached.group(1) == "cached"
    assert (
        '<property name="cost_usd" value="unknown: model &apos;@evil/&lt;b&gt;x&lt;/b&gt;|`[y](z)`&apos; '
        'has no known price"/>'
        in xml
        or '<property name="cost_usd" value="unknown: model \'@evil/&lt;b&gt;x&lt;/b&gt;|`[y](z)`\' '
        'has no known price"/>'
        in xml
    )
    assert '<testcase name="sample stopped" classname="speedy.answer" time="0.000000"><error' in xml
    suite = xml[xml.index('<testsuite name="speedy.answer"') : xml.index("</properties>")]
    for name, value in [
        ("cost_speed.latency.mean", "3.12"),
        ("cost_speed.latency.p95", "4.7"),
        ("cost_speed.latency.max", "5"),
        ("cost_speed.tokens.sum", "1470"),
        ("cost_speed.cost_usd.sum", "0.005"),
        ("cost_speed.steps.sum", "12"),
        ("cost_speed.cost_usd", "0.0123"),
        ("cost_speed.queued_s", "1.234"),
        ("cost_speed.throttled", "3"),
        ("cost_speed.unpriced", "@evil/&lt;b&gt;x&lt;/b&gt;|`[y](z)`"),
        ("cost_speed.budget", "stopped: max_cost_usd $0.01 spent (1 sample stopped)"),
    ]:
        assert f'<property name="{name}" value="{value}"/>' in suite, name
    assert "cost_speed.judge_tokens" not in suite  # all 0: not shown


# ---------------------------------------------------------------- older folders: as before


def test_a_summary_without_cost_speed_renders_as_before(tmp_path):
    """Written by the reports before this block existed, for the same summary and lines."""
    old = summary(with_cost_speed=False)
    assert console.render(old, records()) == BEFORE_CONSOLE
    assert render_summary_md(old, records()) == BEFORE_MD
    body = render_comment(old, records(), run_url=None, marker_key="speedy")
    assert "Cost and speed" not in body and "Waits" not in body
    write_junit(old, records(), tmp_path / "junit.xml")
    xml = (tmp_path / "junit.xml").read_text()
    assert "cost_speed" not in xml and "<properties><property" not in xml
    page = render_report(old, _folder(tmp_path / "f", old))
    assert 'id="cost-speed"' not in page
    assert old == summary(with_cost_speed=False)  # nothing was written into it


BEFORE_CONSOLE = (
    "Suite: speedy  (5 samples, 12.50 s)\n"
    "metric           mean    mean 95% CI     pass rate    pass rate 95% CI    graded/n    errors    pass rule    Δ mean\n"
    "---------------  ------  --------------  -----------  ------------------  ----------  --------  -----------  --------\n"
    "Answer (answer)  0.750   [0.250, 1.000]  60.0%        [23.0%, 88.0%]      4/5         1         score >= 1   -\n"
    "95% intervals: the mean's by bootstrap (normal approximation above 200 samples), the pass rate's by Wilson score\n"
    "\n"
    "Errors: 1 of 5 result lines errored (budget 1); errored samples have no score and count as failed:\n"
    "\n"
    "Failing samples: 1 of 5 result lines (1 failure):\n"
    "  ERRORED  stopped  budget  -  budget error: max_cost_usd $0.01 spent\n"
    "Baseline: 0 regressions, 0 improvements, 0 new, 0 removed\n"
    "\n"
    "Gate: Answer (answer) accuracy gte 0.8: accuracy 0.6000, needs >= 0.8 -> FAIL\n"
    "Verdict: ERRORED (budget: max_cost_usd $0.01 spent)"
)

BEFORE_MD = (
    "## ❌ ci-evals · speedy: errored\n"
    "\n"
    "**Verdict: errored**: budget: max_cost_usd $0.01 spent\n"
    "\n"
    "5 samples × 1 run(s) · target python · 12.5 s\n"
    "\n"
    "### Gates\n"
    "\n"
    "| Gate | Actual | 95% interval | Graded | Errors | Status | Why |\n"
    "|---|---:|---:|---:|---:|---|---|\n"
    "| Answer (answer) accuracy gte 0.8 | 0.600 |  | 4/5 | 1 | ❌ failed | accuracy 0.6000, needs &gt;= 0.8 |\n"
    "\n"
    "### Metrics\n"
    "\n"
    "| Metric | Mean (95% CI) | Pass rate (95% Wilson) | Passed | Graded | Errors | Pass rule |\n"
    "|---|---:|---:|---:|---:|---:|---|\n"
    "| Answer (answer) | 0.750 (0.250–1.000) | 60.0% (23.0%–88.0%) | 3/5 | 4/5 | 1 | `score >= 1` |\n"
    "\n"
    "<sub>Means are over graded samples; pass rates over all samples, errored ones counting as failed. 95% intervals: the mean's by bootstrap (normal approximation above 200 samples), the pass rate's by Wilson score.</sub>\n"
    "\n"
    "**Errors:** 1 errored sample (no score, counted as failed): budget 1\n"
    "\n"
    "\n"
    "### Usage\n"
    "\n"
    "Tokens: 1,110 prompt + 360 completion (target 0, graders 0) · cost $0.0123 · cache hits 1 · retries 2\n"
    "\n"
    "| | Prompt tokens | Completion tokens |\n"
    "|---|---:|---:|\n"
    "| target | 0 | 0 |\n"
    "| **total** | 1,110 | 360 |\n"
    "\n"
    "### Compared with the baseline\n"
    "\n"
    "Baseline: base-results\n"
    "\n"
    "regressions: 0 · improvements: 0 · new: 0 · removed: 0\n"
    "\n"
    "Full report: report.html in the results artifact\n"
    "\n"
    "<sub>ci_evals 9.9.9</sub>\n"
)


@pytest.mark.browser
def test_html_latency_and_cost_columns_sort_in_a_browser(browser, tmp_path):  # noqa: F811
    from ci_evals.reports.html import write_report

    _folder(tmp_path, summary())
    report = write_report(tmp_path, summary())
    tab = Page(browser)
    tab.open(report)
    heads = tab.page.locator("#sample-head th").all_inner_texts()
    assert heads[-6:] == ["Duration s", "Latency", "Tokens", "Cost $", "Steps", "Tool calls"]

    def column(key: str) -> list[str]:
        index = heads.index(key)
        return [
            tab.page.locator("#sample-body tr").nth(i).locator("td").nth(index).inner_text()
            for i in range(5)
        ]

    tab.page.click("#sample-head th[data-key=latency]")
    assert column("Sample") == ["cached", "stopped", "fast", "unpriced", "slow"]
    assert column("Latency") == ["cached", "–", "1 s", "3.36 s", "5 s"]
    tab.page.click("#sample-head th[data-key=cost_usd]")
    tab.page.click("#sample-head th[data-key=cost_usd]")  # again: dearest first
    assert column("Cost $") == ["$0.0040", "$0.0010", "$0", "–", "unknown"]
    unknown = tab.page.locator("#sample-body td[title^=unknown]")
    assert unknown.get_attribute("title") == f"unknown: model {EVIL!r} has no known price"
    assert column("Steps") == ["6", "2", "1", "–", "3"]
    tab.close(report)
