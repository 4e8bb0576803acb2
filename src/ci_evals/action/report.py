"""What the Action shows of finished suites: the step summary, annotations, the PR comments, the
combined verdict, exit code and ``metrics`` output; and results mode's reading of another job's
folder (:func:`load_results`), which renders it once so a shape the reader let through fails as a
foreign artifact before anything is half written.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TypedDict

from ci_evals._util.errors import ConfigError
from ci_evals.action.inputs import Inputs
from ci_evals.action.protocol import command
from ci_evals.action.suites import SuiteRun
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
from ci_evals.reports.verdicts import ORDER as VERDICT_ORDER
from ci_evals.results.files import foreign_shape
from ci_evals.run.exits import ExitCode
from ci_evals.run.finish import exit_code

FOREIGN = "not a ci-evals results folder"

# ---------------------------------------------------------------- results mode


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
    for run in runs:
        if run.summary is None:
            continue
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


class MetricOutput(TypedDict):
    """One metric in the ``metrics`` output: its summary.json entry's headline figures (null
    when the entry lacks one)."""

    mean: float | None
    pass_rate: float | None
    n: int | None
    graded: int | None
    errors: int | None


def metrics_output(runs: list[SuiteRun]) -> dict[str, MetricOutput]:
    """``{metric: {mean, pass_rate, n, graded, errors}}``; with several suites the keys are ``suite/metric``."""
    out: dict[str, MetricOutput] = {}
    for run in runs:
        for name, m in ((run.summary or {}).get("metrics") or {}).items():
            key = f"{run.name}/{name}" if len(runs) > 1 else name
            out[key] = {
                "mean": m.get("mean"),
                "pass_rate": m.get("pass_rate"),
                "n": m.get("n"),
                "graded": m.get("graded"),
                "errors": m.get("errors"),
            }
    return out


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
