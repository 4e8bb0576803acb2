"""The work behind each CLI command (kept out of cli.py so ``--version`` imports nothing heavy)."""

from __future__ import annotations

import asyncio
import json
import sys
from argparse import Namespace
from pathlib import Path
from typing import Any

from ci_evals.errors import ConfigError

DEFAULT_OUTPUT = Path("ci-evals-results")
DEFAULT_CONCURRENCY = 10


def suite_slug(suite_file: str | Path, base: str | Path | None = None) -> str:
    """A results subfolder name for a suite: its path (relative to ``base``) without the suffix,
    e.g. ``evals/a/suite.yaml`` -> ``evals-a-suite``; distinct suites never share a folder."""
    import os
    import re

    path = os.path.relpath(str(suite_file), str(base)) if base is not None else os.path.normpath(str(suite_file))
    stem = os.path.splitext(path)[0]
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", stem).strip("-.") or "suite"


def _print_comment(summary: dict[str, Any], out: Path) -> None:
    from ci_evals.reports.comment import render_comment
    from ci_evals.reports.summary import iter_results

    body = render_comment(summary, iter_results(out / "results.jsonl"), run_url=None,
                          marker_key=summary.get("suite") or "suite")
    print("\n--- PR comment (dry run: not posted) ---\n" + body + "\n--- end of PR comment ---")


def run_one(path: Path, args: Namespace, output: Path | None) -> tuple[int, dict[str, Any] | None, Path]:
    """Load, run and report one suite. Returns (exit code, summary, output folder)."""
    from ci_evals.baseline import Baseline
    from ci_evals.reports import console
    from ci_evals.reports.summary import write_outputs
    from ci_evals.runner import Runner, RunOptions
    from ci_evals.suite import load_suite

    resume = getattr(args, "resume", None)
    tags = [t.strip() for t in args.sample_tags.split(",") if t.strip()] if args.sample_tags else None
    suite = load_suite(path, max_samples=args.max_samples, sample_tags=tags, num_runs=args.num_runs,
                       shard=args.shard, cache_dir=False if args.no_cache else None)
    out = resume or output or (suite.ctx.resolve(suite.spec.output) if suite.spec.output else DEFAULT_OUTPUT)
    if resume is not None and not (resume / "results.jsonl").exists():
        raise ConfigError("nothing to resume: no results.jsonl", file=str(resume))
    baseline = Baseline(args.baseline) if args.baseline else None
    concurrency = args.max_concurrent or suite.spec.max_concurrent or DEFAULT_CONCURRENCY
    extra: dict[str, Any] = {}
    if args.shard:
        extra["shard"] = {"index": args.shard[0], "count": args.shard[1]}
    if baseline is not None:
        extra["baseline_obj"] = baseline
    runner = Runner(suite, RunOptions(output=out, max_concurrent=concurrency, resume=resume is not None,
                                      progress=not args.quiet, extra_summary=extra))
    if baseline is not None:
        from ci_evals.aggregate import Aggregator

        runner.agg = Aggregator(runner.config, keep_outcomes=True)
        baseline.attach(runner.agg)
    summary = asyncio.run(runner.execute())
    write_outputs(out, summary)
    if not args.quiet:
        print(console.render(summary))
    else:
        print(f"{summary['suite']}: " + ("PASSED" if summary["gate"]["passed"] else "FAILED"))
    print(f"Results: {out}/ (summary.json, results.jsonl, summary.md, junit.xml)")
    if summary.get("letta"):  # agents left on a Letta server: shown even with --quiet
        from ci_evals.reports.letta_agents import console_lines

        print("\n".join(console_lines(summary)))
    if args.dry_run:
        _print_comment(summary, out)
    if summary.get("partial"):
        from ci_evals.cli import EXIT_SIGNAL

        signum = {"SIGINT": 2, "SIGTERM": 15}.get(summary.get("interrupted_by", "SIGINT"), 2)
        print(f"interrupted: partial results written to {out}/; finish with --resume {out}", file=sys.stderr)
        return EXIT_SIGNAL[signum], summary, out
    return (0 if summary["gate"]["passed"] else 1), summary, out


def cmd_run(args: Namespace) -> int:
    from ci_evals.cli import expand_suites

    paths = expand_suites(args.suites)
    if len(paths) == 1:
        return run_one(paths[0], args, args.output)[0]
    if args.resume:
        raise ConfigError("--resume takes a single suite")
    base = args.output or DEFAULT_OUTPUT
    import os

    common = os.path.commonpath([str(p.resolve().parent) for p in paths])
    codes, rows = [], []
    for path in paths:
        try:
            code, summary, out = run_one(path, args, base / suite_slug(path.resolve(), common))
        except ConfigError as exc:
            print(f"error: {exc}", file=sys.stderr)
            code, summary = 2, None
        codes.append(code)
        rows.append({"suite_file": str(path), "exit_code": code,
                     "passed": bool(summary and summary["gate"]["passed"]),
                     "suite": summary["suite"] if summary else None,
                     "output": str(out) if summary else None})
        if code >= 130:
            break
    base.mkdir(parents=True, exist_ok=True)
    (base / "suites.json").write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    # One combined report: each suite's summary.md in turn (a failed load gets its error line).
    parts = [(Path(r["output"]) / "summary.md").read_text(encoding="utf-8") if r["output"]
             else f"## {r['suite_file']}\n\nInvalid configuration (exit code {r['exit_code']}).\n" for r in rows]
    (base / "summary.md").write_text("\n\n---\n\n".join(parts), encoding="utf-8")
    print("\nAll suites: " + ", ".join(f"{Path(r['suite_file']).name} {'PASSED' if r['passed'] else 'FAILED'}"
                                       for r in rows))
    interrupted = [c for c in codes if c >= 130]
    return interrupted[0] if interrupted else max(codes)


def cmd_validate(args: Namespace) -> int:
    from ci_evals.cli import expand_suites
    from ci_evals.suite import load_suite

    worst = 0
    for path in expand_suites(args.suites):
        try:
            suite = load_suite(path, offline=True, cache_dir=False)
        except ConfigError as exc:
            print(f"error: {exc}", file=sys.stderr)
            worst = 2
            continue
        graders = ", ".join(f"{n} ({s.grader.spec.kind}, {s.extractor.name}, pass {s.rule_text})"
                            for n, s in suite.graders.items())
        gates = "; ".join(g.describe() for g in suite.gates) or "none"
        print(f"{path}: valid. {suite.dataset.count} samples ({suite.dataset.total} in "
              f"{suite.dataset.path.name}), target {suite.spec.target['kind']}, graders: {graders}; gates: {gates}")
    return worst


def cmd_list() -> int:
    from ci_evals.extractors import BUILTINS
    from ci_evals.graders.tool import BUILTIN_FUNCTIONS
    from ci_evals.registry import GRADER_KINDS, TARGETS

    print("Targets:     " + ", ".join(TARGETS.names()))
    print("Grader kinds: " + ", ".join(GRADER_KINDS.names()))
    print("Tool functions (kind: tool): " + ", ".join(BUILTIN_FUNCTIONS) + ", or file.py:function")
    print("Extractors:")
    for name, (_, _, doc) in BUILTINS.items():
        print(f"  {name:16} {doc}")
    print("  file.py:function  a custom @extractor")
    return 0


def cmd_merge(args: Namespace) -> int:
    from ci_evals.aggregate import Aggregator
    from ci_evals.baseline import Baseline
    from ci_evals.reports import console
    from ci_evals.reports.summary import build_summary, iter_results, write_outputs

    summaries = []
    for d in args.dirs:
        p = d / "summary.json"
        if not p.exists():
            raise ConfigError("no summary.json in this folder", file=str(d))
        try:
            summary = json.loads(p.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise ConfigError(f"summary.json is not valid JSON: {exc}", file=str(p)) from None
        if not isinstance(summary, dict):
            raise ConfigError("summary.json is not a JSON object", file=str(p))
        summaries.append(summary)
    config = summaries[0].get("config")
    for d, s in zip(args.dirs, summaries, strict=True):
        if s.get("config") != config or s.get("suite") != summaries[0].get("suite"):
            raise ConfigError("this folder holds results of a different suite or configuration", file=str(d))
    baseline = Baseline(args.baseline) if args.baseline else None
    agg = Aggregator(config, keep_outcomes=baseline is not None)
    if baseline is not None:
        baseline.attach(agg)
    args.output.mkdir(parents=True, exist_ok=True)
    seen: set[tuple] = set()
    with (args.output / "results.jsonl").open("w", encoding="utf-8") as fh:
        for d in args.dirs:
            for rec in iter_results(d / "results.jsonl"):
                key = (rec.get("model"), str(rec["sample_id"]), rec.get("run", 0))
                if key in seen:
                    raise ConfigError(f"sample {rec['sample_id']!r} appears in more than one shard", file=str(d))
                seen.add(key)
                fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
                agg.add(rec)
    from datetime import datetime

    started = min(datetime.fromisoformat(s["started_at"]) for s in summaries)
    duration = max(s["duration_s"] for s in summaries)
    first = summaries[0]
    extra = {"suite": first["suite"], "suite_file": first.get("suite_file"), "description": first.get("description"),
             "merged_from": [str(d) for d in args.dirs], "versions": first.get("versions")}
    summary = build_summary(None, config, agg, started=started, duration=duration,
                            partial=any(s.get("partial") for s in summaries), extra=extra, baseline=baseline)
    write_outputs(args.output, summary)
    print(console.render(summary))
    if args.dry_run:
        _print_comment(summary, args.output)
    return 0 if summary["gate"]["passed"] else 1
