"""The GitHub Action mode (``ci-evals action``, the image's entrypoint).

Reads the ``INPUT_*`` variables GitHub sets (hyphens kept: ``INPUT_GITHUB-TOKEN``), runs each
suite through :func:`ci_evals.run.session.run_suite`, then writes the step summary, the step outputs, annotations and one
PR comment per suite. The step summary is written on every outcome, the comment is best effort, and
the exit code is the gate's: 0 passed, 1 gate failed, 2 configuration error, 3 internal error
(a failed gate exits 0 when ``fail-on-gate`` is false). Given a subcommand (``run suite.yaml
--dry-run``) ``ci-evals action`` is the plain CLI (``ci_evals.cli.app``), so ``docker run IMAGE run
suite.yaml`` works locally. Inputs are read by ``action.inputs``, a suite is run by
``action.suites``, what is shown of it (step summary, annotations, comments, outputs) is
``action.report``, and the runner's protocol (workflow commands, outputs, step summary) is
``action.protocol``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from ci_evals._util.bounds import dumps
from ci_evals._util.forks import NO_VERDICT, supervised
from ci_evals.action import handover
from ci_evals.action.inputs import InputError, parse_inputs
from ci_evals.action.protocol import append_step_summary, command, secrets_to_mask, set_outputs
from ci_evals.action.report import (
    annotate,
    combined_exit,
    combined_verdict,
    load_results,
    metrics_output,
    passed_for_sure,
    post_comments,
    step_summary,
)
from ci_evals.action.suites import SuiteRun, run_one_suite
from ci_evals.reports.markdown import render_error_md
from ci_evals.results.layout import unique_slugs
from ci_evals.run.exits import ExitCode, keep_stdio


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
