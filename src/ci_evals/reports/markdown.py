"""summary.md and the GitHub step summary, plus the one set of escaping helpers every report uses.

Everything that comes from a model, a dataset, a grader or the suite file is untrusted: it goes
through ``escape_md`` (one line: table cells, headings) or ``fenced`` (multi-line code blocks),
so it cannot inject HTML, ping people (``@user``, ``#123``) or break the layout.
"""

from __future__ import annotations

import heapq
import html
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ci_evals.verdict import display_name

ZWJ = "\u200d"
BUCKETS = 10
_MENTION = re.compile(r"([@#])(?=[A-Za-z0-9_])(?!\d+\.\d)")
_GH_REF = re.compile(r"\b(GH)-(?=\d)", re.IGNORECASE)
_MD_SPECIAL = re.compile(r"([\\`*\[\]|~])")
_EDGE_UNDERSCORE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")
_LINE_START = re.compile(r"^([#>+=-])")


# ---------------------------------------------------------------- escaping and truncation


def truncate(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, ending with how many were dropped."""
    if limit <= 0:
        return ""
    if len(text) <= limit:
        return text
    keep = limit
    for _ in range(3):  # the note's length depends on the count it states: settle it
        keep = limit - len(f"… ({len(text) - keep:,} more characters)")
        if keep <= 0:
            return text[:limit]
    result = text[:keep] + f"… ({len(text) - keep:,} more characters)"
    return result if len(result) <= limit else text[:limit]


def neutralize_mentions(text: str) -> str:
    """Break ``@user``, ``@org/team``, ``#123`` and ``GH-123`` with a zero-width joiner: no pings, no backlinks."""
    return _GH_REF.sub(rf"\1-{ZWJ}", _MENTION.sub(rf"\1{ZWJ}", text))


def escape_md(value: Any, limit: int | None = None) -> str:
    """Untrusted text made safe for one line of markdown (a table cell, a heading, a list item).

    Newlines become spaces; ``limit`` truncates before escaping, so no escape is cut in half.
    ``& < >`` become entities (no raw HTML), the punctuation that starts links, images, code spans,
    emphasis or table cells is backslash-escaped, and mentions are neutralised.
    """
    text = " ".join(("" if value is None else str(value)).split())
    if limit is not None:
        text = truncate(text, limit)
    text = html.escape(text, quote=False)
    text = _MD_SPECIAL.sub(r"\\\1", text)
    text = _EDGE_UNDERSCORE.sub(r"\\_", text)
    return neutralize_mentions(_LINE_START.sub(r"\\\1", text))


def escape_html(value: Any, limit: int | None = None) -> str:
    """Untrusted text inside an HTML element such as ``<summary>``: entities only, one line."""
    text = " ".join(("" if value is None else str(value)).split())
    if limit is not None:
        text = truncate(text, limit)
    return neutralize_mentions(html.escape(text, quote=True))


def fenced(text: str, limit: int | None = None, lang: str = "text") -> str:
    """Multi-line untrusted text as a fenced code block that the text cannot close.

    The fence is one backtick longer than the longest backtick run inside, so nothing in the text
    can open or close it; inside a code block GitHub renders no HTML and pings no one.
    """
    if limit is not None:
        text = truncate(text, limit)
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    body = text if text.endswith("\n") else text + "\n"
    return f"{fence}{lang}\n{body}{fence}"


def code(text: Any) -> str:
    """Short text of our own (a pass rule) as an inline code span."""
    return "`" + str(text).replace("`", "'").replace("|", "\\|") + "`"


# ---------------------------------------------------------------- number formatting


def fmt_score(value: Any) -> str:
    """A score or metric value with three decimals; ``–`` when missing."""
    return "–" if value is None else f"{float(value):.3f}"


def fmt_pct(value: Any) -> str:
    """A fraction as a percentage with one decimal; ``–`` when missing."""
    return "–" if value is None else f"{100 * float(value):.1f}%"


def fmt_interval(interval: Any, pct: bool = False) -> str:
    """``[lo, hi]`` as ``0.700–0.900`` (or percentages); empty when there is none."""
    if not interval or len(interval) != 2 or None in interval:
        return ""
    f = fmt_pct if pct else fmt_score
    return f"{f(interval[0])}–{f(interval[1])}"


def fmt_delta(value: Any, pct: bool = False) -> str:
    """A signed change with an arrow: ``▲ +0.050``, ``▼ −0.100``, ``= 0.000`` (``pp`` for rates)."""
    if value is None:
        return "–"
    v = float(value)
    text = f"{abs(100 * v):.1f} pp" if pct else f"{abs(v):.3f}"
    if abs(v) < 5e-4:
        return f"= {text}"
    return f"▲ +{text}" if v > 0 else f"▼ −{text}"


def fmt_int(value: Any) -> str:
    """An integer with thousands separators."""
    return f"{int(value or 0):,}"


def fmt_cost(value: Any) -> str:
    """US dollars with four decimals, or ``n/a`` when the suite gave no prices."""
    return "n/a" if value is None else f"${float(value):.4f}"


def with_interval(value: Any, interval: Any, pct: bool = False) -> str:
    """A value followed by its 95 % interval when one was computed: ``0.812 (0.700–0.900)``."""
    main = fmt_pct(value) if pct else fmt_score(value)
    span = fmt_interval(interval, pct)
    return f"{main} ({span})" if span else main


# ---------------------------------------------------------------- one pass over results.jsonl


@dataclass
class Digest:
    """What the reports need from results.jsonl, gathered in one streaming pass."""

    worst: list[dict[str, Any]] = field(default_factory=list)
    failing_rows: int = 0
    histograms: dict[str, list[int]] = field(default_factory=dict)
    distinct: dict[str, set[float]] = field(default_factory=dict)


def row_failures(row: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The (metric, grade) pairs of one result line that were graded and did not pass.

    Errored grades are not failures on a score: they are reported once, grouped by message
    (``errors.groups``), not once per sample and grader."""
    return [(name, g) for name, g in (row.get("grades") or {}).items()
            if not g.get("passed") and not g.get("error")]


def _worst_key(row: dict[str, Any]) -> tuple:
    scores = [float(g.get("score") or 0.0) for _, g in row_failures(row)] or [0.0]
    return (
        min(scores),
        str(row.get("sample_id")),
        row.get("run") or 0,
        str(row.get("model") or ""),
    )


def digest(results: Iterable[dict[str, Any]], worst: int = 10) -> Digest:
    """Stream ``results`` once: the ``worst`` failing lines (lowest score first) and score histograms.

    Memory stays bounded by ``worst`` however long results.jsonl is.
    """
    d = Digest()

    def failing() -> Iterable[dict[str, Any]]:
        for row in results:
            for name, g in (row.get("grades") or {}).items():
                if g.get("error") is None and g.get("score") is not None:
                    score = float(g["score"])
                    bucket = min(max(int(score * BUCKETS), 0), BUCKETS - 1)
                    d.histograms.setdefault(name, [0] * BUCKETS)[bucket] += 1
                    seen = d.distinct.setdefault(name, set())
                    if len(seen) < 3:
                        seen.add(score)
            if not row.get("error") and row_failures(row):
                d.failing_rows += 1
                yield row

    d.worst = heapq.nsmallest(worst, failing(), key=_worst_key)
    return d


def sample_label(row: dict[str, Any], num_runs: int = 1) -> str:
    """``sample 3``, plus the run and the model when they tell result lines apart."""
    label = f"sample {row.get('sample_id')}"
    if num_runs > 1 or (row.get("run") or 0) > 0:
        label += f" run {row.get('run')}"
    if row.get("model"):
        label += f" · {row['model']}"
    return label


def input_text(value: Any) -> str:
    """A sample input as text; multi-turn inputs one turn per paragraph."""
    if isinstance(value, list):
        return "\n\n".join(f"[turn {i + 1}] {v}" for i, v in enumerate(value))
    return "" if value is None else str(value)


# ---------------------------------------------------------------- sections shared with the comment


VERDICT_ICONS = {"passed": "✅", "failed": "❌", "errored": "❌", "interrupted": "⚠️", "partial": "⚠️"}


def verdict(summary: dict[str, Any]) -> tuple[str, str]:
    """(icon, word) of the run's verdict: passed, failed, errored, interrupted or partial."""
    from ci_evals.verdict import decide

    word = summary.get("verdict") or decide(summary)[0]
    return VERDICT_ICONS[word], word


def verdict_line(summary: dict[str, Any]) -> str:
    """``**Verdict: errored**: quality: 3 of 50 samples errored (max_errors 0)``."""
    from ci_evals.verdict import decide

    reason = summary.get("verdict_reason") if summary.get("verdict") else decide(summary)[1]
    return f"**Verdict: {verdict(summary)[1]}**" + (f": {escape_md(reason, 500)}" if reason else "")


def gate_status(gate: dict[str, Any]) -> str:
    """An icon and the status word of one gate."""
    status = gate.get("status") or ("passed" if gate.get("passed") else "failed")
    if status == "no_baseline":
        return f"➖ no baseline ({'passes' if gate.get('passed') else 'fails'})"
    icon = {"passed": "✅", "failed": "❌", "errored": "❌", "inconclusive": "⚠️"}.get(status, "❔")
    return f"{icon} {status}"


def gate_description(gate: dict[str, Any]) -> str:
    """The gate as the user wrote it, its metric named as the metric table names it:
    ``Quality (quality_v2) avg_score gte 0.75``."""
    from ci_evals.verdict import gate_title

    return gate_title(gate)


def gate_actual(gate: dict[str, Any]) -> str:
    """The measured value, with the drop and regression count of a regression gate."""
    text = fmt_score(gate.get("actual"))
    extra = []
    if gate.get("drop") is not None:
        extra.append(f"drop {fmt_score(gate['drop'])} from {fmt_score(gate.get('baseline_value'))}")
    if gate.get("regressions") is not None:
        extra.append(f"{fmt_int(gate['regressions'])} regressions")
    return f"{text} ({', '.join(extra)})" if extra else text


def gate_table(summary: dict[str, Any]) -> list[str]:
    """The gates as a markdown table (no lines when there are none)."""
    gates = summary.get("gates") or []
    if not gates:
        return []
    with_model = any(g.get("model") for g in gates)
    head = "| Gate |" + (" Model |" if with_model else "") + " Actual | 95% interval | Graded | Errors | Status | Why |"
    lines = [head, "|---|" + ("---|" if with_model else "") + "---:|---:|---:|---:|---|---|"]

    def rows(g: dict[str, Any], indent: str) -> None:
        model = f" {escape_md(g.get('model') or '')} |" if with_model else ""
        weight = f" × {g['weight']:.3g}" if g.get("weight") is not None else ""
        lines.append(
            f"| {indent}{escape_md(gate_description(g))}{weight} |{model} {gate_actual(g)} | "
            f"{fmt_interval(g.get('interval'))} | {fmt_int(g.get('graded'))}/{fmt_int(g.get('n'))} | "
            f"{fmt_int(g.get('errors'))} | {gate_status(g)} | {escape_md(g.get('reason') or '', 300)} |"
        )
        for c in g.get("children") or []:  # sub-gates of a letta-evals weighted_average / logical gate
            rows(c, indent + "↳ ")

    for g in gates:
        rows(g, "")
    return lines


def baseline_metrics(summary: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per-metric baseline figures, ``summary["baseline"]["metrics"]`` (empty without a baseline)."""
    return (summary.get("baseline") or {}).get("metrics") or {}


def metric_table(
    metrics: dict[str, Any], summary: dict[str, Any], *, compact: bool, deltas: bool = True
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
        graded, errors = f"{fmt_int(m.get('graded'))}/{fmt_int(m.get('n'))}", fmt_int(m.get("errors"))
        rule = code(m.get("rule") or m.get("pass_rule") or "")
        if compact:
            row = (f"| {label} | {with_interval(m.get('mean'), m.get('ci_mean'))} | "
                   f"{fmt_pct(m.get('pass_rate'))} ({passed}) | {graded} | {errors} | {rule} |")
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


INTERVALS_NOTE = ("<sub>Means are over graded samples; pass rates over all samples, errored ones "
                  "counting as failed. 95% intervals: the mean's by bootstrap (normal approximation "
                  "above 200 samples), the pass rate's by Wilson score.</sub>")
ERROR_GROUPS_SHOWN = 10


def error_table(summary: dict[str, Any], limit: int = ERROR_GROUPS_SHOWN) -> list[str]:
    """The distinct error messages, grouped and counted, most frequent first (no lines without errors)."""
    groups = (summary.get("errors") or {}).get("groups") or []
    if not groups:
        return []
    labels = {k: m.get("label") for k, m in (summary.get("metrics") or {}).items()}
    lines = ["| Error | Grader | Count | Message |", "|---|---|---:|---|"]
    for grp in groups[:limit]:
        grader = escape_md(display_name(labels.get(grp["grader"]), grp["grader"])) if grp.get("grader") else "–"
        lines.append(f"| {escape_md(grp.get('category'))} | {grader} | {fmt_int(grp.get('count'))} | "
                     f"{escape_md(grp.get('message'), 300)} |")
    if len(groups) > limit:
        lines.append(f"| … | | | and {len(groups) - limit:,} more distinct messages in summary.json |")
    return lines


def errors_line(summary: dict[str, Any]) -> str:
    """``3 errored samples (no score, counted as failed): target 2, extraction 1``, or nothing."""
    errs = summary.get("errors") or {}
    total = int(errs.get("samples", errs.get("total")) or 0)
    if not total:
        return ""
    cats = ", ".join(f"{k} {v}" for k, v in (errs.get("by_category") or {}).items() if v)
    return f"{total:,} errored sample{'s' if total != 1 else ''} (no score, counted as failed): {cats}"


def flaky_line(summary: dict[str, Any], limit: int = 20) -> str:
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


def _tokens(u: dict[str, Any] | None) -> int:
    u = u or {}
    return int(u.get("prompt_tokens") or 0) + int(u.get("completion_tokens") or 0)


def usage_line(summary: dict[str, Any]) -> str:
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


def usage_table(summary: dict[str, Any]) -> list[str]:
    """Tokens per target and grader (only when any were used)."""
    usage = summary.get("usage") or {}
    if not _tokens(usage.get("total")):
        return []
    lines = ["| | Prompt tokens | Completion tokens |", "|---|---:|---:|"]
    rows = [("target", usage.get("target"))]
    labels = summary.get("metrics") or {}
    rows += [(f"grader {escape_md(display_name((labels.get(n) or {}).get('label'), n))}", u)
             for n, u in (usage.get("graders") or {}).items()]
    rows.append(("**total**", usage.get("total")))
    for label, u in rows:
        u = u or {}
        lines.append(
            f"| {label} | {fmt_int(u.get('prompt_tokens'))} | {fmt_int(u.get('completion_tokens'))} |"
        )
    return lines


BASELINE_LISTS = (
    ("regressions", "Regressions (passed before, fail now)"),
    ("improvements", "Improvements (failed before, pass now)"),
    ("new", "New samples"),
    ("removed", "Removed samples"),
)


def _baseline_item(item: Any, labels: dict[str, Any]) -> str:
    if not isinstance(item, dict):
        return f"sample {item}"
    label = f"sample {item.get('sample_id')}"
    if item.get("model"):
        label += f" · {item['model']}"
    metric = item.get("metric")
    return label + (f": {display_name((labels.get(metric) or {}).get('label'), metric)}" if metric else "")


def baseline_section(
    summary: dict[str, Any], *, max_items: int, heading: str, with_table: bool = True
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
    lines += [" · ".join(f"{k}: {len(base.get(k) or []):,}" for k, _ in BASELINE_LISTS), ""]
    for key, title in BASELINE_LISTS:
        items = base.get(key) or []
        if not items or max_items <= 0:
            continue
        entries = [f"- {escape_md(_baseline_item(i, labels), 160)}" for i in items[:max_items]]
        if len(items) > max_items:
            entries.append(f"- … and {len(items) - max_items:,} more")
        lines += [f"**{title}**", "", *entries, ""]
    return lines


# ---------------------------------------------------------------- summary.md


def worst_heading(shown: list[dict[str, Any]], d: Digest) -> str:
    """``(2 of 5 failing samples, 3 failing grades)``: what the section shows, counted."""
    grades = sum(len(row_failures(r)) for r in shown)
    return (f"({len(shown)} of {d.failing_rows:,} failing sample{'s' if d.failing_rows != 1 else ''}, "
            f"{grades} failing grade{'s' if grades != 1 else ''})")


def _worst_table(rows: list[dict[str, Any]], num_runs: int, labels: dict[str, Any]) -> list[str]:
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
    summary: dict[str, Any], results: Iterable[dict[str, Any]], *, worst: int = 10
) -> str:
    """summary.md and the step summary: verdict, gates, metrics, errors, usage, baseline, failures."""
    icon, words = verdict(summary)
    lines = [f"## {icon} ci-evals · {escape_md(summary.get('suite') or 'suite')}: {words}", "",
             verdict_line(summary), ""]
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
    if errors_line(summary):
        lines += [f"**Errors:** {errors_line(summary)}", "", *error_table(summary), ""]
    if flaky_line(summary):
        lines += [f"**Flaky:** {flaky_line(summary)}", ""]
    lines += ["### Usage", "", usage_line(summary), "", *usage_table(summary)]
    if lines[-1]:
        lines.append("")
    lines += baseline_section(summary, max_items=50, heading="### Compared with the baseline")
    d = digest(results, worst)
    if d.worst:
        labels = {k: m.get("label") for k, m in (summary.get("metrics") or {}).items()}
        lines += [f"### Worst failing samples {worst_heading(d.worst, d)}", ""]
        lines += [*_worst_table(d.worst, int(summary.get("num_runs") or 1), labels), ""]
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
