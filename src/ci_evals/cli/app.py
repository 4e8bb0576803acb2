"""The ``ci-evals`` command line: run, validate, merge, report, init, list, schema, action.

Exit codes (ci_evals.run.exits.ExitCode): 0 verdict passed; 1 verdict failed, errored or partial;
2 invalid configuration or input (one line, no traceback); 3 internal error; 128 + n interrupted by
signal n: 129 SIGHUP, 130 SIGINT, 143 SIGTERM.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path

from ci_evals import __version__
from ci_evals._util.redact import ScrubbedStream
from ci_evals.action.help import action_help
from ci_evals.run.exits import ExitCode, keep_stdio, restore_stdio
from ci_evals.run.options import OneLineParser, add_gate_flag, add_run_flags


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="ci-evals", description="A CI-native evaluation gate for LLM agents.")
    p.add_argument("--version", action="version", version=f"ci-evals {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser("run", help="run one or more suites and check their gates")
    run.add_argument("suites", nargs="+", metavar="SUITE", help="suite YAML file(s) or glob(s)")
    add_run_flags(run)
    val = sub.add_parser("validate", help="check suites without calling anything")
    add_gate_flag(val)
    val.add_argument("suites", nargs="+", metavar="SUITE")

    merge = sub.add_parser("merge", help="combine shard result folders into one")
    merge.add_argument("dirs", nargs="+", type=Path, metavar="DIR")
    merge.add_argument("--output", "-o", type=Path, required=True)
    merge.add_argument("--baseline", type=Path, default=None)
    merge.add_argument(
        "--dry-run", action="store_true", help="print the PR comment the merged result gives"
    )

    report = sub.add_parser("report", help="write report.html again from a results folder")
    report.add_argument(
        "dir", type=Path, metavar="DIR", help="a results folder (summary.json, results.jsonl)"
    )
    report.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="a baseline results folder (default: the one summary.json names, if present)",
    )
    report.add_argument(
        "--open", action="store_true", help="open the report in the local web browser"
    )

    init = sub.add_parser(
        "init", help="write a starter suite, dataset, grader and GitHub workflow here"
    )
    init.add_argument(
        "dir",
        nargs="?",
        type=Path,
        default=Path("."),
        metavar="DIR",
        help="the repository to set up (default: the current folder)",
    )
    init.add_argument(
        "--target",
        choices=["command", "model", "letta", "http"],
        default=None,
        help="what answers the samples (default: command, a stand-in agent that runs offline; "
        "asked on a terminal)",
    )
    init.add_argument("--force", action="store_true", help="overwrite files that already exist")
    init.add_argument(
        "--action",
        default="OWNER/ci-evals@v1",
        metavar="ACCOUNT/REPO@REF",
        help="the Action the workflow uses (default OWNER/ci-evals@v1: replace OWNER)",
    )

    sub.add_parser("list", help="list targets, extractors and graders")
    sub.add_parser("schema", help="print the suite JSON Schema")
    sub.add_parser("action", help="GitHub Action mode (reads INPUT_* variables)", add_help=False)
    return p


def load_dotenv(path: Path = Path(".env")) -> None:
    """Load ``./.env`` like letta-evals 0.18+: variables already set win, and nothing is printed.

    Not in CI (``CI`` set): a ``.env`` committed in a pull request must not redirect the
    workflow's API keys (e.g. to another ``OPENAI_BASE_URL``); set variables in the workflow.
    """
    if not path.is_file():
        return

    if os.environ.get("CI", "").lower() not in ("", "0", "false"):
        print(
            "note: ./.env not loaded: CI is set (set variables in the workflow instead)",
            file=sys.stderr,
        )
        return
    import logging

    from dotenv import load_dotenv as _load

    logging.getLogger("dotenv.main").setLevel(logging.ERROR)  # its parse warnings quote the line
    _load(path, override=False)


def main(argv: list[str] | None = None) -> int:
    from_command_line = argv is None
    if (
        from_command_line
    ):  # what Python prints itself (an uncaught exception's traceback) is scrubbed too
        if not isinstance(sys.stderr, ScrubbedStream):
            sys.stderr = ScrubbedStream(sys.stderr)
    code = _main(list(sys.argv[1:] if argv is None else argv), from_command_line)
    if from_command_line:  # the process ends now: see end_fast
        end_fast(code)
    return code


def end_fast(code: int) -> None:
    """Spare the ending process the interpreter's last garbage collections: each scans every object
    again (0.1-0.15 s after a 50-sample run, more than its reports) to free memory the system takes
    back anyway. ``gc.freeze()`` moves them out of the collector's sight (bench/README.md, round 10).

    Then, when nothing but ci-evals ran in this process (no user file was executed: its objects,
    an open file's buffered writes, are finished by the teardown) and no thread is left that exit
    would wait for, the teardown itself is skipped: atexit's callbacks run, stdout and stderr are
    flushed, and the process exits with ``code`` (``os._exit``). Tearing down some 900 modules one
    by one took 10-15 ms of every run's end, waited for by the user (round 13). A flush that fails
    (a closed pipe) leaves the exit to Python, which reports it as it always did."""
    import gc

    gc.freeze()
    if _others_to_finish():
        return
    if not _flushed():
        return
    import atexit

    atexit._run_exitfuncs()  # clears them: an exit by Python after this would not run them twice
    if _flushed():
        os._exit(code)


def _flushed() -> bool:
    """Flush stdout and stderr (ours and Python's own); False when one cannot be (a closed pipe)."""
    try:
        for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            if stream is not None:
                stream.flush()
    except (OSError, ValueError):
        return False
    return True


def _others_to_finish() -> bool:
    """Whether this process holds work that only the interpreter's own exit finishes: a user
    file's objects, or a thread it would wait for (any but a daemon)."""
    import threading

    usercode = sys.modules.get("ci_evals.usercode.load")
    if usercode is not None and usercode.ran_user_code():
        return True
    main = threading.main_thread()
    return any(not t.daemon for t in threading.enumerate() if t is not main)


def _main(argv: list[str], from_command_line: bool) -> int:
    if argv and argv[0] == "action":
        if argv[1:] in (["-h"], ["--help"]):
            print(action_help(), end="")
            return 0
        if argv[
            1:
        ]:  # `ci-evals action run ...` (the image's entrypoint with a command): the plain CLI
            return _main(argv[1:], from_command_line)
        # start time: the Action's modules load only when it runs
        from ci_evals.action.main import main as action_main

        return action_main(restart=from_command_line)
    args = build_parser().parse_args(argv)
    if args.command is None:
        build_parser().print_help()
        return ExitCode.CONFIG
    load_dotenv()
    if (
        from_command_line and args.command in GUARDED
    ):  # the suite's code runs: a child does the work
        return guarded_child(lambda: _dispatch(args, from_command_line))
    return _dispatch(args, from_command_line)


def guarded_child(work: Callable[[], int]) -> int:
    """``work()`` with our own stdout and stderr (user code closing them silences nothing), in a
    child that must report a verdict before exit 0 counts (ci_evals._util.forks.supervised)."""
    from ci_evals._util.forks import supervised  # start time: loaded only to run user code

    keep_stdio()
    try:
        return supervised(work)
    finally:
        restore_stdio()


GUARDED = ("run", "validate")
"""The commands that run or import the suite's code: exit 0 only with a verdict (ci_evals._util.forks.supervised)."""


def _dispatch(args: argparse.Namespace, from_command_line: bool) -> int:
    from ci_evals.cli import commands  # start time: --version and --help load no command

    return commands.dispatch(args, from_command_line)
