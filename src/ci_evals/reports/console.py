"""The console report: a metric table (tabulate), the errors grouped by message, the failing and
errored samples (first ``FAILING_SHOWN``, then "and K more"), the gates and the verdict.

Numbers: means and their intervals are fractions (``0.583 [0.350, 0.800]``), pass rates and their
intervals percentages (``50.0% [10.0%, 70.0%]``), as in summary.md and the PR comment. Colour marks
only the words PASS / FAIL / ERRORED / the verdict, and only when rich says the stream takes colour
(a terminal, or ``FORCE_COLOR`` set; never with ``NO_COLOR`` set). Text from the run (rationales,
error messages) is flattened to one line with control characters replaced, so a model's answer
cannot move the cursor or recolour the terminal.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, TextIO

from ci_evals._util.text import CAUSE_CHARS, one_line
from ci_evals.gating.verdict import display_name, gate_title, stability_note, unstable
from ci_evals.reports import costspeed
from ci_evals.reports.failing import FAILING_SHOWN, FailingPass, FailingTally
from ci_evals.reports.text import noise_lines
from ci_evals.reports.verdicts import WORDS, words_of
from ci_evals.results.records import BaselineBlock, GateResult, MetricEntry, ResultRecord, Summary

GROUPS_SHOWN = 5
_ANSI = {
    "PASS": "1;32",
    "FAIL": "1;31",
    "INCONCLUSIVE": "1;33",
    **{w.word: w.ansi for w in WORDS.values()},
}
INTERVALS_NOTE = (
    "95% intervals: the mean's by bootstrap (normal approximation above 200 samples), "
    "the pass rate's by Wilson score"
)


def use_color(stream: TextIO) -> bool:
    """Whether ``stream`` takes colour: rich's rules (a terminal, ``FORCE_COLOR``, ``NO_COLOR``, ``TERM=dumb``).

    Not a terminal and no ``FORCE_COLOR`` (CI logs, pipes, tests): no colour, without importing
    rich, which would cost an interrupted run's exit a noticeable fraction of a second."""
    import os

    isatty = getattr(stream, "isatty", None)
    if not os.environ.get("FORCE_COLOR") and not (callable(isatty) and isatty()):
        return False
    from rich.console import Console

    c = Console(file=stream)
    return c.is_terminal and not c.no_color and c.color_system is not None


def paint(word: str, color: bool) -> str:
    """``word`` in its colour (PASS green, FAIL red, ERRORED magenta, ...) when ``color``; else as is."""
    code = _ANSI.get(word.split()[0]) if color and word else None
    return f"\x1b[{code}m{word}\x1b[0m" if code else word


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x * 100:.1f}%"


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def _interval(ci: Sequence[float | None] | None, pct: bool = False) -> str:
    if not ci:
        return "-"
    fmt = _pct if pct else _num
    return f"[{fmt(ci[0])}, {fmt(ci[1])}]"


def metric_rows(
    metrics: dict[str, MetricEntry], baseline: BaselineBlock | None = None
) -> list[list[Any]]:
    rows = []
    base = (baseline or {}).get("metrics", {})
    for name, m in metrics.items():
        row = [
            display_name(m.get("label"), name),
            _num(m.get("mean")),
            _interval(m.get("ci_mean")),
            _pct(m.get("pass_rate")),
            _interval(m.get("ci_pass_rate"), pct=True),
            f"{m.get('graded', 0)}/{m['n']}",
            m["errors"],
            m.get("rule") or m.get("pass_rule", ""),
        ]
        if baseline is not None:
            b = base.get(name)
            row.append("-" if not b or b.get("delta_mean") is None else f"{b['delta_mean']:+.3f}")
        rows.append(row)
    return rows


HEADERS = [
    "metric",
    "mean",
    "mean 95% CI",
    "pass rate",
    "pass rate 95% CI",
    "graded/n",
    "errors",
    "pass rule",
]


ENDPOINTS_SHOWN = 20


def endpoint_lines(summary: Summary) -> list[str]:
    """One line per LLM endpoint that throttled, paced or stopped the run (summary.json
    ``endpoints``), at most :data:`ENDPOINTS_SHOWN` of them, each one line of bounded length (a
    merged or downloaded summary.json is another machine's)."""
    out = []
    for ep in summary.get("endpoints") or []:
        if not isinstance(ep, dict):
            continue
        if ep.get("stopped"):
            out.append(f"stopped: {one_line(ep['stopped'], CAUSE_CHARS)}")
            continue
        rejected, calls, waited = (
            ep.get("rejected") or 0,
            ep.get("calls") or 0,
            ep.get("waited_s") or 0.0,
        )
        if not rejected and waited < 0.5:
            continue
        url = one_line(ep.get("endpoint"), 200)
        limit = (
            f"; limit {ep['rpm']:g} rpm ({'your setting' if ep.get('rpm_from') == 'settings' else 'announced by the server'})"
            if ep.get("rpm")
            else ""
        )
        head = (
            f"throttled: {url}: {rejected} of {calls} calls rejected (429/503/529)"
            if rejected
            else f"paced: {url}: {calls} calls"
        )
        out.append(
            f"{head}, calls held back {waited:.1f} s, settled at {ep.get('concurrency')} in flight "
            f"(lowest {ep.get('lowest_concurrency')}, cap {ep.get('max_concurrent')}){limit}"
        )
    if len(out) > ENDPOINTS_SHOWN:
        more = len(out) - ENDPOINTS_SHOWN
        out = [*out[:ENDPOINTS_SHOWN], f"… and {more} more (all in summary.json, key endpoints)"]
    return out


def sub_gate_lines(g: GateResult, depth: int = 1) -> list[str]:
    """The sub-gates of a weighted or logical gate, one indented line each, with their values."""
    out = []
    for c in g.get("children") or []:
        out.append(f"{'  ' * depth}- {gate_title(c)}: {c.get('reason')} ({c['status']})")
        out += sub_gate_lines(c, depth + 1)
    return out


def error_lines(summary: Summary, limit: int = GROUPS_SHOWN) -> list[str]:
    """The distinct error messages, most frequent first: ``target error ×6: cannot start 'pyhton3': ...``."""
    errs = summary.get("errors") or {}
    groups = errs.get("groups") or []
    if not errs.get("total"):
        return []
    labels = {k: m.get("label") for k, m in (summary.get("metrics") or {}).items()}
    samples = errs.get("samples", errs["total"])
    cats = ", ".join(f"{k} {v}" for k, v in errs.get("by_category", {}).items() if v)
    lines = [
        f"Errors: {samples} of {summary.get('records', samples)} result lines errored ({cats}); "
        "errored samples have no score and count as failed:"
    ]
    for grp in groups[:limit]:
        grader = grp.get("grader")
        who = f" ({display_name(labels.get(grader), grader)})" if grader else ""
        lines.append(f"  {grp['category']} error ×{grp['count']}{who}: {one_line(grp['message'])}")
    if len(groups) > limit:
        lines.append(
            f"  and {len(groups) - limit} more distinct messages (summary.json errors.groups)"
        )
    return lines


def failing_lines(
    summary: Summary,
    results: Iterable[ResultRecord],
    *,
    color: bool = False,
    limit: int = FAILING_SHOWN,
    tally: FailingTally | None = None,
) -> list[str]:
    """The failing and errored samples, one line per grade, the first ``limit`` by sample id, then
    "and K more". Streams ``results`` once (unless ``tally`` already holds that pass)."""
    if tally is None:
        gather = FailingPass.of(summary, limit)
        for rec in results:
            gather.add(rec)
        tally = gather.tally()
    shown = tally.shown
    if not shown:
        return []
    labels = {k: m.get("label") for k, m in (summary.get("metrics") or {}).items()}
    rows = [
        (status, one_line(sample, 60), display_name(labels.get(grader), grader), _num(score))
        for _, status, sample, grader, score, _ in shown
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    n_samples, failures = tally.samples, tally.failures
    lines = [
        f"Failing samples: {n_samples} of {summary.get('records', n_samples)} result lines "
        f"({failures} failure{'s' if failures != 1 else ''}):"
    ]
    for row, entry in zip(rows, shown, strict=True):
        cells = [paint(row[0], color) + " " * (widths[0] - len(row[0]))] + [
            row[i].ljust(widths[i]) for i in (1, 2, 3)
        ]
        lines.append(("  " + "  ".join(cells) + "  " + one_line(entry[5], 160)).rstrip())
    if failures > len(shown):
        lines.append(f"  and {failures - len(shown)} more (results.jsonl, report.html)")
    return lines


def cost_speed_lines(summary: Summary) -> list[str]:
    """The "Cost and speed" block (``reports.costspeed``): one line per metric it shows, the
    waits, the run's cost and the budget; text from the run flattened by ``one_line``."""
    block = costspeed.block_of(summary)
    if block is None or not costspeed.has_block(summary):
        return []
    lines = ["Cost and speed:"]
    shown = costspeed.rows(summary)
    width = max((len(one_line(r.label)) for r in shown), default=0)
    for r in shown:
        parts = [f"mean {r.mean}", f"p95 {r.p95}", f"max {r.max}"]
        if r.total != costspeed.NONE:
            parts.append(f"total {r.total}")
        tail = [one_line(n) for n in r.notes]
        if r.change is not None:
            tail.append(f"{r.change} vs baseline")
        lines.append(
            f"  {one_line(r.label).ljust(width)}  "
            + ", ".join(parts)
            + "".join(f"; {t}" for t in tail)
        )
    if text := costspeed.waits(block):
        lines.append(f"  Waits: {text}")
    if text := costspeed.run_cost(block):
        lines.append(f"  Run cost: {one_line(text)}")
    if text := costspeed.budget(block):
        lines.append(f"  Budget: {one_line(text)}")
    return lines


def all_target_failed(summary: Summary) -> bool:
    """Every result line failed at the target: nothing the agent did was graded."""
    errs = summary.get("errors") or {}
    records = summary.get("records") or 0
    return bool(records) and (errs.get("by_category") or {}).get("target", 0) >= records


def verdict_line(summary: Summary, prefix: str = "Verdict: ", color: bool = False) -> str:
    """``Verdict: ERRORED (quality: 3 of 50 samples errored (max_errors 0))``; ``Verdict: NO
    VERDICT`` for a summary that records none (read, never decided here)."""
    reason = summary.get("verdict_reason")
    return f"{prefix}{paint(words_of(summary).word, color)}" + (f" ({reason})" if reason else "")


def render(
    summary: Summary,
    results: Iterable[ResultRecord] = (),
    *,
    color: bool = False,
    failing: FailingTally | None = None,
) -> str:
    """Plain-text report of a summary and its result lines (what ``ci-evals run`` prints at the
    end); ``failing``: their failing samples, already gathered (the lines are then not read)."""
    from tabulate import tabulate

    lines = [
        f"Suite: {summary['suite']}  ({summary['n_samples']} samples"
        + (f" x {summary['num_runs']} runs" if summary.get("num_runs", 1) > 1 else "")
        + f", {summary['duration_s']:.2f} s)"
    ]
    headers = list(HEADERS)
    baseline = summary.get("baseline")
    if baseline is not None:
        headers.append("Δ mean")
    lines.append(
        tabulate(
            metric_rows(summary["metrics"], baseline),
            headers=headers,
            tablefmt="simple",
            disable_numparse=True,
        )
    )
    if all_target_failed(summary):
        lines.append(
            f"Every sample failed at the target ({summary['records']} of {summary['records']}): "
            "nothing was graded."
        )
    for model, block in (summary.get("models") or {}).items():
        lines.append(f"\nModel {model}:")
        lines.append(
            tabulate(
                metric_rows(block["metrics"]),
                headers=HEADERS,
                tablefmt="simple",
                disable_numparse=True,
            )
        )
    lines.append(INTERVALS_NOTE)
    spent = cost_speed_lines(summary)
    if spent:
        lines += ["", *spent]
    errors = error_lines(summary)
    if errors:
        lines += ["", *errors]
    shown = failing_lines(summary, results, color=color, tally=failing)
    if shown:
        lines += ["", *shown]
    if baseline is not None:
        if baseline.get("missing"):
            lines.append(f"Baseline: none ({baseline['missing']})")
        else:
            lines.append(
                f"Baseline: {len(baseline.get('regressions', []))} regressions, "
                f"{len(baseline.get('improvements', []))} improvements, {len(baseline.get('new', []))} new, "
                f"{len(baseline.get('removed', []))} removed"
            )
    if summary.get("flaky"):
        lines.append(f"Flaky across runs: {len(summary['flaky'])} (sample, metric) pairs")
    lines += [f"Judge noise: {line}" for line in noise_lines(summary)]
    lines += endpoint_lines(summary)
    if summary.get("interrupted_by"):
        lines.append("INTERRUPTED: figures cover the samples that finished")
    elif summary.get("partial"):
        lines.append(f"PARTIAL: {summary.get('verdict_reason') or 'samples are missing'}")
    lines.append("")
    if not summary["gates"]:
        lines.append("No gate configured: the run passes when no sample errored.")
    for g in summary["gates"]:
        mark = {
            "passed": "PASS",
            "failed": "FAIL",
            "errored": "FAIL",
            "inconclusive": "INCONCLUSIVE",
            "undecided": "UNDECIDED (passes)",
            "no_baseline": "NO BASELINE" + (" (passes)" if g.get("passed") else " (fails)"),
        }[g["status"]]
        where = f" [{g['model']}]" if g.get("model") else ""
        note = stability_note(g)
        flag = " UNSTABLE:" if unstable(g) and g["status"] != "undecided" else ""
        lines.append(
            f"Gate{where}: {gate_title(g)}: {g.get('reason')} ->{flag} {paint(mark, color)}"
            + (f" ({note})" if note else "")
        )
        lines += sub_gate_lines(g)
    lines.append(verdict_line(summary, color=color))
    return "\n".join(lines)
