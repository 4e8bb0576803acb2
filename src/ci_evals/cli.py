"""The ``ci-evals`` command line: run, validate, merge, report, init, list, schema, action.

Exit codes: 0 verdict passed; 1 verdict failed, errored or partial; 2 invalid configuration or
input (one line, no traceback); 3 internal error; 128 + n interrupted by signal n: 129 SIGHUP, 130 SIGINT, 143 SIGTERM.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

EXIT_PASS, EXIT_GATE, EXIT_CONFIG, EXIT_INTERNAL = 0, 1, 2, 3


def _positive(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {n}")
    return n


def _non_negative(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {n}")
    return n


def _shard(text: str) -> tuple[int, int]:
    k, sep, n = text.partition("/")
    if not sep or not (k + n).isascii() or not k.isdigit() or not n.isdigit() or not 1 <= int(k) <= int(n):
        raise argparse.ArgumentTypeError(f"expected K/N with 1 <= K <= N, got {text!r}")
    return int(k), int(n)


def _finite_positive(text: str) -> float | None:
    """``text`` as a finite number above 0, else None."""
    try:
        value = float(text)
    except ValueError:
        return None
    return value if 0 < value < float("inf") else None


def _positive_float(text: str) -> float:
    value = _finite_positive(text)
    if value is None:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def _rate(text: str) -> tuple[str, float]:
    """``N`` (every endpoint) or ``PROVIDER=N`` / ``URL=N``."""
    key, sep, number = text.rpartition("=")
    key = key.strip() if sep else "*"
    value = _finite_positive(number)
    if value is None:
        raise argparse.ArgumentTypeError(f"expected a positive number, optionally after PROVIDER= or URL=, got {text!r}")
    if key not in ("*", "openai", "anthropic", "google") and not key.startswith(("http://", "https://")):
        raise argparse.ArgumentTypeError(f"{key!r} is not a provider (openai, anthropic, google) or a base URL")
    return key, value


class _Parser(argparse.ArgumentParser):
    """argparse whose usage errors are one line (exit 2), like every other configuration error."""

    def error(self, message: str):  # argparse's hook; the usage block is one --help away
        self.exit(EXIT_CONFIG, f"error: {self.prog}: {message} (see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    from ci_evals import __version__

    p = _Parser(prog="ci-evals", description="A CI-native evaluation gate for LLM agents.")
    p.add_argument("--version", action="version", version=f"ci-evals {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser("run", help="run one or more suites and check their gates")
    run.add_argument("suites", nargs="+", metavar="SUITE", help="suite YAML file(s) or glob(s)")
    run.add_argument("--output", "-o", type=Path, default=None, help="results folder (default ci-evals-results/)")
    run.add_argument("--max-concurrent", type=_positive, default=None, help="samples in flight (default: YAML, else 10)")
    run.add_argument("--max-samples", type=_non_negative, default=None, help="run only the first N samples")
    run.add_argument("--sample-tags", default=None, help="comma-separated tags; run samples having any of them")
    run.add_argument("--sample-id", action="append", default=None, metavar="ID",
                     help="run only the sample with this id (repeatable): a partial run")
    run.add_argument("--sample-pattern", default=None, metavar="GLOB_OR_REGEX",
                     help="run only samples whose id matches this glob (capital-*), or this regex with "
                          "re: (re:^cap): a partial run")
    run.add_argument("--only-failed", type=Path, default=None, metavar="FROM_RESULTS",
                     help="re-run only the failing and errored samples of an earlier results folder "
                          "(results go to FROM_RESULTS-rerun/ unless --output): a partial run")
    run.add_argument("--num-runs", type=_positive, default=None, help="repeat each sample N times")
    run.add_argument("--dry-run", action="store_true", help="run everything but post nothing; print the PR comment")
    run.add_argument("--no-cache", action="store_true", help="do not read or write the LLM response cache")
    run.add_argument("--baseline", type=Path, default=None, help="an earlier results folder to compare with")
    run.add_argument("--shard", type=_shard, default=None, help="run shard K of N (stable hash of the sample id)")
    run.add_argument("--resume", type=Path, default=None, metavar="DIR",
                     help="finish an interrupted run in DIR (only missing samples run)")
    run.add_argument("--max-errors", type=_non_negative, default=None, metavar="N",
                     help="errored samples each gate (and a run without gates) tolerates (default: YAML, else 0)")
    run.add_argument("--quiet", "-q", action="store_true", help="no progress and no table; just the verdict")
    run.add_argument("--rpm", type=_rate, action="append", default=None, metavar="[PROVIDER|URL=]N",
                     help="requests per minute an LLM endpoint allows (your tier); e.g. 500 or anthropic=50")
    run.add_argument("--tpm", type=_rate, action="append", default=None, metavar="[PROVIDER|URL=]N",
                     help="tokens per minute an LLM endpoint allows; e.g. 200000 or openai=30000")
    run.add_argument("--max-wait", type=_positive_float, default=None, metavar="SECONDS",
                     help="how long one LLM call may stay throttled (429) before it errors (default 600)")
    for cmd in (run, val := sub.add_parser("validate", help="check suites without calling anything")):
        cmd.add_argument("--gate", action="append", default=None, metavar="GATE",
                         help='add a gate, "METRIC [AGGREGATION] OP VALUE", e.g. "reward avg_score gte 0.75" '
                              "(repeatable)")
    run.add_argument("--model-handle", default=None, metavar="HANDLE",
                     help="run only this one of the target's model_handles")
    val.add_argument("suites", nargs="+", metavar="SUITE")

    merge = sub.add_parser("merge", help="combine shard result folders into one")
    merge.add_argument("dirs", nargs="+", type=Path, metavar="DIR")
    merge.add_argument("--output", "-o", type=Path, required=True)
    merge.add_argument("--baseline", type=Path, default=None)
    merge.add_argument("--dry-run", action="store_true", help="print the PR comment the merged result gives")

    report = sub.add_parser("report", help="write report.html again from a results folder")
    report.add_argument("dir", type=Path, metavar="DIR", help="a results folder (summary.json, results.jsonl)")
    report.add_argument("--baseline", type=Path, default=None,
                        help="a baseline results folder (default: the one summary.json names, if present)")
    report.add_argument("--open", action="store_true", help="open the report in the local web browser")

    init = sub.add_parser("init", help="write a starter suite, dataset, grader and GitHub workflow here")
    init.add_argument("dir", nargs="?", type=Path, default=Path("."), metavar="DIR",
                      help="the repository to set up (default: the current folder)")
    init.add_argument("--target", choices=["command", "model", "letta", "http"], default=None,
                      help="what answers the samples (default: command, a stand-in agent that runs offline; "
                           "asked on a terminal)")
    init.add_argument("--force", action="store_true", help="overwrite files that already exist")
    init.add_argument("--action", default="OWNER/ci-evals@v1", metavar="ACCOUNT/REPO@REF",
                      help="the Action the workflow uses (default OWNER/ci-evals@v1: replace OWNER)")

    sub.add_parser("list", help="list targets, extractors and graders")
    sub.add_parser("schema", help="print the suite JSON Schema")
    sub.add_parser("action", help="GitHub Action mode (reads INPUT_* variables)", add_help=False)
    return p


def expand_suites(patterns: list[str]) -> list[Path]:
    """Paths and globs -> suite files, in order, without duplicates. A glob matching nothing is an error."""
    import glob

    from ci_evals.errors import ConfigError

    out: list[Path] = []
    for pat in patterns:
        if any(ch in pat for ch in "*?["):
            found = sorted(glob.glob(pat, recursive=True))
            if not found:
                raise ConfigError(f"no suite file matches '{pat}'")
            out.extend(Path(f) for f in found)
        else:
            out.append(Path(pat))
    seen: set[Path] = set()
    return [p for p in out if not (p.resolve() in seen or seen.add(p.resolve()))]


def load_dotenv(path: Path = Path(".env")) -> None:
    """Load ``./.env`` like letta-evals 0.18+: variables already set win, and nothing is printed.

    Not in CI (``CI`` set): a ``.env`` committed in a pull request must not redirect the
    workflow's API keys (e.g. to another ``OPENAI_BASE_URL``); set variables in the workflow.
    """
    if not path.is_file():
        return
    import os

    if os.environ.get("CI", "").lower() not in ("", "0", "false"):
        print("note: ./.env not loaded: CI is set (set variables in the workflow instead)", file=sys.stderr)
        return
    import logging

    from dotenv import load_dotenv as _load

    logging.getLogger("dotenv.main").setLevel(logging.ERROR)  # its parse warnings quote the line
    _load(path, override=False)


def main(argv: list[str] | None = None) -> int:
    from_command_line = argv is None
    if from_command_line:  # what Python prints itself (an uncaught exception's traceback) is scrubbed too
        from ci_evals.redact import ScrubbedStream

        if not isinstance(sys.stderr, ScrubbedStream):
            sys.stderr = ScrubbedStream(sys.stderr)
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "action":
        if argv[1:] in (["-h"], ["--help"]):
            from ci_evals.action_help import action_help

            print(action_help(), end="")
            return EXIT_PASS
        from ci_evals.action import main as action_main

        return action_main(argv[1:], restart=from_command_line)
    args = build_parser().parse_args(argv)
    if args.command is None:
        build_parser().print_help()
        return EXIT_CONFIG
    load_dotenv()
    if from_command_line and args.command == "run":  # the programs a run starts never read our environ
        from ci_evals.handover import make_undumpable

        make_undumpable()
    if os.environ.get("GITHUB_ACTIONS") == "true":  # model output must not become a workflow command
        from ci_evals.workflow import commands_stopped

        with commands_stopped():
            return _dispatch(args)
    return _dispatch(args)


def _dispatch(args) -> int:
    from ci_evals.errors import ConfigError

    try:
        if args.command == "run":
            from ci_evals.commands import cmd_run

            return cmd_run(args)
        if args.command == "validate":
            from ci_evals.commands import cmd_validate

            return cmd_validate(args)
        if args.command == "merge":
            from ci_evals.commands import cmd_merge

            return cmd_merge(args)
        if args.command == "report":
            from ci_evals.commands import cmd_report

            return cmd_report(args)
        if args.command == "init":
            from ci_evals.scaffold import cmd_init

            return cmd_init(args)
        if args.command == "list":
            from ci_evals.commands import cmd_list

            return cmd_list()
        if args.command == "schema":
            import json

            from ci_evals.schema import suite_schema

            print(json.dumps(suite_schema(), indent=2))
            return EXIT_PASS
    except ConfigError as exc:
        from ci_evals.redact import scrub

        print(scrub(f"error: {exc}"), file=sys.stderr)
        return EXIT_CONFIG
    except KeyboardInterrupt:
        return 130
    except (SystemExit, GeneratorExit) as exc:  # past argparse, only code of the suite's raises these
        from ci_evals.redact import scrub

        print(scrub(f"error: suite code raised {type(exc).__name__}({exc}) outside any sample; "
                    "no summary was written"), file=sys.stderr)
        return EXIT_INTERNAL
    except Exception:  # a bug of ours: say so, with the traceback, and exit 3
        import traceback

        from ci_evals.redact import scrub

        print(scrub(traceback.format_exc()), end="", file=sys.stderr)
        print("internal error: this is a bug in ci-evals, please report it with the traceback above",
              file=sys.stderr)
        return EXIT_INTERNAL
    return EXIT_CONFIG
