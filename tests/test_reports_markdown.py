"""summary.md / step summary rendering and the shared escaping helpers."""

from __future__ import annotations

from ci_evals._util.text import fit
from ci_evals.gating.verdict import decide
from ci_evals.reports.digest import digest
from ci_evals.reports.markdown import render_error_md, render_summary_md, verdict, verdict_line
from ci_evals.reports.text import ZWJ, escape_html, escape_md, fenced, fmt_delta
from tests.fakes import report_data as data


def section(md: str, heading: str) -> list[str]:
    """The lines under ``heading`` up to the next heading or the end."""
    lines = md.splitlines()
    start = lines.index(heading) + 1
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("#")), len(lines))
    return [ln for ln in lines[start:end] if ln]


def test_truncate_keeps_short_text_and_says_how_much_was_cut():
    assert fit("hello", 10) == "hello"
    assert fit("x" * 100, 40) == "x" * 18 + "… (82 more characters)"
    assert fit("x" * 100_000, 40) == "x" * 14 + "… (99,986 more characters)"
    assert fit("x" * 100, 10) == "x" * 10


def test_escape_md_neutralises_html_links_tables_and_mentions():
    raw = '<img src=x onerror="alert(1)"> | [click](http://evil.example) @octocat fixes #12 & GH-7 *bold*'
    assert escape_md(raw) == (
        '&lt;img src=x onerror="alert(1)"&gt; \\| \\[click\\](http://evil.example) '
        f"@{ZWJ}octocat fixes #{ZWJ}12 &amp; GH-{ZWJ}7 \\*bold\\*"
    )


def test_escape_md_flattens_newlines_and_escapes_a_leading_heading_mark():
    assert escape_md("# Title\nnext line") == "\\# Title next line"


def test_escape_md_keeps_intraword_underscores_and_decimals_after_at():
    assert escape_md("ground_truth _x_ @0.95") == "ground_truth \\_x\\_ @0.95"


def test_escape_md_truncates_before_escaping():
    assert escape_md("<" * 50, limit=30) == "&lt;" * 8 + "… (42 more characters)"


def test_escape_html_for_summary_elements():
    assert escape_html('a "b" <c> @dev') == f"a &quot;b&quot; &lt;c&gt; @{ZWJ}dev"


def test_fenced_uses_a_fence_longer_than_any_backtick_run_inside():
    text = "before\n```\nnot a fence close\n`````\nafter"
    assert fenced(text) == "``````text\n" + text + "\n``````"


def test_fenced_default_fence_is_three_backticks():
    assert fenced("plain") == "```text\nplain\n```"


def test_fmt_delta_signs_and_units():
    assert fmt_delta(0.05) == "▲ +0.050"
    assert fmt_delta(-0.1167) == "▼ −0.117"
    assert fmt_delta(0.0) == "= 0.000"
    assert fmt_delta(-0.1667, pct=True) == "▼ −16.7 pp"
    assert fmt_delta(None) == "–"


def test_digest_orders_worst_rows_and_buckets_graded_scores():
    d = digest(data.results(), worst=3)
    assert [r["sample_id"] for r in d.worst] == [2, 3, 4]
    assert d.failing_rows == 3  # sample 6 errored: it is in the grouped errors, not here
    assert d.histograms["quality"] == [0, 0, 0, 1, 0, 1, 0, 0, 1, 2]
    assert d.histograms["exact"] == [3, 0, 0, 0, 0, 0, 0, 0, 0, 2]


def test_verdicts():
    assert verdict(data.summary()) == ("❌", "failed")
    assert verdict(data.passing_summary()) == ("✅", "passed")
    assert verdict(data.summary(verdict="partial", partial=True)) == ("⚠️", "partial")
    assert verdict(data.summary(verdict="interrupted", interrupted_by="SIGTERM")) == (
        "⚠️",
        "interrupted",
    )
    assert verdict(data.summary(verdict="errored")) == ("❌", "errored")
    no_gate = data.summary(gates=[], gate={"passed": True})
    no_gate["verdict"], no_gate["verdict_reason"] = decide(no_gate)  # as gating writes it
    assert verdict(no_gate) == ("❌", "errored")  # one sample errored, and the run's budget is 0
    assert verdict_line(no_gate) == (
        "**Verdict: errored**: 1 of 6 samples errored (max_errors 0); no gate configured"
    )


def test_a_summary_without_a_verdict_is_shown_as_having_none_never_decided_again():
    # Its gates failed and a sample errored; the report still does not decide in gating's stead.
    none = data.summary(verdict=None, verdict_reason=None)
    assert verdict(none) == ("❔", "no verdict")
    assert verdict_line(none) == (
        "**No verdict**: summary.json records no verdict "
        "(written by another tool or an older version)."
    )
    md = render_summary_md(none, data.results())
    assert md.splitlines()[:3] == [
        "## ❔ ci-evals · qa: no verdict",
        "",
        verdict_line(none),
    ]


def test_summary_md_heading_gates_and_metrics():
    md = render_summary_md(data.summary(), data.results())
    assert md.splitlines()[:3] == [
        "## ❌ ci-evals · qa: failed",
        "",
        "**Verdict: failed**: Answer quality (quality): avg_score 0.5833, needs &gt;= 0.75",
    ]
    assert section(md, "### Gates") == [
        "| Gate | Actual | 95% interval | Graded | Errors | Status | Why |",
        "|---|---:|---:|---:|---:|---|---|",
        "| Answer quality (quality) avg_score gte 0.75 | 0.583 |  | 5/6 | 1 | ❌ failed | avg_score 0.5833, "
        "needs &gt;= 0.75; 1 of 6 samples errored (within max_errors 1) |",
    ]
    assert section(md, "### Metrics") == [
        "| Metric | Mean (95% CI) | Pass rate (95% Wilson) | Passed | Graded | Errors | Pass rule |",
        "|---|---:|---:|---:|---:|---:|---|",
        "| Answer quality (quality) | 0.583 (0.350–0.800) | 50.0% (10.0%–70.0%) | 3/6 | 5/6 | 1 | `score >= 0.75` |",
        "| exact | 0.333 (0.350–0.800) | 33.3% (10.0%–70.0%) | 2/6 | 5/6 | 1 | `score >= 1` |",
        "<sub>Means are over graded samples; pass rates over all samples, errored ones counting as failed. "
        "95% intervals: the mean's by bootstrap (normal approximation above 200 samples), the pass rate's "
        "by Wilson score.</sub>",
        "**Errors:** 1 errored sample (no score, counted as failed): target 1",
        "| Error | Grader | Count | Message |",
        "|---|---|---:|---|",
        "| target | – | 1 | agent exited with code 1: boom |",
    ]


def test_summary_md_usage_and_cost():
    md = render_summary_md(data.summary(), data.results())
    assert section(md, "### Usage") == [
        "Tokens: 1,250 prompt + 325 completion (target 75, graders 1,500) · cost $0.0123 · "
        "cache hits 2 · retries 1",
        "| | Prompt tokens | Completion tokens |",
        "|---|---:|---:|",
        "| target | 50 | 25 |",
        "| grader Answer quality (quality) | 1,200 | 300 |",
        "| **total** | 1,250 | 325 |",
    ]


def test_summary_md_worst_failing_samples_with_errors():
    md = render_summary_md(data.summary(), data.results(), worst=2)
    assert section(md, "### Worst failing samples (2 of 3 failing samples, 3 failing grades)") == [
        "| Sample | Metric | Score | Why |",
        "|---|---|---:|---|",
        "| sample 2 | exact | 0.000 | Exact match: false |",
        "| sample 3 | Answer quality (quality) | 0.550 | judge says 0.55 |",
        "| sample 3 | exact | 0.000 | Exact match: false |",
        "Full report: report.html in the results artifact",
        "<sub>ci_evals 0.1.0 · python 3.11.7 · openai 3.54.0</sub>",
    ]


def test_summary_md_baseline_section():
    md = render_summary_md(data.baseline_summary(), data.results())
    assert section(md, "### Compared with the baseline") == [
        "Baseline: baseline-results (2026-11-21T09:00:00+00:00)",
        "| Metric | Baseline | Current | Δ mean | Δ pass rate |",
        "|---|---:|---:|---:|---:|",
        "| Answer quality (quality) | 0.700 | 0.583 | ▼ −0.117 | ▼ −16.7 pp |",
        "| exact | 0.333 | 0.333 | = 0.000 | = 0.0 pp |",
        "regressions: 2 · improvements: 1 · new: 1 · removed: 1",
        "**Regressions (passed before, fail now)**",
        "- sample 3: Answer quality (quality)",
        "- sample 4: exact",
        "**Improvements (failed before, pass now)**",
        "- sample 5: exact",
        "**New samples**",
        "- sample 6",
        "**Removed samples**",
        "- sample 7",
    ]
    assert section(md, "### Gates")[2:] == [
        "| Answer quality (quality) avg_score gte 0.5 @0.95 | 0.583 | 0.350–0.800 | 5/6 | 1 | ⚠️ inconclusive | "
        "avg_score 0.5833, 0.95 interval \\[0.3500, 0.8000\\] straddles &gt;= 0.5; 1 of 6 samples errored "
        "(within max_errors 1) |",
        "| exact avg_score max_regressions 1 | 2 regressions |  | 5/6 | 1 | ❌ failed | 2 regressions, "
        "max 1; 1 of 6 samples errored (within max_errors 1) |",
    ]


def test_summary_md_without_baseline_has_no_baseline_section():
    assert "baseline" not in render_summary_md(data.summary(), data.results()).lower()


def test_summary_md_flaky_and_per_model_tables():
    doc = data.summary(
        flaky=[{"sample_id": 3, "model": None, "metric": "quality", "passes": 1, "runs": 3}],
        models={"gpt-x": {"metrics": {"exact": data.summary()["metrics"]["exact"]}, "gates": []}},
    )
    md = render_summary_md(doc, [])
    assert "**Flaky:** 1 flaky (verdict differs across repeats): 3 (quality)" in md
    assert section(md, "#### Model gpt-x")[2] == (
        "| exact | 0.333 (0.350–0.800) | 33.3% (10.0%–70.0%) | 2/6 | 5/6 | 1 | `score >= 1` |"
    )


def test_summary_md_escapes_model_output_in_the_failure_table():
    rows = data.results()
    rows[3]["grades"]["quality"]["rationale"] = "<script>x</script> ping @admin | [a](b)"
    md = render_summary_md(data.summary(), rows)
    assert "<script>" not in md and "@admin" not in md
    assert f"&lt;script&gt;x&lt;/script&gt; ping @{ZWJ}admin \\| \\[a\\](b)" in md


def test_error_md_fences_the_message():
    assert render_error_md("suite.yaml: configuration error", "error: bad key `x`") == (
        "## ❌ ci-evals · suite.yaml: configuration error\n\n```text\nerror: bad key `x`\n```\n"
    )


def test_summary_md_names_the_artifact_holding_report_html(monkeypatch):
    monkeypatch.setenv("CI_EVALS_ARTIFACT", "ci-evals-results")
    md = render_summary_md(data.summary(), data.results())
    assert "\nFull report: report.html in the results artifact **ci-evals-results**\n" in md
