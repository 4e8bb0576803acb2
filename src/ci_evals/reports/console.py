"""The console report: a metric table (tabulate), the errors grouped by message, the gates and the verdict."""

from __future__ import annotations

from typing import Any

from ci_evals.verdict import display_name, gate_title

GROUPS_SHOWN = 5
INTERVALS_NOTE = ("95% intervals: the mean's by bootstrap (normal approximation above 200 samples), "
                  "the pass rate's by Wilson score")


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x * 100:.1f}%"


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def _interval(ci) -> str:
    return f"[{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "-"


def metric_rows(metrics: dict[str, Any], baseline: dict[str, Any] | None = None) -> list[list[Any]]:
    rows = []
    base = (baseline or {}).get("metrics", {})
    for name, m in metrics.items():
        row = [
            display_name(m.get("label"), name),
            _num(m.get("mean")),
            _interval(m.get("ci_mean")),
            _pct(m.get("pass_rate")),
            _interval(m.get("ci_pass_rate")),
            f"{m.get('graded', 0)}/{m['n']}",
            m["errors"],
            m.get("rule") or m.get("pass_rule", ""),
        ]
        if baseline is not None:
            b = base.get(name)
            row.append("-" if not b or b.get("delta_mean") is None else f"{b['delta_mean']:+.3f}")
        rows.append(row)
    return rows


HEADERS = ["metric", "mean", "mean 95% CI", "pass rate", "pass rate 95% CI", "graded/n", "errors", "pass rule"]


def endpoint_lines(summary: dict[str, Any]) -> list[str]:
    """One line per LLM endpoint that throttled, paced or stopped the run (summary.json ``endpoints``)."""
    out = []
    for ep in summary.get("endpoints") or []:
        if not isinstance(ep, dict):
            continue
        if ep.get("stopped"):
            out.append(f"stopped: {ep['stopped']}")
            continue
        rejected, calls, waited = ep.get("rejected") or 0, ep.get("calls") or 0, ep.get("waited_s") or 0.0
        if not rejected and waited < 0.5:
            continue
        limit = f"; limit {ep['rpm']:g} rpm ({'your setting' if ep.get('rpm_from') == 'settings' else 'announced by the server'})" \
            if ep.get("rpm") else ""
        head = (f"throttled: {ep.get('endpoint')}: {rejected} of {calls} calls rejected (429/503/529)" if rejected
                else f"paced: {ep.get('endpoint')}: {calls} calls")
        out.append(f"{head}, calls held back {waited:.1f} s, settled at {ep.get('concurrency')} in flight "
                   f"(lowest {ep.get('lowest_concurrency')}, cap {ep.get('max_concurrent')}){limit}")
    return out


def sub_gate_lines(g: dict[str, Any], depth: int = 1) -> list[str]:
    """The sub-gates of a weighted or logical gate, one indented line each, with their values."""
    out = []
    for c in g.get("children") or []:
        out.append(f"{'  ' * depth}- {gate_title(c)}: {c.get('reason')} ({c['status']})")
        out += sub_gate_lines(c, depth + 1)
    return out


def error_lines(summary: dict[str, Any], limit: int = GROUPS_SHOWN) -> list[str]:
    """The distinct error messages, most frequent first: ``target error ×6: cannot start 'pyhton3': ...``."""
    errs = summary.get("errors") or {}
    groups = errs.get("groups") or []
    if not errs.get("total"):
        return []
    labels = {k: m.get("label") for k, m in (summary.get("metrics") or {}).items()}
    samples = errs.get("samples", errs["total"])
    cats = ", ".join(f"{k} {v}" for k, v in errs.get("by_category", {}).items() if v)
    lines = [f"Errors: {samples} of {summary.get('records', samples)} result lines errored ({cats}); "
             "errored samples have no score and count as failed:"]
    for grp in groups[:limit]:
        who = f" ({display_name(labels.get(grp['grader']), grp['grader'])})" if grp.get("grader") else ""
        lines.append(f"  {grp['category']} error ×{grp['count']}{who}: {one_line(grp['message'])}")
    if len(groups) > limit:
        lines.append(f"  and {len(groups) - limit} more distinct messages (summary.json errors.groups)")
    return lines


def one_line(text: Any, limit: int = 300) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def all_target_failed(summary: dict[str, Any]) -> bool:
    """Every result line failed at the target: nothing the agent did was graded."""
    errs = summary.get("errors") or {}
    records = summary.get("records") or 0
    return bool(records) and (errs.get("by_category") or {}).get("target", 0) >= records


def verdict_line(summary: dict[str, Any], prefix: str = "Verdict: ") -> str:
    """``Verdict: ERRORED (quality: 3 of 50 samples errored (max_errors 0))``."""
    from ci_evals.verdict import word

    reason = summary.get("verdict_reason")
    return f"{prefix}{word(summary)}" + (f" ({reason})" if reason else "")


def render(summary: dict[str, Any]) -> str:
    """Plain-text report of a summary (what ``ci-evals run`` prints at the end)."""
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
    lines.append(tabulate(metric_rows(summary["metrics"], baseline), headers=headers, tablefmt="simple",
                          disable_numparse=True))
    if all_target_failed(summary):
        lines.append(f"Every sample failed at the target ({summary['records']} of {summary['records']}): "
                     "nothing was graded.")
    for model, block in (summary.get("models") or {}).items():
        lines.append(f"\nModel {model}:")
        lines.append(tabulate(metric_rows(block["metrics"]), headers=HEADERS, tablefmt="simple",
                              disable_numparse=True))
    lines.append(INTERVALS_NOTE)
    errors = error_lines(summary)
    if errors:
        lines += ["", *errors]
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
    lines += endpoint_lines(summary)
    if summary.get("interrupted_by"):
        lines.append("INTERRUPTED: figures cover the samples that finished")
    elif summary.get("partial"):
        lines.append(f"PARTIAL: {summary.get('verdict_reason') or 'samples are missing'}")
    lines.append("")
    if not summary["gates"]:
        lines.append("No gate configured: the run passes when no sample errored.")
    for g in summary["gates"]:
        mark = {"passed": "PASS", "failed": "FAIL", "errored": "FAIL", "inconclusive": "INCONCLUSIVE",
                "no_baseline": "NO BASELINE" + (" (passes)" if g.get("passed") else " (fails)")}[g["status"]]
        where = f" [{g['model']}]" if g.get("model") else ""
        lines.append(f"Gate{where}: {gate_title(g)}: {g.get('reason')} -> {mark}")
        lines += sub_gate_lines(g)
    lines.append(verdict_line(summary))
    return "\n".join(lines)
