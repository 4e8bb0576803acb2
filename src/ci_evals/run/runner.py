"""Async orchestration: every (model, sample, run) job under one concurrency cap, results streamed.

A fixed pool of ``max_concurrent`` workers pulls jobs from a lazy iterator (memory stays flat
however large the dataset). Each job (:mod:`ci_evals.run.job`) runs the target and the graders into
one record, appended to ``results.jsonl`` at once and fed to the ``gating.aggregate.Aggregator``.
"""

from __future__ import annotations

import asyncio
import inspect
import signal
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, cast

from ci_evals._util import gcpolicy, redact
from ci_evals._util.errors import ConfigError
from ci_evals._util.quiet import thread_when_quiet
from ci_evals._util.redact import scrub
from ci_evals._util.textsafe import clean_value
from ci_evals.config.rates import DEFAULT_MAX_CONCURRENT
from ci_evals.core.sample import Sample
from ci_evals.gating.aggregate import Aggregator
from ci_evals.graders.base import Grader
from ci_evals.letta.agents import letta_report
from ci_evals.llm import pool
from ci_evals.llm.pool import endpoint_reports
from ci_evals.results.files import RESULTS, Trust, foreign_shape, iter_records
from ci_evals.results.line import record_line
from ci_evals.results.records import (
    BudgetReport,
    EndpointReport,
    LettaBlock,
    ResultRecord,
    Selection,
    Shard,
    StopSignal,
    Summary,
)
from ci_evals.results.writer import open_append
from ci_evals.run import carried
from ci_evals.run.folderlock import JobKey, job_key
from ci_evals.run.job import Plan
from ci_evals.run.progress import Progress, Tracker
from ci_evals.run.signals import on_signals
from ci_evals.suite.config_block import suite_config
from ci_evals.suite.loader import LoadedSuite
from ci_evals.targets.base import Target
from ci_evals.usercode import lane as usercode
from ci_evals.usercode.load import loaded_paths

if TYPE_CHECKING:
    from ci_evals.gating.baseline import Baseline
    from ci_evals.gating.summary import Learned

FLUSH_SECONDS = 0.5
YIELD_SECONDS = 0.005
"""A worker whose jobs never suspend (replay, built-in graders) hands the loop over this often."""


@dataclass
class RunOptions:
    output: Path
    max_concurrent: int = DEFAULT_MAX_CONCURRENT
    resume: bool = False
    progress: bool = True
    shard: Shard | None = None
    """summary.json ``shard``: which K of N this run is (``--shard``)."""
    selection: Selection | None = None
    """summary.json ``selection``: the samples a ``--sample-id``/``--only-failed``... choice kept."""
    rates: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)
    """LLM rate limits the user knows: provider, base URL or ``*`` -> (rpm, tpm)."""
    max_wait: float | None = None
    """Seconds one LLM call may stay throttled before it errors (default: the scheduler's)."""
    baseline: Baseline | None = None
    """The run to compare with (``--baseline``): regression gates and the summary's baseline block."""
    results_name: str = RESULTS
    """The file in ``output`` this process writes its records to (a worker process: its part file)."""
    meanwhile: Callable[[], None] | None = None
    """Work for a thread while the run waits on the network (the end's imports; ci_evals._util.quiet)."""


@dataclass(frozen=True)
class RunOutcome:
    """What one process's run of its jobs returns: when it started (the clock and its
    ``perf_counter``), the signal that interrupted it or None, and what it learned as it went."""

    started: datetime
    t0: float
    interrupted: int | None
    learned: Learned


class Runner:
    """The run of one suite with its options, and the one aggregator of its records, built here
    from those inputs (with ``baseline``: it keeps per-sample outcomes, and is the run the
    baseline compares with)."""

    def __init__(self, suite: LoadedSuite, options: RunOptions) -> None:
        self.suite = suite
        self.opts = options
        self.config = suite_config(suite)
        self.agg = Aggregator(self.config, keep_outcomes=options.baseline is not None)
        if options.baseline is not None:
            options.baseline.attach(self.agg, suite=suite.spec.name)
        self.done_keys: set[JobKey] = set()
        self._last_flush = 0.0
        self._stopping = False
        self._secrets: list[str] = []
        self._secrets_gen = -1
        self._plan: Plan | None = None
        self._resumed = False
        self._previous: Summary | None = None  # a --resume's stopped run, as it summed itself up

    def for_worker(self, results_name: str) -> Runner:
        """This run's runner in a worker process (ci_evals.run.lanes): the same suite, options and
        jobs already done, its records to ``results_name``, and an aggregator of its own records
        only (the state it hands over), not of those a ``--resume`` read before the fork."""
        worker = Runner(self.suite, replace(self.opts, results_name=results_name, meanwhile=None))
        worker.done_keys = set(self.done_keys)
        worker._resumed = self._resumed
        worker._plan = self._plan
        return worker

    @property
    def plan(self) -> Plan:
        """What every job of this run asks of the suite, asked once (when first needed)."""
        if self._plan is None:
            self._plan = Plan(self.suite)
        return self._plan

    # -- jobs ------------------------------------------------------------------------------------

    def jobs(self) -> Iterator[tuple[str | None, Sample, int]]:
        for model in self.suite.target.models():
            for sample in self.suite.dataset:
                for run in range(self.suite.spec.num_runs):
                    if (model, str(sample.id), run) not in self.done_keys:
                        yield model, sample, run

    def total_jobs(self) -> int:
        models = len(self.suite.target.models())
        return self.suite.dataset.count * models * self.suite.spec.num_runs - len(self.done_keys)

    def cpu_only(self) -> bool:
        """Whether every job is computation in this process alone (recorded outputs, built-in
        tool graders, no setup script or reward): what worker processes may split (ci_evals.run.lanes)."""
        return (
            self.suite.target.cpu_only
            and self.plan.builtin is not None
            and self.suite.setup is None
            and self.suite.reward is None
        )

    # -- the run ---------------------------------------------------------------------------------

    def load_previous(self) -> None:
        """For ``--resume``: feed the records already written, remember which jobs are done (once)."""
        if self.opts.resume and not self._resumed:
            self._resumed = True
            self._load_previous(self.opts.output / RESULTS)

    def _load_previous(self, results: Path) -> None:
        # The folder may be anything the user named: read it as another run's (a bad line is one
        # error naming it; only a torn last line from a hard kill is skipped, and that job runs again).
        n, spent = -1, 0.0
        for n, rec in iter_records(results, Trust.OTHER):
            key = job_key(rec)
            if key in self.done_keys:
                continue
            self.done_keys.add(key)
            with foreign_shape(f"{results}:{n + 1}", "this record"):
                self.agg.add(rec)
            spent += carried.spent_by(rec)
        self._previous = carried.previous(results.parent, n + 1)
        carried.charge(self.suite.ctx.budget, self._previous, spent)

    async def _call_setup(self) -> None:
        fn = self.suite.setup
        if fn is None:
            return
        params = list(inspect.signature(fn).parameters)
        args: list[Any] = []
        if params:
            args = [
                self.suite.spec
                if params[0] == "suite"
                else getattr(self.suite.target, "client", None)
            ]
        try:  # off the loop, without a time limit (a signal still ends the run); SystemExit is its error
            # letta-evals 0.7+: a (client, model_handle) setup runs once per model handle
            for extra in [[m] for m in self.suite.target.models()] if len(params) == 2 else [[]]:
                await usercode.run(fn, *args, *extra, what="setup script", limited=False)
        except Exception as exc:
            raise ConfigError(
                f"setup script raised {usercode.describe(exc)}",
                key="setup_script",
                file=str(self.suite.path),
            ) from None

    async def execute(self) -> Summary:
        """Run every job; write results.jsonl and return the summary (``partial`` if interrupted)."""
        return self.finish(await self.run_records())

    async def run_records(self, progress: Tracker | None = None) -> RunOutcome:
        """Run every job of this process into its results file, and say how it went."""
        out = self.opts.output
        out.mkdir(parents=True, exist_ok=True)
        results_path = out / self.opts.results_name
        self.load_previous()
        for part in self._parts():
            part.prepare()  # start-up imports (aiohttp, a vendor's SDK): not the samples' time, duration_s
        started = datetime.now(UTC)
        t0 = time.perf_counter()
        fh = open_append(results_path, truncate=not self.opts.resume)
        interrupted: int | None = None
        loop = asyncio.get_running_loop()
        main_task = asyncio.current_task()
        assert main_task is not None  # run_records runs in a task (asyncio.run's)

        def on_signal(
            signum: int,
        ) -> None:  # runs between two bytecodes: record, then cancel from the loop
            nonlocal interrupted
            if interrupted is None:
                interrupted = signum
                self._stopping = True  # workers start no further job
                loop.call_soon_threadsafe(main_task.cancel)

        own_progress = progress is None  # a caller's progress line is the caller's to close
        if progress is None:
            progress = Progress(self.total_jobs(), enabled=self.opts.progress)
        with on_signals(on_signal), gcpolicy.streaming():
            try:
                try:
                    await self._run_all(fh, progress)
                except asyncio.CancelledError:
                    if interrupted is None:
                        raise
                    main_task.uncancel()
            finally:
                fh.flush()
                fh.close()
                if own_progress:
                    progress.close()
                await self._close()
        from ci_evals.gating.summary import Learned  # start time: the end's (finish_imports)

        learned = carried.onto(
            Learned(self._report_agents(), self._report_endpoints(), budget=self._report_budget()),
            self._previous,
        )
        return RunOutcome(started, t0, interrupted, learned)

    def finish(self, outcome: RunOutcome, *, partial: bool = False) -> Summary:
        """The summary of the records fed so far (``partial`` when interrupted, or when told)."""
        interrupted = outcome.interrupted
        return self.summarize(
            outcome.started,
            time.perf_counter() - outcome.t0,
            partial=partial or interrupted is not None,
            interrupted=cast(StopSignal, signal.Signals(interrupted).name)  # the three we handle
            if interrupted is not None
            else None,
            learned=outcome.learned,
        )

    async def _run_all(self, fh: TextIO, progress: Tracker) -> None:
        pool.configure(
            max_concurrent=self.opts.max_concurrent,
            rates=self.opts.rates,
            max_wait=self.opts.max_wait,
        )
        progress.note = lambda: pool.throttling_note(pool.endpoint_reports())
        await self._call_setup()
        try:
            for part in self._parts():
                await part.start()
        except ConfigError as exc:  # e.g. no API key: name the suite it belongs to
            if exc.file is None:
                exc.file, exc.line = str(self.suite.path), self.suite.lines.get(exc.key or "")
            raise
        jobs, plan = self.jobs(), self.plan

        async def worker() -> None:
            last_yield = time.monotonic()
            for model, sample, run in jobs:
                if self._stopping:
                    return
                rec = await plan.run_job(model, sample, run)
                self._write(fh, rec)
                progress.advance(rec)
                now = time.monotonic()
                if (
                    now - last_yield >= YIELD_SECONDS
                ):  # jobs that never suspend must not keep signals waiting
                    await asyncio.sleep(0)
                    last_yield = time.monotonic()

        n_workers = max(1, min(self.opts.max_concurrent, self.total_jobs() or 1))
        workers = [asyncio.create_task(worker()) for _ in range(n_workers)]
        # once the requests are out, if a job waits on something else; never beside user code
        work, meanwhile = self.opts.meanwhile, None
        if work is not None and not self.cpu_only() and not loaded_paths():
            meanwhile = thread_when_quiet(work, "ci-evals-meanwhile")
        try:
            await asyncio.gather(*workers)
        except BaseException:
            for w in workers:
                w.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            raise
        finally:
            if meanwhile is not None:
                meanwhile.cancel()

    def _parts(self) -> list[Target | Grader]:
        """The target, then every grader: what opens clients and agents, in that order."""
        return [self.suite.target, *(slot.grader for slot in self.suite.graders.values())]

    async def _close(self) -> None:
        for part in self._parts():
            try:
                await part.aclose()
            except Exception as exc:  # cleanup problems must not hide the verdict
                print(
                    scrub(f"warning: cleanup failed: {type(exc).__name__}: {exc}"), file=sys.stderr
                )

    def _report_agents(self) -> LettaBlock | None:
        """summary.json ``letta``: agents left on a Letta server (failed deletes) or kept on purpose."""
        ledgers = [getattr(part, "ledger", None) for part in self._parts()]
        if any(ledgers):
            return letta_report([g for g in ledgers if g is not None]) or None
        return None

    def _report_budget(self) -> BudgetReport:
        """summary.json ``cost_speed.budget``: the suite's budgets, what the run's priced calls
        cost, and why it stopped calling if it did."""
        budget = self.suite.ctx.budget
        return {
            "max_steps": budget.max_steps,
            "max_tokens": budget.max_tokens,
            "max_cost_usd": budget.max_cost_usd,
            "spent_usd": round(budget.spent_usd, 6),
            "stopped": budget.stopped,
            "stopped_samples": self.agg.errors.by_category.get("budget", 0),
        }

    def _report_endpoints(self) -> list[EndpointReport] | None:
        """summary.json ``endpoints``: each LLM endpoint's calls, throttling, settled concurrency, breaker."""
        return endpoint_reports() or None

    def _write(self, fh: TextIO, rec: ResultRecord) -> None:
        """``rec`` as one line of the results file (masked, capped), and into the aggregator."""
        if self._secrets_gen != redact.generation:
            self._secrets, self._secrets_gen = redact.known_secrets(), redact.generation
        line, written = record_line(rec, self._secrets)
        try:  # the text layer encodes the whole line before writing any of it
            fh.write(line + "\n")
        except UnicodeEncodeError:  # a grader's rationale or metadata carried a lone surrogate
            written, n = clean_value(written)
            written["replaced_chars"] = written.get("replaced_chars", 0) + n
            fh.write(record_line(written, self._secrets)[0] + "\n")
        now = time.monotonic()
        if now - self._last_flush > FLUSH_SECONDS:
            fh.flush()
            self._last_flush = now
        self.agg.add(written)

    def summarize(
        self,
        started: datetime,
        duration: float,
        *,
        partial: bool,
        interrupted: StopSignal | None = None,
        learned: Learned,
    ) -> Summary:
        """The summary of the records fed so far, the run's options and what it learned."""
        from ci_evals.gating.summary import summarize  # start time: the end's (finish_imports)

        return summarize(
            self.suite,
            self.config,
            self.agg,
            started=started,
            duration=duration,
            partial=partial,
            baseline=self.opts.baseline,
            interrupted=interrupted,
            shard=self.opts.shard,
            selection=self.opts.selection,
            learned=learned,
        )
