"""One suite, start to end: load it, run it, write and print its reports, and map the outcome
to an exit code. The CLI's ``run`` and the Action both call :func:`run_suite` with typed
:class:`~ci_evals.run.options.SuiteOptions`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ci_evals._util.bounds import check_output_folder
from ci_evals._util.errors import ConfigError
from ci_evals.config.rates import DEFAULT_MAX_CONCURRENT
from ci_evals.llm import pool, prices
from ci_evals.results.layout import DEFAULT_OUTPUT
from ci_evals.results.records import Selection, Shard, Summary
from ci_evals.results.writer import refuse_links
from ci_evals.run import lanes, selection
from ci_evals.run.exits import ExitCode
from ci_evals.run.folderlock import fingerprint, hold
from ci_evals.run.options import SuiteOptions
from ci_evals.run.overrides import rate_limits, select_model
from ci_evals.run.runner import Runner, RunOptions
from ci_evals.run.signals import held_signals
from ci_evals.suite.loader import load_suite

if TYPE_CHECKING:
    from ci_evals.gating.baseline import Baseline


def finish_imports() -> None:
    """What the run's end needs that its start did not load (:mod:`ci_evals.run.finish` and the
    reports it imports, the summary's modules, Jinja2 and report.html's template), loaded on a
    background thread while the run waits on the network, after the price list its first answer
    needs; a failure here is the end's to report, where it is loaded again."""
    try:
        prices.warmed()
        import ci_evals.gating.summary  # noqa: F401  start time: the runner's end, loaded meanwhile
        from ci_evals.run import finish  # start time: the end's, loaded here meanwhile

        finish.warm()
    except Exception:  # noqa: S110 - loaded again at the end, and reported there
        pass


def run_suite(
    path: Path, args: SuiteOptions, output: Path | None = None
) -> tuple[ExitCode, Summary, Path]:
    """Load, run and report one suite. Returns (exit code, summary, output folder).

    ``output`` (a subfolder when the CLI runs several suites) wins over ``args.output``.
    """
    given = args.resume or output or args.output  # how the folder is named in messages
    cwd = Path.cwd()
    try:  # every folder resolved once, here: user code may chdir (the caller's options stay as they were)
        return _run_suite(path, SuiteOptions(**vars(args)).absolute(), given, cwd)
    except ConfigError as exc:  # an error about the folder names it as it was given
        named = given or DEFAULT_OUTPUT
        for shown in (named, named.parent / f"{named.name}-rerun"):
            full = str(cwd / shown)
            if exc.file and (exc.file == full or exc.file.startswith(full + os.sep)):
                exc.file = str(shown) + exc.file[len(full) :]
        raise


def _run_suite(
    path: Path, args: SuiteOptions, given: Path | None, cwd: Path
) -> tuple[ExitCode, Summary, Path]:
    resume = args.resume
    tags = (
        [t.strip() for t in args.sample_tags.split(",") if t.strip()] if args.sample_tags else None
    )
    ids, id_match, chosen_by, from_suite = selection.plan(args)
    suite = load_suite(
        path,
        max_samples=args.max_samples,
        sample_tags=tags,
        num_runs=args.num_runs,
        shard=args.shard,
        cache_dir=False if args.no_cache else None,
        max_errors=args.max_errors,
        extra_gates=args.gate,
        sample_ids=ids,
        id_match=id_match,
        meanwhile=finish_imports,
    )
    if from_suite is not None and from_suite != suite.spec.name:
        raise ConfigError(
            f"--only-failed: this folder holds results of suite {from_suite!r}, not "
            f"{suite.spec.name!r}",
            file=str(args.only_failed),
        )
    if args.model_handle:
        select_model(suite, args.model_handle)
    shown = given or (suite.ctx.resolve(suite.spec.output) if suite.spec.output else DEFAULT_OUTPUT)
    out = cwd / shown  # cwd as it was before the suite's code was imported
    only = args.only_failed
    if (
        only is not None and out.resolve() == only.resolve()
    ):  # never overwrite the input: a sibling folder
        out, shown = out.parent / f"{out.name}-rerun", shown.parent / f"{shown.name}-rerun"
    check_output_folder(out, "--resume" if resume is not None else "--output")
    refuse_links(out)
    if resume is not None and not (resume / "results.jsonl").exists():
        raise ConfigError("nothing to resume: no results.jsonl", file=str(resume))
    baseline: Baseline | None = None
    if args.baseline:
        from ci_evals.gating.baseline import Baseline  # start time: a --baseline run's only

        baseline = Baseline(args.baseline)
    concurrency = args.max_concurrent or suite.spec.max_concurrent or DEFAULT_MAX_CONCURRENT
    shard: Shard | None = None
    if args.shard:
        shard = {
            "index": args.shard[0],
            "count": args.shard[1],
            "selected": suite.dataset.unsharded,
        }
    chose: Selection | None = None
    if chosen_by:
        chose = {"by": chosen_by, "selected": suite.dataset.count, "total": suite.dataset.total}
    rates = rate_limits(suite, args)
    if rates:  # before the folder is touched: a rate no call could wait for is a setting's mistake
        pool.configure(rates=rates, max_wait=args.max_wait or suite.spec.max_wait, check_only=True)
    runner = Runner(
        suite,
        RunOptions(
            output=out,
            max_concurrent=concurrency,
            resume=resume is not None,
            progress=not args.quiet,
            shard=shard,
            selection=chose,
            rates=rates,
            baseline=baseline,
            max_wait=args.max_wait or suite.spec.max_wait,
            meanwhile=finish_imports,
        ),
    )
    chosen = {k: getattr(args, k) for k in ("max_samples", "sample_tags", "num_runs", "shard")}
    if chosen_by:
        chosen["sample_ids"] = sorted(ids) if ids is not None else None
        chosen["sample_pattern"] = args.sample_pattern
    lock = hold(out, fingerprint(suite, chosen), resume=resume is not None)
    try:
        with (
            held_signals() as held
        ):  # the runner cancels on a signal; after the run, none may stop the flush
            summary = lanes.execute(runner)  # in this process, or in one per core when CPU-bound
            held.stopping = bool(summary.get("partial"))
            from ci_evals.run import finish  # start time: the end's (finish_imports)

            early = finish.report(summary, args, suite.dataset.count, baseline, out, shown)
    finally:
        lock.release()
    if early is not None:
        return early, summary, out
    if summary.get("interrupted_by"):
        print(
            f"interrupted: partial results written to {shown}/; finish with --resume {shown}",
            file=sys.stderr,
        )
    return finish.exit_code(summary), summary, out
