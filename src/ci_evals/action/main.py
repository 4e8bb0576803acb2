"""The GitHub Action mode (``ci-evals action``, the image's entrypoint).

Reads the ``INPUT_*`` variables GitHub sets (hyphens kept: ``INPUT_GITHUB-TOKEN``), runs each
suite through :func:`ci_evals.run.session.run_suite`, then writes the step summary, the step outputs, annotations and one
PR comment per suite. The step summary is written on every outcome, the comment is best effort, and
the exit code is the gate's: 0 passed, 1 gate failed, 2 configuration error, 3 internal error
(a failed gate exits 0 when ``fail-on-gate`` is false). Given a subcommand (``run suite.yaml
--dry-run``) ``ci-evals action`` is the plain CLI (``ci_evals.cli.app``), so ``docker run IMAGE run
suite.yaml`` works locally. Inputs are read by ``action.inputs``, the runner's protocol
(workflow commands, outputs, step summary) is ``action.protocol``.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from ci_evals._util.bounds import dumps
from ci_evals._util.errors import ConfigError
from ci_evals._util.forks import NO_VERDICT, supervised
from ci_evals._util.workflow import commands_stopped
from ci_evals.action import handover
from ci_evals.action.inputs import InputError, Inputs, parse_inputs
from ci_evals.action.protocol import append_step_summary, command, secrets_to_mask, set_outputs
from ci_evals.reports import artifact
from ci_evals.reports.comment import marker, render_comment
from ci_evals.reports.github import (
    pr_number_from_event,
    run_url,
    upsert_pr_comment,
    workflow_run_head,
)
from ci_evals.reports.markdown import (
    errors_line,
    gate_description,
    render_error_md,
    render_summary_md,
)
from ci_evals.reports.write import iter_results
from ci_evals.results.files import foreign_shape
from ci_evals.results.layout import suite_slug, unique_slugs
from ci_evals.run.exits import INTERRUPTED, ExitCode, guarded, keep_stdio
from ci_evals.run.options import SuiteOptions, parse_run_flags
from ci_evals.run.session import exit_code, run_suite

# ---------------------------------------------------------------- running one suite


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
    summary: dict[str, Any] | None
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

    def results(self) -> Iterator[dict[str, Any]]:
        if self.untrusted:
            return artifact.iter_results(self.out_dir)
        return iter_results(self.out_dir / "results.jsonl")


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
) -> tuple[int, dict[str, Any] | None, Path, str]:
    """Run one suite in this process: (exit code, its summary or None, its folder, tail of stderr)."""
    tail = _Tail(sys.stderr)
    done: dict[str, Any] = {"summary": None, "out": out_dir}

    def one() -> int:
        code, done["summary"], done["out"] = run_suite(Path(suite_file), options)
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
    return code, done["summary"], done["out"], tail.buf


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


def load_results(folder: str) -> SuiteRun:
    """A finished results folder (another job's artifact, a merged shard folder) to report on.

    It is read as a hostile artifact (ci_evals.results.files, Trust.HOSTILE) and its strings are
    made inert (ci_evals.reports.artifact). A summary.json or results.jsonl that cannot be read,
    is not UTF-8 or JSON, holds NaN, lone surrogates or deep nesting, or has another shape is a
    foreign artifact: one error line naming the file (and line), exit 1, never a pass.
    """
    try:
        summary = artifact.load_summary(folder)
        artifact.check_results(folder)
        run = SuiteRun(
            str(summary.get("suite_file") or folder),
            Path(folder),
            exit_code(summary),
            summary,
            untrusted=True,
        )
        _try_rendering(run)
    except ConfigError as exc:
        return SuiteRun(
            folder, Path(folder), ExitCode.FAILED, None, f"{FOREIGN}: {exc}", untrusted=True
        )
    return run


def _try_rendering(run: SuiteRun) -> None:
    """Render what results mode will render, once, turning a crash on a shape the reader let
    through into the foreign-artifact error (the reader checks what the reports read; this
    catches what it does not know yet, before a step summary or comment is half written)."""
    assert run.summary is not None
    with foreign_shape(str(run.out_dir / "summary.json"), "summary.json"):
        step_summary(run)
        render_comment(run.summary, run.results(), run_url=None, marker_key="check")
        for gate in run.summary.get("gates") or []:
            gate_description(gate)
        metrics_output([run])


FOREIGN = "not a ci-evals results folder"

# ---------------------------------------------------------------- reporting


def annotate(run: SuiteRun) -> None:
    """``::error::`` per failed gate (or failed run), ``::warning::`` when samples errored."""
    if run.summary is None:
        last = [ln for ln in run.log_tail.strip().splitlines() if ln.strip()]
        kind = _failure_kind(run)
        command(
            "error", last[-1] if last else f"{run.suite_file}: {kind}", title=f"ci-evals {kind}"
        )
        return
    for gate in run.summary.get("gates") or []:
        if not gate.get("passed"):
            status = gate.get("status") or "failed"
            command(
                "error",
                f"{run.name}: {gate_description(gate)}: {gate.get('reason')} ({status})",
                title="ci-evals gate failed",
                file=run.suite_file,
            )
    if errors_line(run.summary):
        command(
            "warning", f"{run.name}: {errors_line(run.summary)}", title="ci-evals errored samples"
        )


def step_summary(run: SuiteRun) -> str:
    """The step-summary markdown of one suite, whatever its outcome."""
    if run.summary is not None:
        return render_summary_md(run.summary, run.results())
    return render_error_md(
        f"{run.suite_file}: {_failure_kind(run)}", run.log_tail.strip() or "no output"
    )


def _failure_kind(run: SuiteRun) -> str:
    if run.untrusted:
        return f"{FOREIGN} (exit {run.exit_code})"
    return (
        "configuration error"
        if run.exit_code == ExitCode.CONFIG
        else f"run failed (exit {run.exit_code})"
    )


def should_comment(mode: str, env: Mapping[str, str], explicit_pr: bool = False) -> bool:
    """``always``; ``never``; ``auto``: on pull_request events or when ``pr-number`` names the PR."""
    if mode in ("always", "never"):
        return mode == "always"
    return explicit_pr or (env.get("GITHUB_EVENT_NAME") or "").startswith("pull_request")


def post_comments(
    inputs: Inputs, runs: list[SuiteRun], env: Mapping[str, str], dry_run: bool
) -> list[str]:
    """Render one comment per suite and upsert it (a dry run posts nothing); the comment URLs."""
    if dry_run:
        print("ci-evals: dry run, no PR comment posted")
        return []
    if not should_comment(inputs.comment, env, inputs.pr_number is not None):
        return []
    number = inputs.pr_number or pr_number_from_event(env.get("GITHUB_EVENT_PATH"))
    head_sha = None
    if (
        inputs.results
        and inputs.pr_number is not None
        and env.get("GITHUB_EVENT_NAME") == "workflow_run"
    ):
        head_sha = (
            workflow_run_head(env.get("GITHUB_EVENT_PATH"))
            or "(no workflow_run.head_sha in the event)"
        )
    job = inputs.comment_key or env.get("GITHUB_JOB") or "evals"
    urls = []
    for run in (r for r in runs if r.summary is not None):
        key = run.comment_key(job)
        body = render_comment(run.summary, run.results(), run_url=run_url(env), marker_key=key)
        url = upsert_pr_comment(
            body,
            marker(key),
            token=inputs.token,
            repository=env.get("GITHUB_REPOSITORY"),
            number=number,
            api_url=env.get("GITHUB_API_URL"),
            warn=lambda msg: command("warning", msg, title="ci-evals PR comment"),
            head_sha=head_sha,
        )
        if url:
            urls.append(url)
    return urls


def metrics_output(runs: list[SuiteRun]) -> dict[str, Any]:
    """``{metric: {mean, pass_rate, n, graded, errors}}``; with several suites the keys are ``suite/metric``."""
    out: dict[str, Any] = {}
    for run in runs:
        for name, m in ((run.summary or {}).get("metrics") or {}).items():
            key = f"{run.name}/{name}" if len(runs) > 1 else name
            out[key] = {k: m.get(k) for k in ("mean", "pass_rate", "n", "graded", "errors")}
    return out


VERDICT_ORDER = ("passed", "failed", "partial", "errored", "interrupted")


def combined_verdict(runs: list[SuiteRun]) -> str:
    """The worst verdict of the suites; a suite that wrote no summary (bad configuration, a crash) is errored."""
    verdicts = [(r.summary or {}).get("verdict") or "errored" for r in runs]
    return max(verdicts, key=VERDICT_ORDER.index, default="errored")


def passed_for_sure(runs: list[SuiteRun], code: int, verdict: str) -> bool:
    """``passed=true`` needs exit 0, a combined verdict of passed and every suite's summary saying passed."""
    return (
        code == ExitCode.PASSED
        and verdict == "passed"
        and bool(runs)
        and all(isinstance(r.summary, dict) and r.summary.get("verdict") == "passed" for r in runs)
    )


def combined_exit(codes: list[int]) -> int:
    """The worst exit code: interruption > internal > configuration > gate failed > passed."""
    return max(codes, default=ExitCode.PASSED)


def run_action(env: Mapping[str, str], token: str | None = None) -> int:
    """The action: inputs, suites, step summary, outputs, annotations, comment, exit code.

    ``token`` is the GitHub token when it came through the handover pipe (see ci_evals.action.handover)
    rather than the environment.
    """
    if (
        env.get("GITHUB_ACTIONS") == "true"
    ):  # only GitHub's runner hides this line: elsewhere it prints the key
        for secret in secrets_to_mask(env) + ([token] if token else []):
            command("add-mask", secret)
    summary_path, output_path = env.get("GITHUB_STEP_SUMMARY"), env.get("GITHUB_OUTPUT")
    try:
        inputs = parse_inputs(env)
    except InputError as exc:
        command("error", str(exc), title="ci-evals configuration error")
        append_step_summary(summary_path, render_error_md("action input error", str(exc)))
        set_outputs(
            output_path,
            {"passed": "false", "verdict": "errored", "exit-code": str(ExitCode.CONFIG)},
        )
        return ExitCode.CONFIG
    if token:
        inputs.token = token
    os.environ.pop("INPUT_GITHUB-TOKEN", None)  # user code run by the suite never sees our token
    several = len(inputs.suites) > 1
    slugs = unique_slugs(inputs.suites)
    runs: list[SuiteRun] = []
    cwd = os.getcwd()
    for item in inputs.results or inputs.suites:
        run = (
            load_results(item)
            if inputs.results
            else run_one_suite(inputs, item, several, slugs[item])
        )
        os.chdir(
            cwd
        )  # back to the workspace, whatever the suite's code did (its folders are absolute)
        runs.append(run)
        append_step_summary(summary_path, step_summary(run))
        annotate(run)
    code = combined_exit([r.exit_code for r in runs])
    urls = post_comments(inputs, runs, env, dry_run="--dry-run" in inputs.args)
    summaries = [str(r.out_dir / "summary.json") for r in runs if r.summary is not None]
    verdict = combined_verdict(runs)
    set_outputs(
        output_path,
        {
            "passed": "true" if passed_for_sure(runs, code, verdict) else "false",
            "verdict": verdict,
            "exit-code": str(code),
            "summary-json": "\n".join(summaries),
            "metrics": dumps(metrics_output(runs), sort_keys=True),
            "comment-url": "\n".join(urls),
        },
    )
    if code == ExitCode.FAILED and verdict == "failed" and not inputs.fail_on_gate:
        print("ci-evals: the gate failed, but fail-on-gate is false: exiting 0")
        return ExitCode.PASSED
    return code


def refused(env: Mapping[str, str], code: int) -> None:
    """The step's outputs and summary when the run ended before its verdict (ci_evals._util.forks)."""
    why = (
        NO_VERDICT
        if code == ExitCode.INTERNAL
        else f"the run's process ended with exit {code} before its verdict"
    )
    append_step_summary(
        env.get("GITHUB_STEP_SUMMARY"), render_error_md(f"run failed (exit {code})", why)
    )
    set_outputs(
        env.get("GITHUB_OUTPUT"), {"passed": "false", "verdict": "errored", "exit-code": str(code)}
    )


def main(restart: bool = False) -> int:
    """``ci-evals action``: the Action (``ci-evals action COMMAND ...`` is the plain CLI, see cli.app).

    ``restart`` (the command line's choice) hands the GitHub token over to a fresh process without
    it in the environment (ci_evals.action.handover); a caller that imported the action, such as
    a test, keeps its own process.
    """
    try:
        token = None
        if restart:
            handover.reexec_without_token(os.environ, [sys.executable, "-m", "ci_evals", "action"])
            token = handover.take_token(os.environ)
            handover.make_undumpable()
            keep_stdio()  # the suites' code runs in a child: exit 0 only with a verdict, no process left behind
            return supervised(
                lambda: run_action(os.environ, token),
                refused=lambda code: refused(os.environ, code),
            )
        return run_action(os.environ, token)
    except Exception as exc:  # the last line of defence: report, summarise, exit 3
        command(
            "error", f"internal error: {type(exc).__name__}: {exc}", title="ci-evals internal error"
        )
        append_step_summary(
            os.environ.get("GITHUB_STEP_SUMMARY"),
            render_error_md("internal error", f"{type(exc).__name__}: {exc}"),
        )
        return ExitCode.INTERNAL
