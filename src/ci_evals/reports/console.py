"""The console report: a metric table (tabulate), the gates and the verdict."""

from __future__ import annotations

from typing import Any

from ci_evals.reports.markdown import gate_compared


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x * 100:.1f}%"


def _interval(ci) -> str:
    return f"[{ci[0]:.3f}, {ci[1]:.3f}]" if ci else ""


def metric_rows(metrics: dict[str, Any], baseline: dict[str, Any] | None = None) -> list[list[Any]]:
    rows = []
    base = (baseline or {}).get("metrics", {})
    for name, m in metrics.items():
        row = [
            m.get("label") or name,
            f"{m['mean']:.3f}",
            _interval(m.get("ci_mean")),
            _pct(m["pass_rate"]),
            m["n"],
            m["errors"],
            m.get("pass_rule", ""),
        ]
        if baseline is not None:
            b = base.get(name)
            row.append("-" if not b or b.get("delta_mean") is None else f"{b['delta_mean']:+.3f}")
        rows.append(row)
    return rows


def render(summary: dict[str, Any]) -> str:
    """Plain-text report of a summary (what ``ci-evals run`` prints at the end)."""
    from tabulate import tabulate

    lines = [
        f"Suite: {summary['suite']}  ({summary['n_samples']} samples"
        + (f" x {summary['num_runs']} runs" if summary.get("num_runs", 1) > 1 else "")
        + f", {summary['duration_s']:.2f} s)"
    ]
    headers = ["metric", "mean", "95% CI", "pass rate", "n", "errors", "pass rule"]
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
    for model, block in (summary.get("models") or {}).items():
        lines.append(f"\nModel {model}:")
        lines.append(
            tabulate(
                metric_rows(block["metrics"]),
                headers=headers[:7],
                tablefmt="simple",
                disable_numparse=True,
            )
        )
    errs = summary.get("errors", {})
    if errs.get("total"):
        cats = ", ".join(f"{k} {v}" for k, v in errs["by_category"].items() if v)
        lines.append(
            f"\nErrors: {errs['total']} ({cats}); errored samples count as failures (score 0)"
        )
    if baseline is not None:
        lines.append(
            f"Baseline: {len(baseline.get('regressions', []))} regressions, "
            f"{len(baseline.get('improvements', []))} improvements, {len(baseline.get('new', []))} new, "
            f"{len(baseline.get('removed', []))} removed"
        )
    if summary.get("flaky"):
        lines.append(f"Flaky across runs: {len(summary['flaky'])} (sample, metric) pairs")
    if summary.get("partial"):
        lines.append("PARTIAL: the run was interrupted; figures cover the samples that finished")
    lines.append("")
    if not summary["gates"]:
        lines.append("No gate configured: nothing to pass or fail.")
    for g in summary["gates"]:
        mark = {
            "passed": "PASS",
            "failed": "FAIL",
            "inconclusive": "INCONCLUSIVE",
            "no_baseline": "NO BASELINE",
        }[g["status"]]
        where = f" [{g['model']}]" if g.get("model") else ""
        actual = " (" + gate_compared(g, lambda x: f"{x:.4f}")
        if g.get("interval"):
            actual += f", CI {_interval(g['interval'])}"
        actual += ")"
        lines.append(f"Gate{where}: {g['description']} -> {mark}{actual}")
    lines.append("Verdict: " + ("PASSED" if summary["gate"]["passed"] else "FAILED"))
    return "\n".join(lines)
