"""The pull-request comment: one per suite, found again by a hidden marker and updated in place.

The body is built at decreasing levels of detail until it fits GitHub's 65,536-character limit:
shorter fields first, then fewer failing samples and baseline entries, then no charts, then no
samples at all. Model output only ever appears escaped or inside a fence it cannot close.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import NamedTuple

from ci_evals.gating.verdict import display_name
from ci_evals.reports import letta_agents
from ci_evals.reports.digest import BUCKETS, Digest, digest, input_text, row_failures, sample_label
from ci_evals.reports.figures import (
    baseline_section,
    cost_speed_section,
    metric_table,
    usage_line,
)
from ci_evals.reports.markdown import (
    error_table,
    errors_line,
    flaky_line,
    gate_table,
    report_line,
    verdict,
    verdict_line,
    worst_heading,
)
from ci_evals.reports.text import escape_html, escape_md, fenced, fmt_score, noise_lines
from ci_evals.results.line import submissions_of
from ci_evals.results.records import ResultRecord, Summary

BODY_LIMIT = 65_000
"""Where we stop: a margin below GitHub's 65,536-character limit for a comment."""
_SAFE_URL = re.compile(r"^https?://[^\s()<>\[\]\"']+$")


class Level(NamedTuple):
    """How much detail one attempt at the comment carries."""

    samples: int
    field_chars: int
    charts: bool
    baseline_items: int


LEVELS = (
    Level(10, 1500, True, 20),
    Level(10, 600, True, 10),
    Level(5, 300, True, 10),
    Level(3, 200, False, 5),
    Level(0, 0, False, 0),
)


def marker(marker_key: str) -> str:
    """The hidden HTML comment that identifies this suite's comment: ``<!-- ci-evals:suite:job:HASH -->``.

    The readable part is ASCII, at most 40 characters, and cannot close the comment; the 16 hex
    digits of sha256 of the whole key tell apart keys that read the same (non-ASCII names).
    """
    import hashlib

    digest = hashlib.sha256(marker_key.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    safe = re.sub(r"[^A-Za-z0-9_.:/+-]", "_", marker_key)[:40]
    while "--" in safe:
        safe = safe.replace("--", "-_")
    return f"<!-- ci-evals:{safe.rstrip('-')}:{digest} -->"


def score_chart(title: str, counts: list[int]) -> str:
    """A mermaid ``xychart-beta`` bar chart of one metric's scores in ten buckets of 0.1."""
    labels = ", ".join(f'"{i / BUCKETS:.1f}"' for i in range(BUCKETS))
    safe_title = re.sub(r"[^A-Za-z0-9 _.:/+-]", "_", title)[:60]
    return "\n".join(
        [
            "```mermaid",
            "xychart-beta",
            f'    title "{safe_title}: samples per score bucket"',
            f"    x-axis [{labels}]",
            f'    y-axis "samples" 0 --> {max(max(counts), 1)}',
            f"    bar [{', '.join(str(c) for c in counts)}]",
            "```",
        ]
    )


def charts(summary: Summary, d: Digest) -> list[str]:
    """A chart per metric with graded (not just 0/1) scores from at least five samples."""
    out = []
    for name, counts in d.histograms.items():
        if sum(counts) < 5 or len(d.distinct.get(name, ())) < 3:
            continue
        label = ((summary.get("metrics") or {}).get(name) or {}).get("label") or name
        out.append(score_chart(label, counts))
    if not out:
        return []
    return [
        "<details><summary>Score distribution</summary>",
        "",
        *"\n\n".join(out).split("\n"),
        "",
        "</details>",
        "",
    ]


def failing_sample(
    row: ResultRecord, limit: int, num_runs: int, labels: dict[str, str | None] | None = None
) -> list[str]:
    """One failing sample, collapsed: input, expected, then per failing metric submission and why."""
    fails = row_failures(row)
    labels = labels or {}
    head = ", ".join(
        f"{display_name(labels.get(n), n)} {fmt_score(g.get('score'))}" for n, g in fails
    )
    lines = [
        f"<details><summary>{escape_html(sample_label(row, num_runs), 100)}: {escape_html(head, 200)}</summary>",
        "",
        "**Input**",
        "",
        fenced(input_text(row.get("input")), limit),
        "",
    ]
    if row.get("ground_truth") is not None:
        lines += ["**Expected**", "", fenced(str(row["ground_truth"]), limit // 2), ""]
    err = row.get("error")
    if err:
        category = escape_md(err.get("category") or "sample")
        lines += [f"**Error ({category})**", "", fenced(str(err.get("message")), limit), ""]
    submissions = submissions_of(row)
    texts = {str(submissions[n]) for n, _ in fails if n in submissions}
    if len(texts) == 1:  # every failing grader saw the same submission: show it once
        lines += ["**Submission**", "", fenced(texts.pop(), limit), ""]
        submissions = {}
    for name, g in fails:
        shown = escape_md(display_name(labels.get(name), name))
        if name in submissions:
            lines += [
                f"**Submission ({shown})**",
                "",
                fenced(str(submissions[name]), limit),
                "",
            ]
        why = g.get("rationale")
        if why:
            lines += [f"**Rationale ({shown})**", "", fenced(str(why), limit), ""]
    return [*lines, "</details>", ""]


def _footer(summary: Summary, run_url: str | None) -> str:
    parts = []
    if run_url and _SAFE_URL.match(run_url):
        parts.append(f"[View the run]({run_url})")
    if (summary.get("versions") or {}).get("ci_evals"):
        parts.append(f"ci-evals {escape_md(summary['versions']['ci_evals'])}")
    if summary.get("finished_at"):
        parts.append(f"updated {escape_md(summary['finished_at'])}")
    return "<sub>" + " · ".join(parts) + "</sub>" if parts else ""


def _body(summary: Summary, d: Digest, level: Level, run_url: str | None, key: str) -> str:
    icon, words = verdict(summary)
    lines = [
        marker(key),
        f"### {icon} ci-evals · {escape_md(summary.get('suite') or 'suite')}: {words}",
        "",
        verdict_line(summary),
        "",
    ]
    if summary.get("gates"):
        lines += [*gate_table(summary), ""]
    if summary.get("metrics"):
        lines += [*metric_table(summary["metrics"], summary, compact=True), ""]
    for model, per in (summary.get("models") or {}).items():
        lines += [
            f"**Model {escape_md(model)}**",
            "",
            *metric_table(per.get("metrics") or {}, summary, compact=True, deltas=False),
            "",
        ]
    lines += cost_speed_section(summary, "**Cost and speed**", limit=300)
    if errors_line(summary):
        lines += [f"⚠️ {errors_line(summary)}", "", *error_table(summary, limit=5), ""]
    if flaky_line(summary, limit=10):
        lines += [f"⚠️ {flaky_line(summary, limit=10)}", ""]
    noise = noise_lines(summary)
    lines += [f"Judge noise: {escape_md(line, 300)}" for line in noise[:5]] + (
        [""] if noise else []
    )
    if level.charts:
        lines += charts(summary, d)
    if level.baseline_items:
        lines += baseline_section(
            summary,
            max_items=level.baseline_items,
            heading="#### Compared with the baseline",
            with_table=False,
        )
    elif summary.get("baseline"):
        lines += ["The comparison with the baseline is in the step summary.", ""]
    shown = d.worst[: level.samples]
    if shown:
        labels = {k: m.get("label") for k, m in (summary.get("metrics") or {}).items()}
        lines += [f"#### Worst failing samples {worst_heading(shown, d)}", ""]
        for row in shown:
            lines += failing_sample(
                row, level.field_chars, int(summary.get("num_runs") or 1), labels
            )
    elif d.failing_rows:
        lines += [
            f"{d.failing_rows:,} failing samples: see the step summary and results.jsonl.",
            "",
        ]
    lines += letta_agents.comment_lines(summary)
    lines += [usage_line(summary), "", report_line(), "", _footer(summary, run_url)]
    return "\n".join(lines).rstrip() + "\n"


def render_comment(
    summary: Summary,
    results: Iterable[ResultRecord],
    *,
    run_url: str | None,
    marker_key: str,
    max_chars: int = BODY_LIMIT,
) -> str:
    """The PR comment body for one suite, with as much detail as fits in ``max_chars``."""
    d = digest(results, max(level.samples for level in LEVELS))
    body = ""
    for level in LEVELS:
        body = _body(summary, d, level, run_url, marker_key)
        if len(body) <= max_chars:
            return body
    # Only tables are left (hundreds of metrics): cut at a line boundary, never inside a block.
    note = "\n… (truncated: the full report is in the step summary)\n"
    cut = body[: max_chars - len(note)]
    return cut[: cut.rfind("\n")] + note
