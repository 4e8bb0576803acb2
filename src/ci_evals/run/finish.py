"""A run's end: its reports, what it prints, and its exit code.

Kept apart from :mod:`ci_evals.run.session` (the start) so that a run's start does not import the
reports (issue 41 item 7: 20 ms of every run's start, before its first request): the session
imports this module once the run is over, or a background thread does while the run waits on the
network (:func:`ci_evals.run.session.finish_imports`, which calls :func:`warm`).
"""

from __future__ import annotations

import sys
from pathlib import Path

from ci_evals.gating.baseline import Baseline
from ci_evals.gating.verdict import decide
from ci_evals.reports import console, html
from ci_evals.reports.comment import render_comment
from ci_evals.reports.letta_agents import console_lines
from ci_evals.reports.write import own_results, write_outputs
from ci_evals.results.records import Summary
from ci_evals.run.exits import ExitCode
from ci_evals.run.options import SuiteOptions


def warm() -> None:
    """Compile report.html's template (Jinja2), the one thing of the end this import leaves out."""
    html.warm()


def report(
    summary: Summary,
    args: SuiteOptions,
    selected: int,
    baseline: Baseline | None,
    out: Path,
    shown: Path,
) -> ExitCode | None:
    """Write the run's reports into ``out`` and print its console lines (``shown``: the folder as
    the user named it; ``selected``: the samples the run selected). Returns the exit code when it
    is decided here (a shard that selects no sample passes: the merge decides), else None."""
    gather = None if args.quiet else console.FailingPass.of(summary)
    comparison = (  # the baseline read once: every report's regressions and columns
        baseline.comparison(summary.get("metrics") or {}, summary.get("cost_speed"))
        if baseline is not None
        else None
    )
    failing = write_outputs(
        out, summary, gather, comparison
    )  # the console's failing samples, in the same read
    if args.shard and selected == 0:
        print(
            f"{summary['suite']}: shard {args.shard[0]}/{args.shard[1]} selects no sample, nothing to "
            f"gate here (merge the shards for the verdict). Results: {shown}/"
        )
        return ExitCode.PASSED
    color = console.use_color(sys.stdout)
    if not args.quiet:
        print(console.render(summary, color=color, failing=failing))
    else:
        print(console.verdict_line(summary, prefix=f"{summary['suite']}: ", color=color))
    print(f"Results: {shown}/ (summary.json, results.jsonl, summary.md, junit.xml, report.html)")
    if summary.get("letta"):  # agents left on a Letta server: shown even with --quiet
        print("\n".join(console_lines(summary)))
    if args.dry_run:
        print_comment(summary, out)
    return None


def print_comment(summary: Summary, out: Path) -> None:
    body = render_comment(
        summary,
        own_results(out / "results.jsonl"),
        run_url=None,
        marker_key=summary.get("suite") or "suite",
    )
    print("\n--- PR comment (dry run: not posted) ---\n" + body + "\n--- end of PR comment ---")


def exit_code(summary: Summary) -> ExitCode:
    """The process exit code for a summary's verdict (decided from its gates when it states none)."""
    verdict = summary.get("verdict") or decide(summary)[0]
    return ExitCode.of_verdict(verdict, summary.get("interrupted_by"))
