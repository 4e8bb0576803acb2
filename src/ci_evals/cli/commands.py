"""The work behind each CLI command (kept out of ``cli.app`` so ``--version`` imports nothing heavy);
``merge``'s is :mod:`ci_evals.cli.merge`."""

from __future__ import annotations

import json
import os
import sys
from argparse import Namespace
from pathlib import Path
from typing import TypedDict

from ci_evals._util.errors import ConfigError
from ci_evals._util.redact import scrub
from ci_evals._util.registry import GRADER_KINDS, TARGETS
from ci_evals._util.workflow import commands_stopped
from ci_evals.action.handover import make_undumpable
from ci_evals.cli.merge import cmd_merge
from ci_evals.cli.scaffold import cmd_init
from ci_evals.gating.baseline import compare_folder
from ci_evals.gating.letta_gates import describe as describe_typed
from ci_evals.graders.extractors import BUILTINS
from ci_evals.graders.tool import BUILTIN_FUNCTIONS
from ci_evals.reports.html import write_report
from ci_evals.results.files import (
    RESULTS,
    Trust,
    baseline_reference,
    check_records,
    foreign_shape,
    read_summary,
)
from ci_evals.results.layout import DEFAULT_OUTPUT, expand_suites, unique_slugs
from ci_evals.results.writer import write_text
from ci_evals.run.exits import INTERRUPTED, ExitCode, guarded
from ci_evals.run.options import SuiteOptions, absolute
from ci_evals.run.session import run_suite
from ci_evals.suite.dialects import DIALECTS
from ci_evals.suite.loader import load_suite
from ci_evals.suite.schema import suite_schema


class SuiteRow(TypedDict):
    """One suite of a multi-suite ``run``, as ``suites.json`` lists it."""

    suite_file: str
    exit_code: int
    passed: bool
    verdict: str | None  # "config_error" when the suite did not load
    suite: str | None
    output: str | None  # its results folder, when it wrote a summary


def cmd_run(args: Namespace) -> int:
    paths = expand_suites(args.suites)
    if len(paths) == 1:
        return run_suite(paths[0], SuiteOptions.from_namespace(args))[0]
    if args.resume:
        raise ConfigError("--resume takes a single suite")
    if getattr(args, "only_failed", None):
        raise ConfigError(
            "--only-failed takes a single suite (the one whose results folder it names)"
        )
    base = absolute(args.output or DEFAULT_OUTPUT)  # resolved once: a suite's code may chdir
    common = os.path.commonpath([str(p.resolve().parent) for p in paths])
    slugs = unique_slugs([p.resolve() for p in paths], common)
    folders = {path: base / slugs[str(path.resolve())] for path in paths}
    codes: list[int] = []
    rows: list[SuiteRow] = []
    cwd = os.getcwd()
    for path in paths:
        os.chdir(
            cwd
        )  # each suite from the folder the command started in, whatever the last one's code did
        try:
            code, summary, out = run_suite(path, SuiteOptions.from_namespace(args), folders[path])
        except ConfigError as exc:
            print(scrub(f"error: {exc}"), file=sys.stderr)
            code, summary = ExitCode.CONFIG, None
        codes.append(code)
        rows.append(
            {
                "suite_file": str(path),
                "exit_code": code,
                "passed": bool(summary and summary["gate"] and summary["gate"]["passed"]),
                "verdict": summary["verdict"] if summary else "config_error",
                "suite": summary["suite"] if summary else None,
                "output": str(out) if summary else None,
            }
        )
        if code in INTERRUPTED:
            break
    base.mkdir(parents=True, exist_ok=True)
    write_text(base / "suites.json", json.dumps(rows, indent=2) + "\n")
    # One combined report: each suite's summary.md in turn (a failed load gets its error line).
    parts = [
        (Path(r["output"]) / "summary.md").read_text(encoding="utf-8")
        if r["output"]
        else f"## {r['suite_file']}\n\nInvalid configuration (exit code {r['exit_code']}).\n"
        for r in rows
    ]
    write_text(base / "summary.md", "\n\n---\n\n".join(parts))
    print(
        "\nAll suites: "
        + ", ".join(
            f"{Path(r['suite_file']).name} {str(r['verdict']).upper().replace('_', ' ')}"
            for r in rows
        )
    )
    interrupted = [c for c in codes if c in INTERRUPTED]
    return interrupted[0] if interrupted else max(codes)


def cmd_validate(args: Namespace) -> int:
    worst = ExitCode.PASSED
    for path in expand_suites(args.suites):
        try:
            suite = load_suite(
                path, offline=True, cache_dir=False, extra_gates=getattr(args, "gate", None)
            )
        except ConfigError as exc:
            print(scrub(f"error: {exc}"), file=sys.stderr)
            worst = ExitCode.CONFIG
            continue
        graders = ", ".join(
            f"{n} ({s.grader.spec.kind}, {s.extractor.name}, pass {s.rule_text}"
            + (f", {s.grader.describe()}" if hasattr(s.grader, "describe") else "")
            + ")"
            for n, s in suite.graders.items()
        )
        gates = "; ".join(g.describe() for g in suite.gates) or "none"
        gates = (
            "; ".join(
                ([gates] if suite.gates else []) + [describe_typed(g) for g in suite.typed_gates]
            )
            or "none (add one with --gate)"
        )
        if suite.reward is not None:
            graders += f"; {suite.reward.describe()}"
        print(
            f"{path}: valid. {suite.dataset.count} samples ({suite.dataset.total} in "
            f"{suite.dataset.path.name}), target {suite.spec.target['kind']}, graders: {graders}; gates: {gates}"
        )
        if suite.dialect != "ci-evals":
            print(f"  read as a {DIALECTS[suite.dialect]} suite")
    return worst


def cmd_list() -> int:
    print("Targets:     " + ", ".join(TARGETS.names()))
    print("Grader kinds: " + ", ".join(GRADER_KINDS.names()))
    print("Tool functions (kind: tool): " + ", ".join(BUILTIN_FUNCTIONS) + ", or file.py:function")
    print("Extractors:")
    for name, (_, _, doc) in BUILTINS.items():
        print(f"  {name:16} {doc}")
    print("  file.py:function  a custom @extractor")
    return 0


def cmd_report(args: Namespace) -> int:
    """``ci-evals report DIR``: rebuild DIR/report.html from its summary.json and results.jsonl.

    DIR may come from elsewhere (a downloaded artifact): it is read as another run's folder, so a
    bad line is one error naming it, and the baseline folder its summary.json names is read only
    inside the current directory (see ci_evals.results.files.baseline_reference).
    """
    folder: Path = args.dir
    summary = read_summary(folder, Trust.OTHER)  # a missing or foreign one: one line, exit 2
    if not (folder / RESULTS).is_file():
        raise ConfigError("no results.jsonl in this folder", file=str(folder))
    baseline = args.baseline
    if baseline is not None and not (baseline / RESULTS).is_file():
        raise ConfigError("no results.jsonl in the baseline folder", file=str(baseline))
    if baseline is None:
        baseline, why = baseline_reference(summary, folder, Path.cwd())
        if why:
            print(
                f"note: {folder / 'summary.json'}: {why} (pass --baseline to compare)",
                file=sys.stderr,
            )
    comparison = None
    if baseline is None:
        check_records(folder / RESULTS, Trust.OTHER)  # every line checked before any is rendered
    else:  # both folders read once (and checked), through the code a run compares with
        comparison = compare_folder(summary, folder, baseline, Trust.OTHER)
        if comparison.missing:
            print(f"note: not compared with the baseline: {comparison.missing}", file=sys.stderr)
    with foreign_shape(str(folder / "summary.json"), "summary.json"):
        report = write_report(folder, summary, comparison, trust=Trust.OTHER)
    print(f"Report: {report}")
    if args.open:
        import webbrowser

        if not webbrowser.open(report.resolve().as_uri()):
            print("could not open a browser; open the file above yourself", file=sys.stderr)
    return 0


def cmd_schema(args: Namespace) -> int:
    print(json.dumps(suite_schema(), indent=2))
    return 0


COMMANDS = {
    "run": cmd_run,
    "validate": cmd_validate,
    "merge": cmd_merge,
    "report": cmd_report,
    "init": cmd_init,
    "list": lambda args: cmd_list(),
    "schema": cmd_schema,
}
"""What each ``ci-evals`` command runs (``cli.app`` parses, this does the work)."""


def dispatch(args: Namespace, from_command_line: bool) -> int:
    """Run the parsed command; what escapes it becomes an exit code (ci_evals.run.exits.guarded)."""
    if (
        from_command_line and args.command == "run"
    ):  # the programs a run starts never read our environ
        make_undumpable()
    if (
        os.environ.get("GITHUB_ACTIONS") == "true"
    ):  # model output must not become a workflow command
        with commands_stopped():
            return guarded(lambda: COMMANDS[args.command](args))
    return guarded(lambda: COMMANDS[args.command](args))
