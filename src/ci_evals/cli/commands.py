"""The work behind ``ci-evals run`` and the dispatch of every command (kept out of ``cli.app`` so
``--version`` imports nothing heavy); the others are in :mod:`ci_evals.cli.others`."""

from __future__ import annotations

import json
import os
import sys
from argparse import Namespace
from collections.abc import Callable
from pathlib import Path
from typing import TypedDict

from ci_evals._util.errors import ConfigError
from ci_evals._util.redact import scrub
from ci_evals._util.workflow import commands_stopped
from ci_evals.action.handover import make_undumpable
from ci_evals.results.layout import DEFAULT_OUTPUT, expand_suites, unique_slugs
from ci_evals.results.writer import write_text
from ci_evals.run.exits import INTERRUPTED, ExitCode, guarded
from ci_evals.run.options import SuiteOptions, absolute
from ci_evals.run.session import run_suite


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


def _other(name: str) -> Callable[[Namespace], int]:
    """The command ``name`` of :mod:`ci_evals.cli.others`, imported when it runs."""

    def command(args: Namespace) -> int:
        from ci_evals.cli import others  # start time: a run imports none of the other commands

        return others.COMMANDS[name](args)

    return command


COMMANDS = {
    "run": cmd_run,
    **{name: _other(name) for name in ("validate", "merge", "report", "init", "list", "schema")},
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
