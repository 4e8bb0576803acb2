"""Every report file of a results folder, written from its summary (``ci_evals.gating.summary``):
summary.json, summary.md, junit.xml and report.html.

results.jsonl is read once for all three reports: each line, parsed once, feeds the summary's
digest, junit.xml's testcases and report.html's first pass (100k lines cost one parse, not three);
a large one once by each of two processes (see :func:`write_outputs`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from ci_evals._util import forks, gcpolicy
from ci_evals._util.bounds import dumps
from ci_evals.gating.comparison import Comparison
from ci_evals.reports.digest import Digester
from ci_evals.reports.failing import FailingPass, FailingTally
from ci_evals.reports.html import report_scan, write_report
from ci_evals.reports.junit import JunitWriter
from ci_evals.reports.markdown import render_summary_md
from ci_evals.results.files import Trust, iter_records, records
from ci_evals.results.records import ResultRecord, Summary
from ci_evals.results.writer import write_text

BESIDE_BYTES = 1 << 20
"""results.jsonl at least this large (about 1,300 lines of a model + judge run) has its reports
written by two processes (measured at 10,000 lines, 8.5 MB: 1.9-2.3 s for the whole run against
2.2-2.5 s; bench/wall.py's 5,000 lines, 3.9 MB: 0.45-0.48 s against 0.69-0.71 s; 2,600 lines,
2 MB: 0.24-0.34 s against 0.39-0.57 s; at 0.8 MB neither is reliably faster)."""


def own_results(path: Path) -> Iterator[ResultRecord]:
    """Stream the records of this run's own results.jsonl, trusted as written (a torn line is
    skipped); see :mod:`ci_evals.results.files` for folders from elsewhere and
    :func:`ci_evals.reports.artifact.inert_results` for a hostile artifact's."""
    return records(path, Trust.OWN)


def write_outputs(
    out: Path,
    summary: Summary,
    failing: FailingPass | None = None,
    comparison: Comparison | None = None,
) -> FailingTally | None:
    """summary.json, summary.md, junit.xml and report.html in ``out`` (results.jsonl is already
    there, this run's own), each written whole to a temporary file and renamed, never through a symlink.

    A large results.jsonl (:data:`BESIDE_BYTES`) is read by two processes when the machine has a
    second core (ci_evals._util.forks): summary.md and junit.xml are written by a forked process
    while this one writes report.html (each was about half of the reports' time at 100k lines).

    ``failing``: the console's failing samples, gathered in the same read (a large results.jsonl
    read once more for them took 1-2 s at 100k lines); returns what it gathered.

    ``comparison``: the run's with its baseline (:meth:`ci_evals.gating.baseline.Baseline.comparison`),
    for report.html's baseline columns and regressed rows; summary.md and junit.xml read the same
    comparison's block in ``summary``."""
    out.mkdir(parents=True, exist_ok=True)
    write_text(
        out / "summary.json", dumps(summary, indent=2, ensure_ascii=False, default=str) + "\n"
    )
    results = out / "results.jsonl"
    with gcpolicy.streaming():
        if _size(results) < BESIDE_BYTES:
            page = report_scan(out, comparison)
            tally = _write_md_junit(out, summary, page.add, failing)
            write_report(out, summary, scan=page)
            return tally
        side = forks.Beside(lambda: _write_md_junit(out, summary, failing=failing))
        page = report_scan(out, comparison)
        page.feed()
        write_report(out, summary, scan=page)
        return side.join()


def _write_md_junit(
    out: Path,
    summary: Summary,
    also: Callable[[int, ResultRecord], None] | None = None,
    failing: FailingPass | None = None,
) -> FailingTally | None:
    """summary.md and junit.xml from one pass over results.jsonl (``also(i, rec)``: another reader
    of each line; ``failing``: the console's, whose tally is returned)."""
    digester, junit = Digester(), JunitWriter(summary)
    for i, rec in iter_records(out / "results.jsonl", Trust.OWN):
        digester.add(rec)
        junit.add(rec)
        if also is not None:
            also(i, rec)
        if failing is not None:
            failing.add(rec)
    write_text(out / "summary.md", render_summary_md(summary, digester.digest))
    junit.write(out / "junit.xml")
    return failing.tally() if failing is not None else None


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
