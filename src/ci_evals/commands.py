"""The work behind each CLI command (kept out of cli.py so ``--version`` imports nothing heavy)."""

from __future__ import annotations

import asyncio
import json
import sys
from argparse import Namespace
from pathlib import Path
from typing import Any

from ci_evals.errors import ConfigError
from ci_evals.verdict import SIGNAL_EXIT

DEFAULT_OUTPUT = Path("ci-evals-results")
DEFAULT_CONCURRENCY = 10


def suite_slug(suite_file: str | Path, base: str | Path | None = None) -> str:
    """A results subfolder name for a suite: its path (relative to ``base``) without the suffix,
    e.g. ``evals/a/suite.yaml`` -> ``evals-a-suite`` (see :func:`unique_slugs` for several)."""
    import os
    import re

    path = os.path.relpath(str(suite_file), str(base)) if base is not None else os.path.normpath(str(suite_file))
    stem = os.path.splitext(path)[0]
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", stem).strip("-.") or "suite"


def unique_slugs(suite_files: list, base: str | Path | None = None) -> dict[str, str]:
    """``{str(path): folder name}`` for the suites of one run, distinct for distinct paths.

    Names that would be shared (``evals/a-b/suite.yaml`` and ``evals/a/b/suite.yaml`` both read
    ``evals-a-b-suite``; ``A`` and ``a`` on a case-blind disk) get 8 hex digits of their path's
    sha256 each; the others keep the readable name.
    """
    import hashlib
    import os
    from collections import Counter

    slugs = {str(p): suite_slug(p, base) for p in suite_files}
    counts = Counter(s.lower() for s in slugs.values())
    for path, slug in slugs.items():
        if counts[slug.lower()] > 1:
            norm = os.path.normpath(os.path.relpath(path, str(base)) if base is not None else path)
            slugs[path] = f"{slug}-{hashlib.sha256(norm.encode('utf-8', 'surrogatepass')).hexdigest()[:8]}"
    return slugs


def _print_comment(summary: dict[str, Any], out: Path) -> None:
    from ci_evals.reports.comment import render_comment
    from ci_evals.reports.summary import iter_results

    body = render_comment(summary, iter_results(out / "results.jsonl"), run_url=None,
                          marker_key=summary.get("suite") or "suite")
    print("\n--- PR comment (dry run: not posted) ---\n" + body + "\n--- end of PR comment ---")


def run_one(path: Path, args: Namespace, output: Path | None) -> tuple[int, dict[str, Any] | None, Path]:
    """Load, run and report one suite. Returns (exit code, summary, output folder)."""
    from ci_evals import selection
    from ci_evals.baseline import Baseline
    from ci_evals.bounds import check_output_folder
    from ci_evals.reports import console
    from ci_evals.reports.summary import write_outputs
    from ci_evals.results.writer import refuse_links
    from ci_evals.runner import Runner, RunOptions
    from ci_evals.signals import held_signals
    from ci_evals.suite import load_suite

    resume = getattr(args, "resume", None)
    tags = [t.strip() for t in args.sample_tags.split(",") if t.strip()] if args.sample_tags else None
    ids, id_match, chosen_by, from_suite = selection.plan(args)
    suite = load_suite(path, max_samples=args.max_samples, sample_tags=tags, num_runs=args.num_runs,
                       shard=args.shard, cache_dir=False if args.no_cache else None,
                       max_errors=getattr(args, "max_errors", None), extra_gates=getattr(args, "gate", None),
                       sample_ids=ids, id_match=id_match)
    if from_suite is not None and from_suite != suite.spec.name:
        raise ConfigError(f"--only-failed: this folder holds results of suite {from_suite!r}, not "
                          f"{suite.spec.name!r}", file=str(args.only_failed))
    if getattr(args, "model_handle", None):
        from ci_evals.dialects import select_model

        select_model(suite, args.model_handle)
    out = resume or output or (suite.ctx.resolve(suite.spec.output) if suite.spec.output else DEFAULT_OUTPUT)
    only = getattr(args, "only_failed", None)
    if only is not None and out.resolve() == only.resolve():  # never overwrite the input: a sibling folder
        out = out.parent / f"{out.name}-rerun"
    check_output_folder(out, "--resume" if resume is not None else "--output")
    refuse_links(out)
    if resume is not None and not (resume / "results.jsonl").exists():
        raise ConfigError("nothing to resume: no results.jsonl", file=str(resume))
    baseline = Baseline(args.baseline) if args.baseline else None
    concurrency = args.max_concurrent or suite.spec.max_concurrent or DEFAULT_CONCURRENCY
    extra: dict[str, Any] = {}
    if args.shard:
        extra["shard"] = {"index": args.shard[0], "count": args.shard[1], "selected": suite.dataset.unsharded}
    if baseline is not None:
        extra["baseline_obj"] = baseline
    if chosen_by:
        extra["selection"] = {"by": chosen_by, "selected": suite.dataset.count, "total": suite.dataset.total}
    rates = {key: (lim.rpm, lim.tpm) for key, lim in suite.spec.rate_limits.items()}
    for flag, index in (("rpm", 0), ("tpm", 1)):
        for key, value in getattr(args, flag, None) or []:  # the command line wins over the suite
            pair = list(rates.get(key, (None, None)))
            pair[index] = value
            rates[key] = (pair[0], pair[1])
    runner = Runner(suite, RunOptions(output=out, max_concurrent=concurrency, resume=resume is not None,
                                      progress=not args.quiet, extra_summary=extra, rates=rates,
                                      max_wait=getattr(args, "max_wait", None) or suite.spec.max_wait))
    if baseline is not None:
        from ci_evals.aggregate import Aggregator

        runner.agg = Aggregator(runner.config, keep_outcomes=True)
        baseline.attach(runner.agg, suite=suite.spec.name)
    from ci_evals.folderlock import fingerprint, hold

    chosen = {k: getattr(args, k, None) for k in ("max_samples", "sample_tags", "num_runs", "shard")}
    if chosen_by:
        chosen["sample_ids"] = sorted(ids) if ids is not None else None
        chosen["sample_pattern"] = getattr(args, "sample_pattern", None)
    lock = hold(out, fingerprint(suite, chosen), resume=resume is not None)
    try:
        with held_signals() as held:  # the runner cancels on a signal; after the run, none may stop the flush
            summary = asyncio.run(runner.execute())
            held.stopping = bool(summary.get("partial"))
            write_outputs(out, summary)
            if args.shard and suite.dataset.count == 0:
                print(f"{summary['suite']}: shard {args.shard[0]}/{args.shard[1]} selects no sample, nothing to "
                      f"gate here (merge the shards for the verdict). Results: {out}/")
                return 0, summary, out
            color = console.use_color(sys.stdout)
            if not args.quiet:
                from ci_evals.reports.summary import iter_results

                print(console.render(summary, iter_results(out / "results.jsonl"), color=color))
            else:
                print(console.verdict_line(summary, prefix=f"{summary['suite']}: ", color=color))
            print(f"Results: {out}/ (summary.json, results.jsonl, summary.md, junit.xml, report.html)")
            if summary.get("letta"):  # agents left on a Letta server: shown even with --quiet
                from ci_evals.reports.letta_agents import console_lines

                print("\n".join(console_lines(summary)))
            if args.dry_run:
                _print_comment(summary, out)
    finally:
        lock.release()
    if summary.get("interrupted_by"):
        print(f"interrupted: partial results written to {out}/; finish with --resume {out}", file=sys.stderr)
    from ci_evals.verdict import exit_code

    return exit_code(summary), summary, out


def cmd_run(args: Namespace) -> int:
    from ci_evals.cli import expand_suites

    paths = expand_suites(args.suites)
    if len(paths) == 1:
        return run_one(paths[0], args, args.output)[0]
    if args.resume:
        raise ConfigError("--resume takes a single suite")
    if getattr(args, "only_failed", None):
        raise ConfigError("--only-failed takes a single suite (the one whose results folder it names)")
    base = args.output or DEFAULT_OUTPUT
    import os

    common = os.path.commonpath([str(p.resolve().parent) for p in paths])
    slugs = unique_slugs([p.resolve() for p in paths], common)
    codes, rows = [], []
    for path in paths:
        try:
            code, summary, out = run_one(path, args, base / slugs[str(path.resolve())])
        except ConfigError as exc:
            from ci_evals.redact import scrub

            print(scrub(f"error: {exc}"), file=sys.stderr)
            code, summary = 2, None
        codes.append(code)
        rows.append({"suite_file": str(path), "exit_code": code,
                     "passed": bool(summary and summary["gate"]["passed"]),
                     "verdict": summary["verdict"] if summary else "config_error",
                     "suite": summary["suite"] if summary else None,
                     "output": str(out) if summary else None})
        if code in SIGNAL_EXIT.values():
            break
    base.mkdir(parents=True, exist_ok=True)
    from ci_evals.results.writer import write_text

    write_text(base / "suites.json", json.dumps(rows, indent=2) + "\n")
    # One combined report: each suite's summary.md in turn (a failed load gets its error line).
    parts = [(Path(r["output"]) / "summary.md").read_text(encoding="utf-8") if r["output"]
             else f"## {r['suite_file']}\n\nInvalid configuration (exit code {r['exit_code']}).\n" for r in rows]
    write_text(base / "summary.md", "\n\n---\n\n".join(parts))
    print("\nAll suites: " + ", ".join(f"{Path(r['suite_file']).name} {r['verdict'].upper().replace('_', ' ')}"
                                       for r in rows))
    interrupted = [c for c in codes if c in SIGNAL_EXIT.values()]
    return interrupted[0] if interrupted else max(codes)


def cmd_validate(args: Namespace) -> int:
    from ci_evals.cli import expand_suites
    from ci_evals.dialects import DIALECTS
    from ci_evals.suite import load_suite
    from ci_evals.typed_gates import describe as describe_typed

    worst = 0
    for path in expand_suites(args.suites):
        try:
            suite = load_suite(path, offline=True, cache_dir=False, extra_gates=getattr(args, "gate", None))
        except ConfigError as exc:
            from ci_evals.redact import scrub

            print(scrub(f"error: {exc}"), file=sys.stderr)
            worst = 2
            continue
        graders = ", ".join(f"{n} ({s.grader.spec.kind}, {s.extractor.name}, pass {s.rule_text}"
                            + (f", {s.grader.describe()}" if hasattr(s.grader, "describe") else "") + ")"
                            for n, s in suite.graders.items())
        gates = "; ".join(g.describe() for g in suite.gates) or "none"
        gates = "; ".join(([gates] if suite.gates else []) + [describe_typed(g) for g in suite.typed_gates]) \
            or "none (add one with --gate)"
        if suite.reward is not None:
            graders += f"; {suite.reward.describe()}"
        print(f"{path}: valid. {suite.dataset.count} samples ({suite.dataset.total} in "
              f"{suite.dataset.path.name}), target {suite.spec.target['kind']}, graders: {graders}; gates: {gates}")
        if suite.dialect != "ci-evals":
            print(f"  read as a {DIALECTS[suite.dialect]} suite")
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


def read_summary(folder: Path) -> dict[str, Any]:
    """A results folder's summary.json given on the command line (another run's: checked); a
    missing, unreadable or foreign one is a one-line ConfigError."""
    from ci_evals.results.files import Trust
    from ci_evals.results.files import read_summary as read

    return dict(read(folder, Trust.OTHER))


def cmd_report(args: Namespace) -> int:
    """``ci-evals report DIR``: rebuild DIR/report.html from its summary.json and results.jsonl.

    DIR may come from elsewhere (a downloaded artifact): it is read as another run's folder, so a
    bad line is one error naming it, and the baseline folder its summary.json names is read only
    inside the current directory (see ci_evals.results.files.baseline_reference).
    """
    from ci_evals.reports.html import write_report
    from ci_evals.results.files import (
        RESULTS,
        Trust,
        baseline_reference,
        check_records,
        foreign_shape,
    )

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
            print(f"note: {folder / 'summary.json'}: {why} (pass --baseline to compare)", file=sys.stderr)
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
    from ci_evals.aggregate import Aggregator
    from ci_evals.baseline import Baseline
    from ci_evals.bounds import check_output_folder, dumps
    from ci_evals.reports import console
    from ci_evals.reports.summary import build_summary, iter_results, write_outputs
    from ci_evals.results.files import RESULTS, Trust, foreign_shape, records
    from ci_evals.results.writer import open_atomic, refuse_links

    summaries = []
    for d in args.dirs:
        summaries.append(read_summary(d))
    check_output_folder(args.output)
    refuse_overlap(args.output, [*args.dirs, *([args.baseline] if args.baseline else [])])
    refuse_links(args.output)
    config = summaries[0].get("config")
    for d, s in zip(args.dirs, summaries, strict=True):
        if s.get("config") != config or s.get("suite") != summaries[0].get("suite"):
            raise ConfigError("this folder holds results of a different suite or configuration", file=str(d))
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
                        raise ConfigError(f"sample {rec['sample_id']!r} appears in more than one shard", file=str(d))
                    seen.add(key)
                    fh.write(dumps(rec, ensure_ascii=False) + "\n")
                    agg.add(rec)
                    read += 1
            if read < int(s.get("records") or 0):
                missing.append(f"{_shard_name(d, s)}: results.jsonl has {read} of {s['records']} records")
    total = _expected_samples(summaries)
    if total is not None and not missing and agg.n_samples() != total:
        missing.append(f"the shards hold {agg.n_samples()} of {total} samples")
    from datetime import datetime

    with foreign_shape(str(args.dirs[0] / "summary.json"), "summary.json"):
        started = min(datetime.fromisoformat(s["started_at"]) for s in summaries)
        duration = max(float(s["duration_s"]) for s in summaries)
        first = summaries[0]
        extra = {"suite": first["suite"], "suite_file": first.get("suite_file"), "description": first.get("description"),
                 "merged_from": [str(d) for d in args.dirs], "versions": first.get("versions")}
        if missing:
            extra["partial_reason"] = "; ".join(missing)
        summary = build_summary(None, config, agg, started=started, duration=duration,
                                partial=bool(missing), extra=extra, baseline=baseline)
    with foreign_shape(str(args.dirs[0] / RESULTS), RESULTS):  # the shards' records, rendered
        write_outputs(args.output, summary)
    print(console.render(summary, iter_results(args.output / "results.jsonl"), color=console.use_color(sys.stdout)))
    if args.dry_run:
        _print_comment(summary, args.output)
    from ci_evals.verdict import exit_code

    return exit_code(summary)


def refuse_overlap(output: Path, inputs: list[Path]) -> None:
    """ConfigError (exit 2) when the output folder is, holds or lies inside an input folder:
    writing it would overwrite or mix with what is being read."""
    import os

    out = os.path.realpath(output)
    for d in inputs:
        src = os.path.realpath(d)
        if out == src or out.startswith(src.rstrip(os.sep) + os.sep) or src.startswith(out.rstrip(os.sep) + os.sep):
            what = "is" if out == src else ("lies inside" if out.startswith(src) else "holds")
            raise ConfigError(f"--output {what} the input folder {d}; write the merge to a folder of its own",
                              file=str(output))


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
            raise ConfigError("this folder is not a shard (no --shard), the others are", file=str(plain))
        counts = sorted({sh["count"] for sh in shards})
        if len(counts) > 1:
            d = next(d for d, sh in zip(dirs, shards, strict=True) if sh["count"] != shards[0]["count"])
            raise ConfigError(f"shards of different splits ({' and '.join(f'of {c}' for c in counts)})",
                              file=str(d))
        n = counts[0]
        first: dict[int, Path] = {}
        for d, sh in zip(dirs, shards, strict=True):
            if sh["index"] in first:
                raise ConfigError(f"shard {sh['index']}/{n} appears twice (also {first[sh['index']]})", file=str(d))
            first[sh["index"]] = d
        absent = [k for k in range(1, n + 1) if k not in first]
        if absent:
            gaps.append(f"shard{'s' if len(absent) > 1 else ''} {', '.join(f'{k}/{n}' for k in absent)} "
                        f"missing ({len(first)} of {n} merged)")
    for d, s in zip(dirs, summaries, strict=True):
        if s.get("partial") or s.get("interrupted_by"):
            gaps.append(f"{_shard_name(d, s)} is {'interrupted' if s.get('interrupted_by') else 'partial'}")
    return gaps


def _expected_samples(summaries: list[dict[str, Any]]) -> int | None:
    """How many samples a complete set of shards holds (None when the shards do not say)."""
    selected = {(s.get("shard") or {}).get("selected") for s in summaries} - {None}
    if len(selected) > 1:
        raise ConfigError(f"the shards selected different samples ({' and '.join(map(str, sorted(selected)))} "
                          "before sharding): run every shard with the same options")
    return selected.pop() if selected else None
