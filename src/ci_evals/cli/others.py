"""The commands besides ``run``: ``validate``, ``list``, ``report`` and ``schema`` (``merge``'s and
``init``'s work is in :mod:`ci_evals.cli.merge` and :mod:`ci_evals.cli.scaffold`). Apart from
:mod:`ci_evals.cli.commands` so that a run's start imports none of them (issue 41 item 7)."""

from __future__ import annotations

import json
import sys
from argparse import Namespace
from pathlib import Path

from ci_evals._util.errors import ConfigError
from ci_evals._util.redact import scrub
from ci_evals._util.registry import GRADER_KINDS, TARGETS
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
from ci_evals.results.layout import expand_suites
from ci_evals.run.exits import ExitCode
from ci_evals.suite.dialects import DIALECTS
from ci_evals.suite.loader import load_suite
from ci_evals.suite.schema import suite_schema


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
    "validate": cmd_validate,
    "merge": cmd_merge,
    "report": cmd_report,
    "init": cmd_init,
    "list": lambda args: cmd_list(),
    "schema": cmd_schema,
}
"""What each of these commands runs (``cli.commands.dispatch`` imports this module for them)."""
