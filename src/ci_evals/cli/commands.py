"""The work behind each CLI command (kept out of ``cli.app`` so ``--version`` imports nothing heavy)."""

from __future__ import annotations

import json
import os
import sys
from argparse import Namespace
from pathlib import Path
from typing import Any

from ci_evals._util.bounds import check_output_folder
from ci_evals._util.errors import ConfigError
from ci_evals._util.redact import scrub
from ci_evals._util.registry import GRADER_KINDS, TARGETS
from ci_evals._util.workflow import commands_stopped
from ci_evals.action.handover import make_undumpable
from ci_evals.cli.scaffold import cmd_init
from ci_evals.gating.aggregate import Aggregator
from ci_evals.gating.baseline import Baseline
from ci_evals.gating.letta_gates import describe as describe_typed
from ci_evals.gating.summary import summarize
from ci_evals.graders.extractors import BUILTINS
from ci_evals.graders.tool import BUILTIN_FUNCTIONS
from ci_evals.reports import console
from ci_evals.reports.html import write_report
from ci_evals.reports.write import write_outputs
from ci_evals.results.files import (
    RESULTS,
    Trust,
    baseline_reference,
    check_records,
    foreign_shape,
    records,
)
from ci_evals.results.files import read_summary as read
from ci_evals.results.layout import DEFAULT_OUTPUT, expand_suites, unique_slugs
from ci_evals.results.line import encode_line
from ci_evals.results.writer import open_atomic, refuse_links, write_text
from ci_evals.run.exits import INTERRUPTED, ExitCode, guarded
from ci_evals.run.options import SuiteOptions, absolute
from ci_evals.run.session import exit_code, print_comment, run_suite
from ci_evals.suite.dialects import DIALECTS
from ci_evals.suite.loader import load_suite
from ci_evals.suite.schema import suite_schema


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
    import os

    common = os.path.commonpath([str(p.resolve().parent) for p in paths])
    slugs = unique_slugs([p.resolve() for p in paths], common)
    folders = {path: base / slugs[str(path.resolve())] for path in paths}
    codes, rows, cwd = [], [], os.getcwd()
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
                "passed": bool(summary and summary["gate"]["passed"]),
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
            f"{Path(r['suite_file']).name} {r['verdict'].upper().replace('_', ' ')}" for r in rows
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


def read_summary(folder: Path) -> dict[str, Any]:
    """A results folder's summary.json given on the command line (another run's: checked); a
    missing, unreadable or foreign one is a one-line ConfigError."""
    return dict(read(folder, Trust.OTHER))


def cmd_report(args: Namespace) -> int:
    """``ci-evals report DIR``: rebuild DIR/report.html from its summary.json and results.jsonl.

    DIR may come from elsewhere (a downloaded artifact): it is read as another run's folder, so a
    bad line is one error naming it, and the baseline folder its summary.json names is read only
    inside the current directory (see ci_evals.results.files.baseline_reference).
    """
    folder: Path = args.dir
    summary = read_summary(folder)
    if not (folder / RESULTS).is_file():
        raise ConfigError("no results.jsonl in this folder", file=str(folder))
    check_records(folder / RESULTS, Trust.OTHER)
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
    if baseline is not None:
        check_records(baseline / RESULTS, Trust.OTHER, what="baseline results.jsonl")
    with foreign_shape(str(folder / "summary.json"), "summary.json"):
        report = write_report(folder, summary, baseline, trust=Trust.OTHER)
    print(f"Report: {report}")
    if args.open:
        import webbrowser

        if not webbrowser.open(report.resolve().as_uri()):
            print("could not open a browser; open the file above yourself", file=sys.stderr)
    return 0


def cmd_merge(args: Namespace) -> int:
    summaries = []
    for d in args.dirs:
        summaries.append(read_summary(d))
    check_output_folder(args.output)
    refuse_overlap(args.output, [*args.dirs, *([args.baseline] if args.baseline else [])])
    refuse_links(args.output)
    config = summaries[0].get("config")
    for d, s in zip(args.dirs, summaries, strict=True):
        if s.get("config") != config or s.get("suite") != summaries[0].get("suite"):
            raise ConfigError(
                "this folder holds results of a different suite or configuration", file=str(d)
            )
    missing = shard_gaps(args.dirs, summaries)
    baseline = Baseline(args.baseline) if args.baseline else None
    with foreign_shape(str(args.dirs[0] / "summary.json"), "summary.json"):
        agg = Aggregator(config, keep_outcomes=baseline is not None)
    if baseline is not None:
        baseline.attach(agg, suite=summaries[0].get("suite"))
    args.output.mkdir(parents=True, exist_ok=True)
    seen: set[tuple] = set()
    with open_atomic(args.output / RESULTS) as fh:
        for d, s in zip(args.dirs, summaries, strict=True):
            read = 0
            for rec in records(d / RESULTS, Trust.OTHER):
                with foreign_shape(str(d / RESULTS), RESULTS):
                    key = (rec.get("model"), str(rec["sample_id"]), rec.get("run", 0))
                    if key in seen:
                        raise ConfigError(
                            f"sample {rec['sample_id']!r} appears in more than one shard",
                            file=str(d),
                        )
                    seen.add(key)
                    fh.write(encode_line(rec) + "\n")
                    agg.add(rec)
                    read += 1
            if read < int(s.get("records") or 0):
                missing.append(
                    f"{_shard_name(d, s)}: results.jsonl has {read} of {s['records']} records"
                )
    total = _expected_samples(summaries)
    if total is not None and not missing and agg.n_samples() != total:
        missing.append(f"the shards hold {agg.n_samples()} of {total} samples")
    from datetime import datetime

    with foreign_shape(str(args.dirs[0] / "summary.json"), "summary.json"):
        started = min(datetime.fromisoformat(s["started_at"]) for s in summaries)
        duration = max(float(s["duration_s"]) for s in summaries)
        first = summaries[0]
        extra = {
            "suite": first["suite"],
            "suite_file": first.get("suite_file"),
            "description": first.get("description"),
            "merged_from": [str(d) for d in args.dirs],
            "versions": first.get("versions"),
        }
        if missing:
            extra["partial_reason"] = "; ".join(missing)
        summary = summarize(
            None,
            config,
            agg,
            started=started,
            duration=duration,
            partial=bool(missing),
            extra=extra,
            baseline=baseline,
        )
    with foreign_shape(str(args.dirs[0] / RESULTS), RESULTS):  # the shards' records, rendered
        failing = write_outputs(args.output, summary, console.FailingPass.of(summary))
    print(console.render(summary, color=console.use_color(sys.stdout), failing=failing))
    if args.dry_run:
        print_comment(summary, args.output)
    return exit_code(summary)


def refuse_overlap(output: Path, inputs: list[Path]) -> None:
    """ConfigError (exit 2) when the output folder is, holds or lies inside an input folder:
    writing it would overwrite or mix with what is being read."""
    import os

    out = os.path.realpath(output)
    for d in inputs:
        src = os.path.realpath(d)
        if (
            out == src
            or out.startswith(src.rstrip(os.sep) + os.sep)
            or src.startswith(out.rstrip(os.sep) + os.sep)
        ):
            what = "is" if out == src else ("lies inside" if out.startswith(src) else "holds")
            raise ConfigError(
                f"--output {what} the input folder {d}; write the merge to a folder of its own",
                file=str(output),
            )


def _shard_name(folder: Path, summary: dict[str, Any]) -> str:
    sh = summary.get("shard")
    return f"shard {sh['index']}/{sh['count']}" if sh else str(folder)


def shard_gaps(dirs: list[Path], summaries: list[dict[str, Any]]) -> list[str]:
    """Why these folders are not one complete run (empty when they are).

    Shards must come from one split (the same N) and each K of N at most once (else a one-line
    error, exit 2); missing shards and interrupted or partial folders make the merge ``partial``.
    """
    shards = [s.get("shard") for s in summaries]
    gaps: list[str] = []
    if any(shards):
        plain = next((d for d, sh in zip(dirs, shards, strict=True) if not sh), None)
        if plain is not None:
            raise ConfigError(
                "this folder is not a shard (no --shard), the others are", file=str(plain)
            )
        counts = sorted({sh["count"] for sh in shards})
        if len(counts) > 1:
            d = next(
                d for d, sh in zip(dirs, shards, strict=True) if sh["count"] != shards[0]["count"]
            )
            raise ConfigError(
                f"shards of different splits ({' and '.join(f'of {c}' for c in counts)})",
                file=str(d),
            )
        n = counts[0]
        first: dict[int, Path] = {}
        for d, sh in zip(dirs, shards, strict=True):
            if sh["index"] in first:
                raise ConfigError(
                    f"shard {sh['index']}/{n} appears twice (also {first[sh['index']]})",
                    file=str(d),
                )
            first[sh["index"]] = d
        absent = [k for k in range(1, n + 1) if k not in first]
        if absent:
            gaps.append(
                f"shard{'s' if len(absent) > 1 else ''} {', '.join(f'{k}/{n}' for k in absent)} "
                f"missing ({len(first)} of {n} merged)"
            )
    for d, s in zip(dirs, summaries, strict=True):
        if s.get("partial") or s.get("interrupted_by"):
            gaps.append(
                f"{_shard_name(d, s)} is {'interrupted' if s.get('interrupted_by') else 'partial'}"
            )
    return gaps


def _expected_samples(summaries: list[dict[str, Any]]) -> int | None:
    """How many samples a complete set of shards holds (None when the shards do not say)."""
    selected = {(s.get("shard") or {}).get("selected") for s in summaries} - {None}
    if len(selected) > 1:
        raise ConfigError(
            f"the shards selected different samples ({' and '.join(map(str, sorted(selected)))} "
            "before sharding): run every shard with the same options"
        )
    return selected.pop() if selected else None


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
