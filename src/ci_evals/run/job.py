"""One job: one (model, sample, run) through the target and the graders, into one results record.

The target answers the sample; each grader's extractor reads its submission from the trajectory
and the grader grades it, the sample's graders concurrently. Failures are data: a target,
extraction or grading failure becomes an errored grade (score 0, counted), never a dropped sample.
What every job asks of the suite (its grader slots, whether they are all built-in and synchronous,
whether the target must return memory blocks) is asked once, in :class:`Plan`.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from ci_evals._util.errors import SampleError
from ci_evals._util.textsafe import clean_sample, clean_trajectory
from ci_evals.config.budget import BudgetExceeded
from ci_evals.core.rule import passes
from ci_evals.core.sample import GradeResult, Sample
from ci_evals.core.trajectory import Trajectory
from ci_evals.graders.tool import ToolGrader
from ci_evals.results.records import Grade, RecordError, ResultRecord, make_grade
from ci_evals.run.perturn import grade_per_turn
from ci_evals.suite.loader import GraderSlot, LoadedSuite
from ci_evals.usercode import lane as usercode


def _grade_dict(g: GradeResult, rule: tuple[str, float]) -> Grade:
    if g.error:  # a judge stopped by the run's budget says so (error_category "budget")
        cat = g.metadata.get("error_category") if g.metadata else None
        return make_grade(
            rationale=g.rationale,
            metadata=g.metadata,
            error=g.error,
            category=cat if isinstance(cat, str) and cat else "grading",
        )
    return make_grade(g.score, passes(g.score, *rule), g.rationale, g.metadata)


def _builtin_graders(slots: list[GraderSlot]) -> list[ToolGrader] | None:
    """Each slot's grader when every one is a built-in tool function reading a built-in extractor
    (pure, fast, synchronous), else None."""
    graders = [s.grader for s in slots]
    if all(
        isinstance(g, ToolGrader) and g.builtin and not s.extractor.custom
        for g, s in zip(graders, slots, strict=True)
    ):
        return [g for g in graders if isinstance(g, ToolGrader)]
    return None


def _grade_builtin(
    slot: GraderSlot, grader: ToolGrader, sample: Sample, traj: Trajectory
) -> tuple[Grade, str]:
    """:meth:`Plan.grade_one` for a built-in grader and extractor, without the event loop."""
    try:
        submission = slot.extractor(traj)
    except Exception as exc:
        return _extraction_error(slot, exc), ""
    try:
        return grader.grade_builtin(sample, submission, slot.rule), submission
    except Exception as exc:  # graders should not raise, but a bug must not lose the sample
        return _grader_error(slot, exc), submission


def _extraction_error(slot: GraderSlot, exc: Exception) -> Grade:
    """A failing extractor (a custom one's bug) is that sample's extraction error for this grader."""
    return make_grade(
        error=f"extractor '{slot.extractor.name}' failed: {usercode.describe(exc)}",
        category="extraction",
    )


def _grader_error(slot: GraderSlot, exc: BaseException) -> Grade:
    return make_grade(
        error=f"grader '{slot.name}' raised {type(exc).__name__}: {exc}", category="grading"
    )


def _record(
    sample: Sample,
    run: int,
    model: str | None,
    error: RecordError | None,
    grades: dict[str, Grade],
    submission: dict[str, Any],
    usage: dict[str, int],
) -> ResultRecord:
    """A results line's keys, in the order every line has them (a graded job's and a failed one's)."""
    return {
        "sample_id": sample.id,
        "run": run,
        "model": model,
        "input": sample.input,
        "ground_truth": sample.ground_truth,
        "tags": sample.tags,
        "error": error,
        "grades": grades,
        "submission": submission,
        "usage": usage,
    }


def _timing(rec: ResultRecord, elapsed: float, queued: float) -> None:
    """``duration_s`` is the sample's own work; time it waited for a shared resource is ``queued_s``."""
    rec["duration_s"] = round(max(0.0, elapsed - queued), 6)
    if queued:
        rec["queued_s"] = round(queued, 6)


def _latency(meta: dict[str, Any], elapsed: float) -> float | None:
    """The target's own time for the sample: its wall time less what it waited in ci-evals' queue
    and rate-limit pauses; a recorded answer's own (``latency_s``, a replay); None when every model
    call was answered from the LLM cache (nothing was measured)."""
    if meta.pop("cached", False):
        return None
    if "latency_s" in meta:  # a recorded answer: its own latency, or none (replaying took none)
        recorded = meta.pop("latency_s")
        if isinstance(recorded, int | float) and not isinstance(recorded, bool) and recorded >= 0:
            return round(float(recorded), 6)
        return None
    return round(max(0.0, elapsed - (meta.get("queued_s") or 0.0)), 6)


def _steps(meta: dict[str, Any], traj: Trajectory) -> int:
    """The agent's steps: as the target counted them (model calls, Letta's ``step_count``), else
    the assistant messages of the trajectory (one per model call)."""
    steps = meta.pop("steps", None)
    if type(steps) is int and steps >= 0:
        return steps
    return sum(1 for turn in traj.turns for m in turn if m.role == "assistant")


def _over_budget(suite: LoadedSuite, steps: int, usage: dict[str, int]) -> BudgetExceeded | None:
    """A sample past its own budgets once the target returned (a command, HTTP or recorded target
    cannot be stopped on the way; the model and Letta targets stop themselves)."""
    tokens = usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0)
    try:
        suite.ctx.budget.check_sample(steps, tokens)
    except BudgetExceeded as exc:
        return exc
    return None


def _spent(exc: Exception) -> tuple[dict[str, int], dict[str, Any]] | None:
    """The tokens and cost a failed sample's calls spent (a target that stopped on a budget, or
    failed after some calls, says so on its SampleError: ``usage``, ``cost_usd``, ``unpriced``)."""
    usage, cost, unpriced = (getattr(exc, k, None) for k in ("usage", "cost_usd", "unpriced"))
    if not usage and cost is None and not unpriced:
        return None
    tokens = {
        "prompt_tokens": int((usage or {}).get("prompt_tokens", 0)),
        "completion_tokens": int((usage or {}).get("completion_tokens", 0)),
    }
    target: dict[str, Any] = {}
    if cost is not None:
        target["cost_usd"] = cost
    if unpriced:
        target["unpriced"] = unpriced
    return tokens, target


class Plan:
    """What every job of a run asks of the suite, asked once, and the running of one job."""

    def __init__(self, suite: LoadedSuite) -> None:
        self.suite = suite
        self.slots = list(suite.graders.values())
        self.builtin = _builtin_graders(self.slots)
        """The graders when all are built-in and synchronous (graded without a coroutine each)."""
        self.needs_memory = suite.needs_memory

    async def grade_one(
        self, slot: GraderSlot, sample: Sample, traj: Trajectory
    ) -> tuple[Grade, str]:
        truths = sample.ground_truth
        if isinstance(truths, list):  # letta-evals 0.9+: each turn graded on its own
            return await grade_per_turn(self.grade_one, slot, sample, truths, traj)
        try:
            submission = await slot.extractor.extract(traj)
        except Exception as exc:  # a custom extractor failing is that sample's extraction error
            return _extraction_error(slot, exc), ""
        grader = slot.grader
        try:
            if isinstance(grader, ToolGrader) and grader.builtin:
                g = grader.grade_sync(sample, submission)
            else:
                g = await grader.grade(sample, submission, traj)
        except asyncio.CancelledError as exc:
            if usercode.ours():  # the run is being interrupted
                raise
            return _grader_error(
                slot, exc
            ), submission  # one a client timeout raised: this grade's error
        except Exception as exc:  # graders should not raise, but a bug must not lose the sample
            return _grader_error(slot, exc), submission
        return _grade_dict(g, slot.rule), submission

    async def run_job(self, model: str | None, sample: Sample, run: int) -> ResultRecord:
        """The record of one job: the sample answered and graded, or its error."""
        t0 = time.perf_counter()
        sample, replaced = clean_sample(sample)
        suite, slots = self.suite, self.slots
        try:
            traj = await suite.target.run(
                sample, run=run, model=model, need_memory=self.needs_memory
            )
            latency = _latency(traj.metadata, time.perf_counter() - t0)
            if not any(traj.turns) and not traj.memory_blocks:
                raise SampleError("target returned an empty trajectory (no messages)")
            replaced += clean_trajectory(traj) + traj.metadata.pop("replaced_chars", 0)
            steps = _steps(traj.metadata, traj)
            over = _over_budget(suite, steps, traj.usage.to_dict())
            if over is not None:
                raise over
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            return self._failed(model, sample, run, exc, replaced, t0)
        traj.metadata.setdefault(
            "run", run
        )  # judges key their cache on it: repeats stay independent
        pairs: list[tuple[Grade, str]]
        if self.builtin is not None and not isinstance(sample.ground_truth, list):
            pairs = [  # no coroutine per grade
                _grade_builtin(s, g, sample, traj) for s, g in zip(slots, self.builtin, strict=True)
            ]
        elif len(slots) == 1 or all(
            isinstance(s.grader, ToolGrader) and s.grader.builtin for s in slots
        ):
            pairs = [await self.grade_one(s, sample, traj) for s in slots]
        else:
            pairs = list(await asyncio.gather(*(self.grade_one(s, sample, traj) for s in slots)))
        grades = {s.name: p[0] for s, p in zip(slots, pairs, strict=True)}
        submission = {s.name: p[1] for s, p in zip(slots, pairs, strict=True)}
        if suite.reward is not None:
            grades["reward"] = await suite.reward.grade(
                sample, grades, submission, traj, model, {"total": time.perf_counter() - t0}
            )
        rec = _record(sample, run, model, None, grades, submission, traj.usage.to_dict())
        rec["latency_s"] = latency
        rec["steps"] = steps
        rec["tool_calls"] = len(traj.tool_calls())
        rec["trajectory"] = {
            "turns": [[m.to_dict() for m in t] for t in traj.turns],
            "memory_blocks": dict(traj.memory_blocks),
        }
        meta = traj.metadata
        if meta.get("cache_hits"):
            rec["cache_hits"] = meta["cache_hits"]
        if meta.get("retries"):
            rec["retries"] = meta["retries"]
        if meta.get("throttled"):
            rec["throttled"] = meta["throttled"]
        extra = {
            k: v
            for k, v in meta.items()
            if k not in ("cache_hits", "retries", "throttled", "run", "queued_s")
        }
        if extra:
            rec["target"] = extra
        if replaced:
            rec["replaced_chars"] = replaced
        _timing(rec, time.perf_counter() - t0, meta.get("queued_s", 0.0))
        return rec

    def _failed(
        self, model: str | None, sample: Sample, run: int, exc: Exception, replaced: int, t0: float
    ) -> ResultRecord:
        """The record of a job whose target failed: every metric's grade errored with its error."""
        msg = str(exc) if isinstance(exc, SampleError) else f"{type(exc).__name__}: {exc}"
        category = exc.category if isinstance(exc, SampleError) else "target"
        rec = _record(
            sample,
            run,
            model,
            {"category": category, "message": msg},
            {
                n: make_grade(error=f"{category} error: {msg}", category=category)
                for n in self.suite.metric_names
            },
            {n: "" for n in self.suite.graders},
            {"prompt_tokens": 0, "completion_tokens": 0},
        )
        retries = getattr(exc, "retries", 0)
        if retries:
            rec["retries"] = retries
        spent = _spent(exc)  # what the sample's calls cost before it failed: the run's total has it
        if spent:
            rec["usage"], rec["target"] = spent
        if replaced:
            rec["replaced_chars"] = replaced
        _timing(rec, time.perf_counter() - t0, getattr(exc, "queued_s", 0.0))
        return rec
