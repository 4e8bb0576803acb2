"""summary.md and the GitHub step summary, plus the one set of report sections
shared with the PR comment (the verdict, the gates, the errors; the metric, usage and baseline
figures are in ``reports.figures``). Escaping lives in ``reports.text``, the results digest in
``reports.digest``.

Everything that comes from a model, a dataset, a grader or the suite file is untrusted: it goes
through ``escape_md`` (one line: table cells, headings) or ``fenced`` (multi-line code blocks),
so it cannot inject HTML, ping people (``@user``, ``#123``) or break the layout.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ci_evals.gating.verdict import display_name, gate_title, stability_note, unstable
from ci_evals.reports import costspeed
from ci_evals.reports.digest import (
    Digest,
    digest,
    row_failures,
    sample_label,
)
from ci_evals.reports.figures import (
    baseline_section,
    cost_speed_section,
    metric_table,
    usage_line,
    usage_table,
)
from ci_evals.reports.text import (
    escape_md,
    fenced,
    fmt_int,
    fmt_interval,
    fmt_score,
    noise_lines,
)
from ci_evals.reports.verdicts import NO_VERDICT, WORDS, verdict_of
from ci_evals.results.records import GateResult, ResultRecord, Summary

# ---------------------------------------------------------------- sections shared with the comment


def verdict(summary: Summary) -> tuple[str, str]:
    """(icon, word) of the run's verdict: passed, failed, errored, interrupted or partial; ``no
    verdict`` for a summary that records none (read, never decided here)."""
    v = verdict_of(summary)
    return (WORDS[v].icon, v) if v is not None else (NO_VERDICT.icon, NO_VERDICT.word.lower())


def verdict_line(summary: Summary) -> str:
    """``**Verdict: errored**: quality: 3 of 50 samples errored (max_errors 0)``."""
    v = verdict_of(summary)
    if v is None:
        return f"**No verdict**: {NO_VERDICT.sentence}"
    reason = summary.get("verdict_reason")
    return f"**Verdict: {v}**" + (f": {escape_md(reason, 500)}" if reason else "")


def gate_status(gate: GateResult) -> str:
    """An icon and the status word of one gate."""
    status = gate.get("status") or ("passed" if gate.get("passed") else "failed")
    if status == "no_baseline":
        return f"➖ no baseline ({'passes' if gate.get('passed') else 'fails'})"
    icon = {
        "passed": "✅",
        "failed": "❌",
        "errored": "❌",
        "inconclusive": "⚠️",
        "undecided": "⚠️",
    }.get(status, "❔")
    note = stability_note(gate)
    flag = "⚠️ unstable: " if unstable(gate) and status != "undecided" else ""
    return f"{flag}{icon} {status}" + (f" ({note})" if note else "")


def gate_description(gate: GateResult) -> str:
    """The gate as the user wrote it, its metric named as the metric table names it:
    ``Quality (quality_v2) avg_score gte 0.75``."""
    return gate_title(gate)


def gate_compared(gate: GateResult, fmt: Callable[[float], str] = fmt_score) -> str:
    """What a gate compared, in words: ``actual 0.750``, ``3 regressions, max 1``,
    ``drop 0.200 from 0.800, max 0.1``, ``no baseline`` (parts joined by ``; ``)."""

    def show(value: float | None) -> str:
        return "none" if value is None else fmt(value)

    def limit(value: float | None) -> str:
        return "" if value is None else f", max {value:g}"

    actual = f"actual {show(gate.get('actual'))}"
    parts = [actual] if gate.get("op") is not None else []
    drop = gate.get("drop")
    if drop is not None:
        went_up = isinstance(drop, int | float) and not isinstance(drop, bool) and drop < 0
        change = f"rise {fmt(-drop)}" if went_up else f"drop {show(drop)}"
        parts.append(
            f"{change} from {show(gate.get('baseline_value'))}{limit(gate.get('max_drop'))}"
        )
    count = gate.get("regressions")
    if count is not None:
        parts.append(
            f"{fmt_int(count)} regression{'' if count == 1 else 's'}"
            f"{limit(gate.get('max_regressions'))}"
        )
    if (max_increase := gate.get("max_increase")) is not None:
        increase = gate.get("increase")
        change = "+∞" if increase is None else f"{increase:+.1%}"
        parts.append(
            f"increase {change} from {show(gate.get('baseline_value'))}, "
            f"max {max_increase * 100:g}%"
        )
    if gate.get("status") == "no_baseline":
        parts.append("no baseline")
    return "; ".join(parts) or actual


def gate_actual(gate: GateResult) -> str:
    """The measured value, or for a regression gate the drop and regression count it compared;
    a built-in metric's in its unit (``4.1 s``, ``$0.0123``)."""
    unit = costspeed.unit_of(gate)
    fmt = fmt_score if unit is None else costspeed.formatter(unit)
    return gate_compared(gate, fmt).removeprefix("actual ")


def gate_table(summary: Summary) -> list[str]:
    """The gates as a markdown table (no lines when there are none)."""
    gates = summary.get("gates") or []
    if not gates:
        return []
    with_model = any(g.get("model") for g in gates)
    head = (
        "| Gate |"
        + (" Model |" if with_model else "")
        + " Actual | 95% interval | Graded | Errors | Status | Why |"
    )
    lines = [head, "|---|" + ("---|" if with_model else "") + "---:|---:|---:|---:|---|---|"]

    def rows(g: GateResult, indent: str) -> None:
        model = f" {escape_md(g.get('model') or '')} |" if with_model else ""
        weight = f" × {w:.3g}" if (w := g.get("weight")) is not None else ""
        lines.append(
            f"| {indent}{escape_md(gate_description(g))}{weight} |{model} {gate_actual(g)} | "
            f"{fmt_interval(g.get('interval'))} | {fmt_int(g.get('graded'))}/{fmt_int(g.get('n'))} | "
            f"{fmt_int(g.get('errors'))} | {gate_status(g)} | {escape_md(g.get('reason') or '', 300)} |"
        )
        for c in (
            g.get("children") or []
        ):  # sub-gates of a letta-evals weighted_average / logical gate
            rows(c, indent + "↳ ")

    for g in gates:
        rows(g, "")
    return lines


ERROR_GROUPS_SHOWN = 10


def error_table(summary: Summary, limit: int = ERROR_GROUPS_SHOWN) -> list[str]:
    """The distinct error messages, grouped and counted, most frequent first (no lines without errors)."""
    groups = (summary.get("errors") or {}).get("groups") or []
    if not groups:
        return []
    labels = {k: m.get("label") for k, m in (summary.get("metrics") or {}).items()}
    lines = ["| Error | Grader | Count | Message |", "|---|---|---:|---|"]
    for grp in groups[:limit]:
        name = grp.get("grader")
        grader = escape_md(display_name(labels.get(name), name)) if name else "–"
        lines.append(
            f"| {escape_md(grp.get('category'))} | {grader} | {fmt_int(grp.get('count'))} | "
            f"{escape_md(grp.get('message'), 300)} |"
        )
    if len(groups) > limit:
        lines.append(
            f"| … | | | and {len(groups) - limit:,} more distinct messages in summary.json |"
        )
    return lines


def errors_line(summary: Summary) -> str:
    """``3 errored samples (no score, counted as failed): target 2, extraction 1``, or nothing."""
    errs = summary.get("errors") or {}
    total = int(errs.get("samples", errs.get("total")) or 0)
    if not total:
        return ""
    cats = ", ".join(f"{k} {v}" for k, v in (errs.get("by_category") or {}).items() if v)
    return (
        f"{total:,} errored sample{'s' if total != 1 else ''} (no score, counted as failed): {cats}"
    )


def flaky_line(summary: Summary, limit: int = 20) -> str:
    """The samples whose verdict differed across repeats, or nothing."""
    flaky = summary.get("flaky") or []
    if not flaky:
        return ""
    ids = ", ".join(
        escape_md(f"{f.get('sample_id')} ({f.get('metric')})" if isinstance(f, dict) else f, 60)
        for f in flaky[:limit]
    )
    more = f" and {len(flaky) - limit:,} more" if len(flaky) > limit else ""
    return f"{len(flaky):,} flaky (verdict differs across repeats): {ids}{more}"


def report_line() -> str:
    """Where the HTML report is: the results artifact, named when the workflow sets ``CI_EVALS_ARTIFACT``."""
    import os

    name = os.environ.get("CI_EVALS_ARTIFACT", "").strip()
    return "Full report: report.html in the results artifact" + (
        f" **{escape_md(name, 100)}**" if name else ""
    )


# ---------------------------------------------------------------- summary.md


def worst_heading(shown: list[ResultRecord], d: Digest) -> str:
    """``(2 of 5 failing samples, 3 failing grades)``: what the section shows, counted."""
    grades = sum(len(row_failures(r)) for r in shown)
    return (
        f"({len(shown)} of {d.failing_rows:,} failing sample{'s' if d.failing_rows != 1 else ''}, "
        f"{grades} failing grade{'s' if grades != 1 else ''})"
    )


def _worst_table(
    rows: list[ResultRecord], num_runs: int, labels: dict[str, str | None]
) -> list[str]:
    lines = ["| Sample | Metric | Score | Why |", "|---|---|---:|---|"]
    for row in rows:
        for name, g in row_failures(row):
            why = g.get("rationale") or ""
            lines.append(
                f"| {escape_md(sample_label(row, num_runs), 80)} | {escape_md(display_name(labels.get(name), name))} | "
                f"{fmt_score(g.get('score'))} | {escape_md(why, 300)} |"
            )
    return lines


def render_summary_md(
    summary: Summary, results: Iterable[ResultRecord] | Digest, *, worst: int = 10
) -> str:
    """summary.md and the step summary: verdict, gates, metrics, errors, usage, baseline, failures.

    ``results``: the result lines, or their :class:`~ci_evals.reports.digest.Digest` already gathered."""
    icon, words = verdict(summary)
    lines = [
        f"## {icon} ci-evals · {escape_md(summary.get('suite') or 'suite')}: {words}",
        "",
        verdict_line(summary),
        "",
    ]
    if summary.get("description"):
        lines += [escape_md(summary["description"], 500), ""]
    target = escape_md((summary.get("target") or {}).get("kind") or "?")
    lines += [
        f"{fmt_int(summary.get('n_samples'))} samples × {fmt_int(summary.get('num_runs') or 1)} run(s) · "
        f"target {target} · {float(summary.get('duration_s') or 0):.1f} s",
        "",
    ]
    if summary.get("gates"):
        lines += ["### Gates", "", *gate_table(summary), ""]
    if summary.get("metrics"):
        lines += ["### Metrics", "", *metric_table(summary["metrics"], summary, compact=False), ""]
    for model, per in (summary.get("models") or {}).items():
        lines += [
            f"#### Model {escape_md(model)}",
            "",
            *metric_table(per.get("metrics") or {}, summary, compact=False),
            "",
        ]
    lines += cost_speed_section(summary, "### Cost and speed")
    if errors_line(summary):
        lines += [f"**Errors:** {errors_line(summary)}", "", *error_table(summary), ""]
    if flaky_line(summary):
        lines += [f"**Flaky:** {flaky_line(summary)}", ""]
    noise = noise_lines(summary)
    if noise:
        lines += ["**Judge noise:**", "", *[f"- {escape_md(line, 300)}" for line in noise], ""]
    lines += ["### Usage", "", usage_line(summary), "", *usage_table(summary)]
    if lines[-1]:
        lines.append("")
    lines += baseline_section(summary, max_items=50, heading="### Compared with the baseline")
    d = results if isinstance(results, Digest) else digest(results, worst)
    if d.worst:
        labels = {k: m.get("label") for k, m in (summary.get("metrics") or {}).items()}
        lines += [f"### Worst failing samples {worst_heading(d.worst, d)}", ""]
        lines += [*_worst_table(d.worst, int(summary.get("num_runs") or 1), labels), ""]
    lines += [report_line(), ""]
    versions = summary.get("versions") or {}
    if versions:
        lines.append(
            "<sub>"
            + " · ".join(f"{escape_md(k)} {escape_md(v)}" for k, v in versions.items())
            + "</sub>"
        )
    return "\n".join(lines).rstrip() + "\n"


def render_error_md(title: str, message: str) -> str:
    """The step summary of a run that produced no summary.json (configuration or internal error)."""
    return f"## ❌ ci-evals · {escape_md(title)}\n\n{fenced(message, 4000)}\n"
