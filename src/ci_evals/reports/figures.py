"""The figures of summary.md and the PR comment, as markdown: the metric tables with their
intervals, token usage, and the comparison with a baseline.

Every name, label and message in them comes from the suite or a run: it goes through
``escape_md`` (``reports.text``) like the rest of the markdown reports.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ci_evals.gating.verdict import display_name
from ci_evals.reports import costspeed
from ci_evals.reports.text import (
    code,
    escape_md,
    fmt_cost,
    fmt_delta,
    fmt_int,
    fmt_pct,
    fmt_score,
    with_interval,
)
from ci_evals.results.records import BaselineBlock, BaselineMetric, MetricEntry, Summary


def baseline_metrics(summary: Summary) -> dict[str, BaselineMetric]:
    """Per-metric baseline figures, ``summary["baseline"]["metrics"]`` (empty without a baseline)."""
    return (summary.get("baseline") or {}).get("metrics") or {}


def metric_table(
    metrics: dict[str, MetricEntry], summary: Summary, *, compact: bool, deltas: bool = True
) -> list[str]:
    """The metric table; ``compact`` (the PR comment) drops the pass-rate interval and rules, adds Δ vs baseline.

    ``deltas=False`` for per-model tables: the baseline block compares the overall metrics only.
    """
    if not metrics:
        return []
    base = baseline_metrics(summary) if deltas else {}
    if compact:
        head = "| Metric | Mean (95% CI) | Pass rate | Graded | Errors | Pass rule |" + (
            " Δ mean vs baseline |" if base else ""
        )
        lines = [head, "|---|---:|---:|---:|---:|---|" + ("---:|" if base else "")]
    else:
        head = "| Metric | Mean (95% CI) | Pass rate (95% Wilson) | Passed | Graded | Errors | Pass rule |"
        lines = [head, "|---|---:|---:|---:|---:|---:|---|"]
    for name, m in metrics.items():
        label = escape_md(display_name(m.get("label"), name))
        passed = f"{fmt_int(m.get('passed'))}/{fmt_int(m.get('n'))}"
        graded, errors = (
            f"{fmt_int(m.get('graded'))}/{fmt_int(m.get('n'))}",
            fmt_int(m.get("errors")),
        )
        rule = code(m.get("rule") or m.get("pass_rule") or "")
        if compact:
            row = (
                f"| {label} | {with_interval(m.get('mean'), m.get('ci_mean'))} | "
                f"{fmt_pct(m.get('pass_rate'))} ({passed}) | {graded} | {errors} | {rule} |"
            )
            if base:
                row += f" {fmt_delta((base.get(name) or {}).get('delta_mean'))} |"
        else:
            row = (
                f"| {label} | {with_interval(m.get('mean'), m.get('ci_mean'))} | "
                f"{with_interval(m.get('pass_rate'), m.get('ci_pass_rate'), pct=True)} | {passed} | "
                f"{graded} | {errors} | {rule} |"
            )
        lines.append(row)
    lines += ["", INTERVALS_NOTE]
    return lines


INTERVALS_NOTE = (
    "<sub>Means are over graded samples; pass rates over all samples, errored ones "
    "counting as failed. 95% intervals: the mean's by bootstrap (normal approximation "
    "above 200 samples), the pass rate's by Wilson score.</sub>"
)


def _tokens(u: dict[str, Any] | None) -> int:
    u = u or {}
    return int(u.get("prompt_tokens") or 0) + int(u.get("completion_tokens") or 0)


def usage_line(summary: Summary) -> str:
    """Token totals (target and graders), cost, cache hits and retries on one line."""
    usage = summary.get("usage") or {}
    total = usage.get("total") or {}
    graders = sum(_tokens(u) for u in (usage.get("graders") or {}).values())
    return " · ".join(
        [
            f"Tokens: {fmt_int(total.get('prompt_tokens'))} prompt + "
            f"{fmt_int(total.get('completion_tokens'))} completion "
            f"(target {fmt_int(_tokens(usage.get('target')))}, graders {fmt_int(graders)})",
            f"cost {fmt_cost(usage.get('cost_usd'))}",
            f"cache hits {fmt_int((summary.get('cache') or {}).get('hits'))}",
            f"retries {fmt_int(summary.get('retries'))}",
        ]
    )


def usage_table(summary: Summary) -> list[str]:
    """Tokens per target and grader (only when any were used)."""
    usage = summary.get("usage") or {}
    if not _tokens(usage.get("total")):
        return []
    lines = ["| | Prompt tokens | Completion tokens |", "|---|---:|---:|"]
    rows = [("target", usage.get("target"))]
    labels = summary.get("metrics") or {}
    rows += [
        (f"grader {escape_md(display_name((labels.get(n) or {}).get('label'), n))}", u)
        for n, u in (usage.get("graders") or {}).items()
    ]
    rows.append(("**total**", usage.get("total")))
    for label, u in rows:
        u = u or {}
        lines.append(
            f"| {label} | {fmt_int(u.get('prompt_tokens'))} | {fmt_int(u.get('completion_tokens'))} |"
        )
    return lines


def cost_speed_section(summary: Summary, heading: str, limit: int | None = None) -> list[str]:
    """summary.md's and the PR comment's "Cost and speed" block (``reports.costspeed``): a table,
    its notes, the waits, the run's cost and the budget, every text from the run through
    ``escape_md`` (cut at ``limit``). Nothing when there is nothing to show."""

    def escape(text: str) -> str:
        return escape_md(text, limit)

    block = costspeed.block_of(summary)
    if block is None or not costspeed.has_block(summary):
        return []
    lines = [heading, ""] if heading else []
    shown = costspeed.rows(summary)
    with_base = any(r.change is not None for r in shown)
    if shown:
        lines += [
            "| Metric | Mean | p95 | Max | Total |" + (" vs baseline |" if with_base else ""),
            "|---|---:|---:|---:|---:|" + ("---:|" if with_base else ""),
        ]
        for r in shown:
            lines.append(
                f"| {escape(r.label)} | {r.mean} | {r.p95} | {r.max} | {r.total} |"
                + (f" {r.change} |" if with_base else "")
            )
        lines.append("")
        notes = [f"- {escape(r.label)}: {escape('; '.join(r.notes))}" for r in shown if r.notes]
        lines += [*notes, ""] if notes else []
    facts = []
    if text := costspeed.waits(block):
        facts.append(f"Waits: {text}")
    if text := costspeed.run_cost(block):
        facts.append(f"run cost {escape(text)}")
    if facts:
        lines += [" · ".join(facts), ""]
    if text := costspeed.budget(block):
        lines += [f"**Budget:** {escape(text)}", ""]
    return lines


def _changes(base: BaselineBlock) -> list[tuple[str, str, Sequence[object]]]:
    """(key, title, samples) of each of the baseline block's per-sample change lists."""
    return [
        ("regressions", "Regressions (passed before, fail now)", base.get("regressions") or []),
        ("improvements", "Improvements (failed before, pass now)", base.get("improvements") or []),
        ("new", "New samples", base.get("new") or []),
        ("removed", "Removed samples", base.get("removed") or []),
    ]


def _baseline_item(item: Any, labels: dict[str, MetricEntry]) -> str:
    if not isinstance(item, dict):
        return f"sample {item}"
    label = f"sample {item.get('sample_id')}"
    if item.get("model"):
        label += f" · {item['model']}"
    metric = item.get("metric")
    return label + (
        f": {display_name((labels.get(metric) or {}).get('label'), metric)}" if metric else ""
    )


def baseline_section(
    summary: Summary, *, max_items: int, heading: str, with_table: bool = True
) -> list[str]:
    """Baseline vs current per metric and the per-sample change lists; nothing without a baseline.

    ``with_table=False`` leaves out the per-metric table (the PR comment has Δ in its metric table).
    """
    base = summary.get("baseline")
    if not base:
        return []
    lines = [heading, ""]
    if base.get("folder"):
        when = f" ({escape_md(base['finished_at'])})" if base.get("finished_at") else ""
        lines += [f"Baseline: {escape_md(base['folder'], 200)}{when}", ""]
    if base.get("missing"):
        return [*lines, f"No comparison: {escape_md(base['missing'], 300)}", ""]
    metrics = baseline_metrics(summary) if with_table else {}
    labels = summary.get("metrics") or {}
    if metrics:
        lines += [
            "| Metric | Baseline | Current | Δ mean | Δ pass rate |",
            "|---|---:|---:|---:|---:|",
        ]
        for name, e in metrics.items():
            lines.append(
                f"| {escape_md(display_name((labels.get(name) or {}).get('label'), name))} | {fmt_score(e.get('baseline_mean'))} | {fmt_score(e.get('mean'))} | "
                f"{fmt_delta(e.get('delta_mean'))} | {fmt_delta(e.get('delta_pass_rate'), pct=True)} |"
            )
        lines.append("")
    changes = _changes(base)
    lines += [" · ".join(f"{k}: {len(items):,}" for k, _, items in changes), ""]
    for _, title, items in changes:
        if not items or max_items <= 0:
            continue
        entries = [f"- {escape_md(_baseline_item(i, labels), 160)}" for i in items[:max_items]]
        if len(items) > max_items:
            entries.append(f"- … and {len(items) - max_items:,} more")
        lines += [f"**{title}**", "", *entries, ""]
    return lines
