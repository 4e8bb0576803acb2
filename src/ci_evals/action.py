"""The GitHub Action mode (``ci-evals action``, the image's entrypoint).

Reads the ``INPUT_*`` variables GitHub sets (hyphens kept: ``INPUT_GITHUB-TOKEN``), runs each
suite through the normal CLI, then writes the step summary, the step outputs, annotations and one
PR comment per suite. The step summary is written on every outcome, the comment is best effort, and
the exit code is the gate's: 0 passed, 1 gate failed, 2 configuration error, 3 internal error
(a failed gate exits 0 when ``fail-on-gate`` is false). Given a subcommand (``run suite.yaml
--dry-run``) it is the plain CLI, so ``docker run IMAGE run suite.yaml`` works locally.
"""

from __future__ import annotations

import contextlib
import glob
import io
import json
import os
import shlex
import sys
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from ci_evals.bounds import dumps
from ci_evals.redact import is_secret_name, scrub
from ci_evals.reports.markdown import (
    errors_line,
    gate_description,
    render_error_md,
    render_summary_md,
)
from ci_evals.verdict import SIGNAL_EXIT

EXIT_PASSED, EXIT_GATE_FAILED, EXIT_CONFIG, EXIT_INTERNAL = 0, 1, 2, 3
STEP_SUMMARY_LIMIT = 1_000_000
"""GitHub rejects a step summary over 1 MiB; we stay below it."""


class InputError(Exception):
    """An action input that cannot be used (exit 2, shown in the step summary)."""


# ---------------------------------------------------------------- workflow commands


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_prop(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def command(name: str, message: str = "", out: TextIO | None = None, **props: str) -> None:
    """Print a workflow command (``::error title=..::message``) with GitHub's escaping."""
    stream = out or sys.stdout
    if name != "add-mask":
        message = scrub(message)
    params = ",".join(f"{k}={_escape_prop(scrub(v))}" for k, v in props.items() if v)
    stream.write(f"::{name}{' ' + params if params else ''}::{_escape_data(message)}\n")
    stream.flush()


def secrets_to_mask(env: Mapping[str, str]) -> list[str]:
    """Values to ``::add-mask::``: the token input and every ``*_API_KEY``/``*_TOKEN``-style variable."""
    values = []
    for name, value in env.items():
        if is_secret_name(name) and value:
            values += [line.strip() for line in value.splitlines() if len(line.strip()) >= 4]
    return sorted(set(values))


def set_outputs(path: str | None, outputs: Mapping[str, str]) -> None:
    """Append step outputs to ``$GITHUB_OUTPUT`` in the multi-line-safe heredoc form."""
    if not path:
        return
    with open(path, "a", encoding="utf-8") as f:
        for name, value in outputs.items():
            delim = f"ghadelimiter_{uuid.uuid4().hex}"
            while delim in value:
                delim = f"ghadelimiter_{uuid.uuid4().hex}"
            f.write(f"{name}<<{delim}\n{value}\n{delim}\n")


def append_step_summary(path: str | None, text: str) -> None:
    """Append markdown to ``$GITHUB_STEP_SUMMARY`` (no-op outside GitHub), kept under GitHub's limit."""
    if not path:
        return
    text = scrub(text)
    data = text.encode("utf-8")
    if len(data) > STEP_SUMMARY_LIMIT:
        text = data[: STEP_SUMMARY_LIMIT - 200].decode("utf-8", "ignore")
        text = text[: text.rfind("\n")] + "\n\n… (step summary truncated; see summary.md)\n"
    with open(path, "a", encoding="utf-8") as f:
        f.write(text + "\n")


# ---------------------------------------------------------------- inputs


@dataclass
class Inputs:
    """The action's inputs, parsed and checked."""

    suites: list[str]
    output_dir: Path
    max_concurrent: int | None = None
    token: str | None = None
    comment: str = "auto"
    fail_on_gate: bool = True
    baseline: str | None = None
    args: list[str] = field(default_factory=list)
    gates: list[str] = field(default_factory=list)  # the `gate` input: one `--gate` per line
    comment_key: str | None = None
    results: list[str] = field(default_factory=list)
    pr_number: int | None = None


def get_input(env: Mapping[str, str], name: str, default: str = "") -> str:
    """``INPUT_<NAME>`` as GitHub sets it (hyphens kept), falling back to underscores for local shells."""
    key = "INPUT_" + name.upper().replace(" ", "_")
    value = env.get(key)
    if value is None:
        value = env.get(key.replace("-", "_"))
    return default if value is None or value.strip() == "" else value.strip()


def _bool(name: str, raw: str) -> bool:
    low = raw.lower()
    if low in ("true", "yes", "1", "on"):
        return True
    if low in ("false", "no", "0", "off"):
        return False
    raise InputError(f"input '{name}' must be true or false, got {raw!r}")


def resolve_suites(spec: str) -> list[str]:
    """The suite files named by the ``suite`` input: paths or globs, one per line."""
    if not spec:
        raise InputError(
            "input 'suite' is required: a suite YAML path or a glob such as evals/**/suite.yaml"
        )
    found: list[str] = []
    for pattern in (p.strip() for p in spec.splitlines()):
        if not pattern:
            continue
        if glob.has_magic(pattern):
            matches = sorted(m for m in glob.glob(pattern, recursive=True) if os.path.isfile(m))
            if not matches:
                raise InputError(f"input 'suite': the glob {pattern!r} matches no file")
            found += [m for m in matches if m not in found]
        elif pattern not in found:
            found.append(pattern)
    return found


def resolve_results(spec: str) -> list[str]:
    """Finished results folders named by the ``results`` input (paths or globs, one per line)."""
    found: list[str] = []
    for pattern in (p.strip() for p in spec.splitlines()):
        if not pattern:
            continue
        matches = (
            sorted(glob.glob(pattern, recursive=True)) if glob.has_magic(pattern) else [pattern]
        )
        folders = [m for m in matches if (Path(m) / "summary.json").is_file()]
        if not folders:
            raise InputError(f"input 'results': no summary.json in {pattern!r}")
        found += [f for f in folders if f not in found]
    return found


def parse_inputs(env: Mapping[str, str]) -> Inputs:
    """Read and check every input; raise InputError naming the input at fault."""
    comment = get_input(env, "comment", "auto").lower()
    if comment not in ("auto", "always", "never"):
        raise InputError(f"input 'comment' must be auto, always or never, got {comment!r}")
    raw_max = get_input(env, "max-concurrent")
    max_concurrent = None
    if raw_max:
        if not (raw_max.isascii() and raw_max.isdigit()) or int(raw_max) < 1:
            raise InputError(f"input 'max-concurrent' must be a positive integer, got {raw_max!r}")
        max_concurrent = int(raw_max)
    results = resolve_results(get_input(env, "results"))
    raw_pr = get_input(env, "pr-number")
    if raw_pr and not (raw_pr.isascii() and raw_pr.isdigit()):
        raise InputError(f"input 'pr-number' must be a pull request number, got {raw_pr!r}")
    try:
        args = shlex.split(get_input(env, "args"))
    except ValueError as exc:
        raise InputError(f"input 'args' cannot be split like a shell line: {exc}") from None
    return Inputs(
        suites=[] if results else resolve_suites(get_input(env, "suite")),
        output_dir=Path(get_input(env, "output-dir", "ci-evals-results")),
        max_concurrent=max_concurrent,
        token=get_input(env, "github-token") or None,
        comment=comment,
        fail_on_gate=_bool("fail-on-gate", get_input(env, "fail-on-gate", "true")),
        baseline=get_input(env, "baseline") or None,
        args=args,
        gates=[g.strip() for g in get_input(env, "gate").splitlines() if g.strip()],
        comment_key=get_input(env, "comment-key") or None,
        results=results,
        pr_number=int(raw_pr) if raw_pr else None,
    )


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
        return f"{self.out_dir.name or 'results'}:{job}:results={self.out_dir}" if self.untrusted \
            else f"{self.name}:{job}"

    def results(self) -> Iterator[dict[str, Any]]:
        if self.untrusted:
            from ci_evals.reports import artifact

            return artifact.iter_results(self.out_dir)
        from ci_evals.reports.summary import iter_results

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


def cli_args(inputs: Inputs, suite_file: str, out_dir: Path, baseline: str | None) -> list[str]:
    """The ``ci-evals run`` command line for one suite."""
    argv = ["run", suite_file, "--output", str(out_dir)]
    if inputs.max_concurrent:
        argv += ["--max-concurrent", str(inputs.max_concurrent)]
    if baseline:
        argv += ["--baseline", baseline]
    for gate in inputs.gates:
        argv += ["--gate", gate]
    return argv + inputs.args


def run_cli(argv: list[str]) -> tuple[int, str]:
    """Run the normal CLI in-process; (exit code, tail of what it wrote to stderr)."""
    from ci_evals.cli import main as cli_main

    tail = _Tail(sys.stderr)
    try:
        with contextlib.redirect_stderr(tail):
            rc = cli_main(argv)
    except SystemExit as exc:
        rc = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else EXIT_CONFIG)
    except Exception as exc:  # the CLI maps its own errors; anything left is ours
        tail.write(f"internal error: {type(exc).__name__}: {exc}\n")
        rc = EXIT_INTERNAL
    return int(rc or 0), tail.buf


def run_suite(inputs: Inputs, suite_file: str, several: bool, slug: str | None = None) -> SuiteRun:
    """Run one suite inside a log group and read back its summary (``slug``: its subfolder)."""
    from ci_evals.commands import suite_slug

    slug = slug or suite_slug(suite_file)
    out_dir = inputs.output_dir / slug if several else inputs.output_dir
    argv = cli_args(inputs, suite_file, out_dir, baseline_for(inputs.baseline, slug, several))
    command("group", f"ci-evals {shlex.join(argv)}")
    # Model output may reach the log: switch workflow commands off so a line such as
    # "::error::" or "::stop-commands::" in it is printed, never obeyed.
    from ci_evals.workflow import commands_stopped

    try:
        with commands_stopped(force=True):
            rc, tail = run_cli(argv)
    finally:
        command("endgroup")
    summary = None
    summary_file = out_dir / "summary.json"
    if summary_file.exists() and (rc in (EXIT_PASSED, EXIT_GATE_FAILED) or rc in SIGNAL_EXIT.values()):
        try:
            summary = json.loads(summary_file.read_text(encoding="utf-8"))
        except ValueError:
            summary = None
    if rc == EXIT_PASSED and (not isinstance(summary, dict) or summary.get("verdict") != "passed"):
        # exit 0 is a pass only with a summary that says so (suite code calling sys.exit(0) is not)
        tail += "error: ci-evals exited 0 without a summary.json whose verdict is passed; not a pass\n"
        rc = EXIT_INTERNAL if summary is None else EXIT_GATE_FAILED
    return SuiteRun(suite_file, out_dir, rc, summary, tail)


def load_results(folder: str) -> SuiteRun:
    """A finished results folder (another job's artifact, a merged shard folder) to report on.

    It is read as a hostile artifact (ci_evals.results.files, Trust.HOSTILE) and its strings are
    made inert (ci_evals.reports.artifact). A summary.json or results.jsonl that cannot be read,
    is not UTF-8 or JSON, holds NaN, lone surrogates or deep nesting, or has another shape is a
    foreign artifact: one error line naming the file (and line), exit 1, never a pass.
    """
    from ci_evals.errors import ConfigError
    from ci_evals.reports import artifact
    from ci_evals.verdict import exit_code

    try:
        summary = artifact.load_summary(folder)
        artifact.check_results(folder)
        run = SuiteRun(str(summary.get("suite_file") or folder), Path(folder), exit_code(summary), summary,
                       untrusted=True)
        _try_rendering(run)
    except ConfigError as exc:
        return SuiteRun(folder, Path(folder), EXIT_GATE_FAILED, None, f"{FOREIGN}: {exc}", untrusted=True)
    return run


def _try_rendering(run: SuiteRun) -> None:
    """Render what results mode will render, once, turning a crash on a shape the reader let
    through into the foreign-artifact error (the reader checks what the reports read; this
    catches what it does not know yet, before a step summary or comment is half written)."""
    from ci_evals.reports.comment import render_comment
    from ci_evals.results.files import foreign_shape

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
    return render_error_md(f"{run.suite_file}: {_failure_kind(run)}", run.log_tail.strip() or "no output")


def _failure_kind(run: SuiteRun) -> str:
    if run.untrusted:
        return f"{FOREIGN} (exit {run.exit_code})"
    return "configuration error" if run.exit_code == EXIT_CONFIG else f"run failed (exit {run.exit_code})"


def should_comment(mode: str, env: Mapping[str, str], explicit_pr: bool = False) -> bool:
    """``always``; ``never``; ``auto``: on pull_request events or when ``pr-number`` names the PR."""
    if mode in ("always", "never"):
        return mode == "always"
    return explicit_pr or (env.get("GITHUB_EVENT_NAME") or "").startswith("pull_request")


def post_comments(
    inputs: Inputs, runs: list[SuiteRun], env: Mapping[str, str], dry_run: bool
) -> list[str]:
    """Render one comment per suite and upsert it (a dry run posts nothing); the comment URLs."""
    from ci_evals.reports.comment import marker, render_comment
    from ci_evals.reports.github import (
        pr_number_from_event,
        run_url,
        upsert_pr_comment,
        workflow_run_head,
    )

    if dry_run:
        print("ci-evals: dry run, no PR comment posted")
        return []
    if not should_comment(inputs.comment, env, inputs.pr_number is not None):
        return []
    number = inputs.pr_number or pr_number_from_event(env.get("GITHUB_EVENT_PATH"))
    head_sha = None
    if inputs.results and inputs.pr_number is not None and env.get("GITHUB_EVENT_NAME") == "workflow_run":
        head_sha = workflow_run_head(env.get("GITHUB_EVENT_PATH")) or "(no workflow_run.head_sha in the event)"
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
    return code == EXIT_PASSED and verdict == "passed" and bool(runs) and all(
        isinstance(r.summary, dict) and r.summary.get("verdict") == "passed" for r in runs)


def combined_exit(codes: list[int]) -> int:
    """The worst exit code: interruption > internal > configuration > gate failed > passed."""
    return max(codes, default=EXIT_PASSED)


def run_action(env: Mapping[str, str], token: str | None = None) -> int:
    """The action: inputs, suites, step summary, outputs, annotations, comment, exit code.

    ``token`` is the GitHub token when it came through the handover pipe (see ci_evals.handover)
    rather than the environment.
    """
    if env.get("GITHUB_ACTIONS") == "true":  # only GitHub's runner hides this line: elsewhere it prints the key
        for secret in secrets_to_mask(env) + ([token] if token else []):
            command("add-mask", secret)
    summary_path, output_path = env.get("GITHUB_STEP_SUMMARY"), env.get("GITHUB_OUTPUT")
    try:
        inputs = parse_inputs(env)
    except InputError as exc:
        command("error", str(exc), title="ci-evals configuration error")
        append_step_summary(summary_path, render_error_md("action input error", str(exc)))
        set_outputs(output_path, {"passed": "false", "verdict": "errored", "exit-code": str(EXIT_CONFIG)})
        return EXIT_CONFIG
    if token:
        inputs.token = token
    os.environ.pop("INPUT_GITHUB-TOKEN", None)  # user code run by the suite never sees our token
    several = len(inputs.suites) > 1
    from ci_evals.commands import unique_slugs

    slugs = unique_slugs(inputs.suites)
    runs: list[SuiteRun] = []
    for item in inputs.results or inputs.suites:
        run = load_results(item) if inputs.results else run_suite(inputs, item, several, slugs[item])
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
    if code == EXIT_GATE_FAILED and verdict == "failed" and not inputs.fail_on_gate:
        print("ci-evals: the gate failed, but fail-on-gate is false: exiting 0")
        return EXIT_PASSED
    return code


def main(argv: list[str] | None = None, restart: bool | None = None) -> int:
    """``ci-evals action [SUBCOMMAND ...]``: the Action, or the plain CLI when given a subcommand.

    ``restart`` (default: when run from the command line, ``argv`` None) hands the GitHub token
    over to a fresh process without it in the environment (ci_evals.handover); a caller that
    imported the action, such as a test, keeps its own process.
    """
    restart = argv is None if restart is None else restart
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["action"]:
        args = args[1:]
    if args:
        from ci_evals.cli import main as cli_main

        return cli_main(args)
    from ci_evals import handover

    try:
        token = None
        if restart:
            handover.reexec_without_token(os.environ, [sys.executable, "-m", "ci_evals", "action"])
            token = handover.take_token(os.environ)
            handover.make_undumpable()
        return run_action(os.environ, token)
    except Exception as exc:  # the last line of defence: report, summarise, exit 3
        command(
            "error", f"internal error: {type(exc).__name__}: {exc}", title="ci-evals internal error"
        )
        append_step_summary(
            os.environ.get("GITHUB_STEP_SUMMARY"),
            render_error_md("internal error", f"{type(exc).__name__}: {exc}"),
        )
        return EXIT_INTERNAL
