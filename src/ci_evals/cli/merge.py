"""``ci-evals merge``: the folders of one suite's shards (or of reruns) into one results folder.

Each folder is another run's (read and checked as such). The shards must come from one split and
each appear once; what is missing or stopped early makes the merge ``partial``, never a pass by
omission. Records are copied once each into the new results.jsonl and aggregated as they pass;
summary.json is then computed afresh (with the baseline, when given), and the reports written.
The output folder is never an input, inside one or holding one.
"""

from __future__ import annotations

import os
import sys
from argparse import Namespace
from datetime import datetime
from pathlib import Path

from ci_evals._util.bounds import check_output_folder
from ci_evals._util.errors import ConfigError
from ci_evals.gating.aggregate import Aggregator
from ci_evals.gating.baseline import Baseline
from ci_evals.gating.summary import Learned, Provenance, summarize
from ci_evals.letta.agents import merge_blocks
from ci_evals.llm.pool import combined_endpoints
from ci_evals.reports import console
from ci_evals.reports.letta_agents import console_lines
from ci_evals.reports.write import write_outputs
from ci_evals.results.files import RESULTS, Trust, foreign_shape, read_summary, records
from ci_evals.results.line import encode_line
from ci_evals.results.records import BudgetReport, Summary
from ci_evals.results.writer import open_atomic, refuse_links
from ci_evals.run.finish import exit_code, print_comment


def cmd_merge(args: Namespace) -> int:
    summaries = [read_summary(d, Trust.OTHER) for d in args.dirs]
    check_output_folder(args.output)
    refuse_overlap(args.output, [*args.dirs, *([args.baseline] if args.baseline else [])])
    refuse_links(args.output)
    first = summaries[0]
    for d, s in zip(args.dirs, summaries, strict=True):
        if s.get("config") != first.get("config") or s.get("suite") != summaries[0].get("suite"):
            raise ConfigError(
                "this folder holds results of a different suite or configuration", file=str(d)
            )
    missing = shard_gaps(args.dirs, summaries)
    baseline = Baseline(args.baseline) if args.baseline else None
    with foreign_shape(str(args.dirs[0] / "summary.json"), "summary.json"):
        config = first["config"]  # none: a foreign shape
        agg = Aggregator(config, keep_outcomes=baseline is not None)
    if baseline is not None:
        baseline.attach(agg, suite=first.get("suite"))
    args.output.mkdir(parents=True, exist_ok=True)
    seen: set[tuple[str | None, str, int]] = set()
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
    with foreign_shape(str(args.dirs[0] / "summary.json"), "summary.json"):
        started = min(datetime.fromisoformat(s["started_at"]) for s in summaries)
        duration = max(float(s["duration_s"]) for s in summaries)
        merged = Provenance(
            suite=first["suite"],
            suite_file=first.get("suite_file"),
            description=first.get("description"),
            versions=first.get("versions") or None,  # none: summarize lists this machine's
            merged_from=[str(d) for d in args.dirs],
        )
        summary = summarize(
            merged,
            config,
            agg,
            started=started,
            duration=duration,
            partial=bool(missing),
            baseline=baseline,
            learned=Learned(
                letta=merge_blocks([b for s in summaries if (b := s.get("letta"))]),
                partial_reason="; ".join(missing) if missing else None,
                budget=merged_budget(summaries, agg.errors.by_category.get("budget", 0)),
                endpoints=combined_endpoints([s.get("endpoints") or [] for s in summaries]),
            ),
        )
    with foreign_shape(str(args.dirs[0] / RESULTS), RESULTS):  # the shards' records, rendered
        comparison = (
            baseline.comparison(summary.get("metrics") or {}, summary.get("cost_speed"))
            if baseline is not None
            else None
        )
        failing = write_outputs(args.output, summary, console.FailingPass.of(summary), comparison)
    print(console.render(summary, color=console.use_color(sys.stdout), failing=failing))
    if summary.get("letta"):  # agents the shards left on a Letta server
        print("\n".join(console_lines(summary)))
    if args.dry_run:
        print_comment(summary, args.output)
    return exit_code(summary)


def merged_budget(summaries: list[Summary], stopped_samples: int) -> BudgetReport | None:
    """The shards' budgets as one: what they spent together, and the first stop (a shard that
    stopped calling errors the merged verdict too)."""
    reports = [
        b
        for s in summaries
        if isinstance(s.get("cost_speed"), dict)
        and isinstance(b := s["cost_speed"].get("budget"), dict)
    ]
    if not reports:
        return None
    first = reports[0]
    spent = [r.get("spent_usd") for r in reports]
    shares = [float(x) for r in reports if isinstance(x := r.get("max_cost_usd"), int | float)]
    shares = shares if len(shares) == len(reports) else []
    return {
        "max_steps": first.get("max_steps"),
        "max_tokens": first.get("max_tokens"),
        # each shard's share; none when a shard had no cap (not "max $0", which no shard set)
        "max_cost_usd": round(sum(shares), 6) if shares and all(shares) else None,
        "spent_usd": round(sum(x for x in spent if isinstance(x, int | float)), 6),
        "stopped": next((r["stopped"] for r in reports if r.get("stopped")), None),
        "stopped_samples": stopped_samples,
    }


def refuse_overlap(output: Path, inputs: list[Path]) -> None:
    """ConfigError (exit 2) when the output folder is, holds or lies inside an input folder:
    writing it would overwrite or mix with what is being read."""
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


def _shard_name(folder: Path, summary: Summary) -> str:
    sh = summary.get("shard")
    return f"shard {sh['index']}/{sh['count']}" if sh else str(folder)


def shard_gaps(dirs: list[Path], summaries: list[Summary]) -> list[str]:
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
        split = [(d, sh) for d, sh in zip(dirs, shards, strict=True) if sh]  # every folder
        counts = sorted({sh["count"] for _, sh in split})
        if len(counts) > 1:
            d = next(d for d, sh in split if sh["count"] != split[0][1]["count"])
            raise ConfigError(
                f"shards of different splits ({' and '.join(f'of {c}' for c in counts)})",
                file=str(d),
            )
        n = counts[0]
        first: dict[int, Path] = {}
        for d, sh in split:
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


def _expected_samples(summaries: list[Summary]) -> int | None:
    """How many samples a complete set of shards holds (None when the shards do not say)."""
    selected = {
        n for s in summaries if (sh := s.get("shard")) and (n := sh.get("selected")) is not None
    }
    if len(selected) > 1:
        raise ConfigError(
            f"the shards selected different samples ({' and '.join(map(str, sorted(selected)))} "
            "before sharding): run every shard with the same options"
        )
    return selected.pop() if selected else None
