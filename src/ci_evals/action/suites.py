"""Running one suite in the Action: its options from the inputs, its baseline folder, and the
outcome (:class:`SuiteRun`) the reports, outputs and exit code are made from.

A suite runs in this process through :func:`ci_evals.run.session.run_suite`, with its stderr passed
through and its last kilobytes kept for the step summary. Exit 0 counts as a pass only with a
summary.json that says so.
"""

from __future__ import annotations

import contextlib
import io
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from ci_evals._util.workflow import commands_stopped
from ci_evals.action.inputs import Inputs
from ci_evals.action.protocol import command
from ci_evals.reports import artifact
from ci_evals.reports.write import own_results
from ci_evals.results.layout import suite_slug
from ci_evals.results.records import ResultRecord, Summary
from ci_evals.run.exits import INTERRUPTED, ExitCode, guarded
from ci_evals.run.options import SuiteOptions, parse_run_flags
from ci_evals.run.session import run_suite


class _Tail(io.TextIOBase):
    """A stream that passes writes through and keeps the last few kilobytes for the step summary."""

    def __init__(self, target: TextIO, keep: int = 8000) -> None:
        self.target, self.keep, self.buf = target, keep, ""

    def write(self, s: str) -> int:
        self.target.write(s)
        self.buf = (self.buf + s)[-self.keep :]
        return len(s)

    def flush(self) -> None:
        self.target.flush()


@dataclass
class SuiteRun:
    """The outcome of one suite: its exit code, output folder and, when written, its summary."""

    suite_file: str
    out_dir: Path
    exit_code: int
    summary: Summary | None
    log_tail: str = ""
    untrusted: bool = False
    """An artifact of another job (results mode): every string of it is made inert."""

    @property
    def name(self) -> str:
        return str((self.summary or {}).get("suite") or Path(self.suite_file).stem)

    def comment_key(self, job: str) -> str:
        """What names this suite's PR comment: ``suite:job``, or for another job's artifact the
        folder the workflow named in the ``results`` input (``folder:job:results=path``). Never what
        an artifact says about itself: a forged ``suite`` must not reach another suite's comment."""
        return (
            f"{self.out_dir.name or 'results'}:{job}:results={self.out_dir}"
            if self.untrusted
            else f"{self.name}:{job}"
        )

    def results(self) -> Iterator[ResultRecord]:
        if self.untrusted:
            return artifact.inert_results(self.out_dir)
        return own_results(self.out_dir / "results.jsonl")


def baseline_for(baseline: str | None, slug: str, several: bool) -> str | None:
    """The baseline folder for one suite, or None (with a warning) when there is none to use.

    With several suites the baseline input may hold one subfolder per suite (as the action
    writes them). A missing baseline is not an error: the first run on a repository has none, and
    regression gates then report "no baseline".
    """
    if not baseline:
        return None
    for folder in ([Path(baseline) / slug] if several else []) + [Path(baseline)]:
        if (folder / "summary.json").exists():
            return str(folder)
    command(
        "warning",
        f"no summary.json in baseline {baseline!r}: running without a baseline",
        title="ci-evals baseline",
    )
    return None


def suite_options(inputs: Inputs, out_dir: Path, baseline: str | None) -> SuiteOptions:
    """One suite's run options: the ``args`` input (``run`` flags, which win), then the action's inputs.

    ``gate`` lines come first, then any ``--gate`` of ``args``. A bad flag in ``args`` exits 2 with
    one line (SystemExit from the flag parser), as ``ci-evals run`` would.
    """
    options = parse_run_flags(inputs.args, prog="ci-evals action: args")
    options.output = options.output or out_dir
    if options.max_concurrent is None:
        options.max_concurrent = inputs.max_concurrent
    if options.baseline is None and baseline:
        options.baseline = Path(baseline)
    options.gate = [*inputs.gates, *(options.gate or [])] or None
    return options


def run_here(
    inputs: Inputs,
    suite_file: str,
    out_dir: Path,
    baseline: str | None,
) -> tuple[int, Summary | None, Path, str]:
    """Run one suite in this process: (exit code, its summary or None, its folder, tail of stderr)."""
    tail = _Tail(sys.stderr)
    summary: Summary | None = None
    folder = out_dir

    def one() -> int:
        nonlocal summary, folder
        code, summary, folder = run_suite(Path(suite_file), options)
        return code

    with contextlib.redirect_stderr(tail):
        try:
            options = suite_options(inputs, out_dir, baseline)
        except SystemExit as exc:  # a bad flag in the args input: one line already printed
            return (
                (exc.code if isinstance(exc.code, int) else ExitCode.CONFIG),
                None,
                out_dir,
                tail.buf,
            )
        code = guarded(one)
    return code, summary, folder, tail.buf


def run_one_suite(
    inputs: Inputs, suite_file: str, several: bool, slug: str | None = None
) -> SuiteRun:
    """Run one suite inside a log group (``slug``: its subfolder when the action runs several)."""
    slug = slug or suite_slug(suite_file)
    out_dir = inputs.output_dir / slug if several else inputs.output_dir
    baseline = baseline_for(inputs.baseline, slug, several)
    command("group", f"ci-evals run {suite_file}")
    try:
        # Model output may reach the log: commands off, so "::error::" or "::stop-commands::" in it is not obeyed.
        with commands_stopped(force=True):
            rc, summary, out_dir, tail = run_here(inputs, suite_file, out_dir, baseline)
    finally:
        command("endgroup")
    if not (rc in (ExitCode.PASSED, ExitCode.FAILED) or rc in INTERRUPTED):
        summary = None
    if rc == ExitCode.PASSED and (
        not isinstance(summary, dict) or summary.get("verdict") != "passed"
    ):
        # exit 0 is a pass only with a summary that says so (suite code calling sys.exit(0) is not)
        tail += (
            "error: ci-evals exited 0 without a summary.json whose verdict is passed; not a pass\n"
        )
        rc = ExitCode.INTERNAL if summary is None else ExitCode.FAILED
    return SuiteRun(suite_file, out_dir, rc, summary, tail)
