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
from ci_evals.results.records import Summary
from tests.costspeed_data import BEFORE_CONSOLE, BEFORE_MD, EVIL, entry, records, summary
from tests.test_report_browser import Page, browser  # noqa: F401 (the fixture)

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
    "  Waits: queued 1.23 s, 3 throttled, 2 retries",
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
    "Waits: queued 1.23 s, 3 throttled, 2 retries · "
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
        "metrics": {"latency": entry("Latency", "s", measured=0, errors=5)},
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
    assert '<dd id="cs-waits">queued 1.23 s, 3 throttled, 2 retries</dd>' in block
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


@pytest.mark.browser
def test_html_latency_and_cost_columns_sort_in_a_browser(browser, tmp_path):  # noqa: F811
    from ci_evals.reports.html import write_report

    _folder(tmp_path, summary())
    report = write_report(tmp_path, summary())
    tab = Page(browser)
    tab.open(report)
    heads = tab.page.locator("#sample-head th").all_inner_texts()
    assert heads[-6:] == ["Duration s", "Latency", "Cost $", "Steps", "Tool calls", "Tokens"]

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
    assert column("Tokens") == ["1,200", "130", "cached", "0", "140"]
    tab.close(report)


def _grade(model: str, *, cost: float | None = None, unpriced: bool = False, tokens=(10, 5)):
    meta = {"model": model, "usage": {"prompt_tokens": tokens[0], "completion_tokens": tokens[1]}}
    if unpriced:
        meta["unpriced"] = [model]
    else:
        meta["cost_usd"] = cost
    return {"score": 1.0, "passed": True, "metadata": meta}


LINES = {
    "priced": {
        "latency_s": 0.25,
        "usage": {"prompt_tokens": 9, "completion_tokens": 7},
        "steps": 1,
        "tool_calls": 0,
        "target": {"cost_usd": 5e-06},
        "grades": {"a": _grade("m1", cost=1e-05), "b": _grade("m2", cost=2e-05)},
    },
    "judges-unpriced": {  # tokens of all three judges; the cost unknown, naming the first unpriced
        "latency_s": 0.5,
        "target": {"unpriced": ["t-model"]},
        "grades": {
            "a": _grade("m1", cost=1e-05),
            "b": _grade("odd-1", unpriced=True, tokens=(100, 50)),
            "c": _grade("odd-2", unpriced=True, tokens=(1000, 500)),
        },
    },
    "cached": {"cache_hits": 2, "usage": {"prompt_tokens": 3}, "grades": {"a": {"score": 0.0}}},
    "errored": {"error": {"message": "boom"}, "grades": {"a": _grade("m1", cost=1.0)}},
    "bare": {"latency_s": 1, "grades": {}},
}


def test_a_lines_row_values_are_its_built_in_metrics_as_measure_reads_them():
    """report.html's and junit.xml's per-line values (read without a Reading per value) agree with
    :func:`measure_some` on every kind of line, and the judges' tokens and cost come from one pass."""
    from ci_evals.reports.costspeed import ROW_KEYS, sample_values
    from ci_evals.results.measures import measure_some

    def through_readings(rec):
        out = {}
        for name, r in zip(ROW_KEYS, measure_some(rec, ROW_KEYS), strict=True):
            if r.value is not None:
                out[name] = r.value
            elif r.cached:
                out[name] = "cached"
            elif r.unknown is not None and "price" in r.unknown:
                out[name] = f"unknown: {r.unknown}"
        return out

    got = {k: sample_values(rec) for k, rec in LINES.items()}
    assert got == {k: through_readings(rec) for k, rec in LINES.items()}
    assert got == {
        "priced": {
            "latency": 0.25,
            "tokens": 16.0,
            "cost_usd": 5e-06,
            "steps": 1.0,
            "tool_calls": 0.0,
        },
        "judges-unpriced": {
            "latency": 0.5,
            "tokens": 0.0,
            "cost_usd": "unknown: model 't-model' has no known price",
        },
        "cached": {"latency": "cached", "tokens": 3.0},
        "errored": {},
        "bare": {"latency": 1.0, "tokens": 0.0},
    }
    tokens, cost = measure_some(LINES["judges-unpriced"], ("judge_tokens", "judge_cost_usd"))
    assert tokens.value == 15 + 150 + 1500
    assert (cost.value, cost.unknown) == (None, "model 'odd-1' has no known price")
    tokens, cost = measure_some(LINES["priced"], ("judge_tokens", "judge_cost_usd"))
    assert (tokens.value, cost.value) == (30.0, 0.0 + 1e-05 + 2e-05)  # summed in grade order
