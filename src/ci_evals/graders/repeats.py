"""``judge_repeats: K``: a judge asked K times about one submission, its answers reduced to one grade.

Every LLM and agent judge takes it (rubric / model_judge, score_model, label_model, the Letta
judge): a cheaper way than ``num_runs`` to measure and cut a judge's noise, as only the judge is
asked again, never the target. Its parts, shared by those graders:

* the key: repeat ``j`` of run ``r`` is LLM call repeat ``r * K + j`` (``repeat`` only enters the
  response cache's key), so a cache keeps the K answers apart and a rerun gets the same K back;
  with K = 1 that is ``r``, the call and key every judge made before;
* the calls are made one after another and the first failure stops them: a grade with a failed
  repeat is an error grade with that failure's message (fail closed), never a mean of the rest;
* the reduction (:func:`reduce_repeats`): the score is the mean of the K scores, and the runner
  decides ``passed`` on it by the metric's rule as for any grade; each repeat's own pass by that
  same rule (:func:`ci_evals.core.rule.passes`) goes into the metadata with its score,
  ``judge_repeats: {scores: [...], passed: [...]}``, for the aggregator to measure how often the
  judge disagrees with itself.
"""

from __future__ import annotations

import statistics
from typing import Any

from pydantic import Field

from ci_evals.config.specs import GraderSpec
from ci_evals.core.rule import passes

MAX_JUDGE_REPEATS = 50
"""The most judge calls per grade a suite may ask for: more is a typo, or a bill, not a measurement."""
SHOWN = 10
"""The rationale lists the scores of this many repeats at most (then their mean and range)."""


class JudgeRepeatsSpec(GraderSpec):
    """The ``judge_repeats`` key every judge's spec has (and no other grader's: strict specs)."""

    judge_repeats: int = Field(
        default=1,
        ge=1,
        le=MAX_JUDGE_REPEATS,
        strict=True,
        description=f"Ask the judge this many times per sample (1-{MAX_JUDGE_REPEATS}) and average: "
        "costs K times the judge calls, measures and cuts its noise.",
    )


def repeat_index(run: int, k: int, j: int) -> int:
    """The LLM call's ``repeat`` for judge repeat ``j`` of ``k`` in run ``run``: distinct for every
    (run, j), and ``run`` itself when k is 1."""
    return run * k + j


def reduce_repeats(
    scores: list[float], rationale: str | None, rule: tuple[str, float] | None, *, note: bool = True
) -> tuple[float, str | None, dict[str, Any]]:
    """(score, rationale, the ``judge_repeats`` metadata) of K > 1 successful repeats.

    ``rationale`` is the first repeat's; with ``note`` it gets ``(judged K times: scores a, b, c)``.
    ``rule`` is the metric's per-sample rule (``Grader.rule``); without one ``passed`` is None:
    no pass is ever guessed with a rule the metric does not have.
    """
    mean = statistics.fmean(scores)
    info: dict[str, Any] = {
        "scores": list(scores),
        "passed": None if rule is None else [passes(s, *rule) for s in scores],
    }
    if note:
        shown = (
            f"scores {', '.join(f'{s:.3g}' for s in scores)}"
            if len(scores) <= SHOWN
            else f"mean {mean:.3g}, from {min(scores):.3g} to {max(scores):.3g}"
        )
        line = f"(judged {len(scores)} times: {shown})"
        rationale = f"{rationale}\n{line}" if rationale else line
    return mean, rationale, info
