"""Every report file of a results folder, written from its summary (``ci_evals.gating.summary``):
summary.json, summary.md, junit.xml and report.html."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ci_evals._util.bounds import dumps
from ci_evals.reports.html import write_report
from ci_evals.reports.junit import write_junit
from ci_evals.reports.markdown import render_summary_md
from ci_evals.results.files import Trust, records
from ci_evals.results.writer import write_text


def iter_results(path: Path) -> Iterator[dict[str, Any]]:
    """Stream the records of this run's own results.jsonl (a torn line is skipped); see
    :mod:`ci_evals.results.files` for folders from elsewhere."""
    return records(path, Trust.OWN)


def write_outputs(out: Path, summary: dict[str, Any]) -> None:
    """summary.json, summary.md, junit.xml and report.html in ``out`` (results.jsonl is already
    there), each written whole to a temporary file and renamed, never through a symlink."""
    out.mkdir(parents=True, exist_ok=True)
    write_text(out / "summary.json", dumps(summary, indent=2, ensure_ascii=False, default=str) + "\n")
    results = out / "results.jsonl"
    write_text(out / "summary.md", render_summary_md(summary, iter_results(results)))
    write_junit(summary, iter_results(results), out / "junit.xml")
    write_report(out, summary)
