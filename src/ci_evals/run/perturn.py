"""Per-turn grading (letta-evals 0.9+): a sample whose ``ground_truth`` is a list, one per input turn.

Each grader grades each turn on its own: the turn's input and ground truth, and a trajectory of
that turn alone. The sample's score is the mean of the turn scores (letta-evals
``execution/grading.py::grade_per_turn``); the turns are kept in the grade's
``metadata.per_turn_grades``. Fails closed where letta-evals did not: a turn the target did not
answer, or a turn whose grading errored, makes the sample's grade errored.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable

from typing_extensions import TypedDict

from ci_evals.core.rule import passes
from ci_evals.core.sample import Sample
from ci_evals.core.trajectory import Trajectory
from ci_evals.results.records import Grade, make_grade
from ci_evals.suite.loader import GraderSlot

GradeOne = Callable[[GraderSlot, Sample, Trajectory], Awaitable[tuple[Grade, str]]]
"""How one grader grades one sample: (its grade, the submission it graded)."""


class TurnGrade(TypedDict):
    """One turn's entry in a per-turn grade's ``metadata.per_turn_grades``."""

    turn: int
    score: float
    rationale: str | None
    submission: str


def turn_trajectory(traj: Trajectory, i: int) -> Trajectory:
    """Turn ``i`` alone, with the trajectory's memory blocks, usage and metadata."""
    return Trajectory(
        turns=[traj.turns[i]] if i < len(traj.turns) else [],
        memory_blocks=traj.memory_blocks,
        usage=traj.usage,
        metadata=traj.metadata,
    )


async def grade_per_turn(
    grade_one: GradeOne, slot: GraderSlot, sample: Sample, truths: list[str], traj: Trajectory
) -> tuple[Grade, str]:
    """(grade, submission) of one grader over every turn of ``sample``, whose ground truths (one
    per turn) are ``truths``."""
    inputs = sample.input if isinstance(sample.input, list) else [sample.input] * len(truths)
    turns: list[TurnGrade] = []
    for i, truth in enumerate(truths):
        if i >= len(traj.turns) or not traj.turns[i]:
            message = f"turn {i}: the target returned no messages for this turn"
            return _errored(message, "extraction", turns), ""
        turn_sample = sample.model_copy(update={"input": inputs[i], "ground_truth": truth})
        grade, submission = await grade_one(slot, turn_sample, turn_trajectory(traj, i))
        if grade.get("error"):
            return _errored(
                f"turn {i}: {grade.get('error')}",
                grade.get("error_category") or "grading",
                turns,
            ), ""
        turn_score = grade.get("score")
        assert turn_score is not None  # a grade without an error has its score (make_grade)
        turns.append(
            {
                "turn": i,
                "score": turn_score,
                "rationale": grade.get("rationale"),
                "submission": submission,
            }
        )
    score = math.fsum(t["score"] for t in turns) / len(turns)
    passed_turns = sum(1 for t in turns if t["score"] >= 1.0)
    grade = make_grade(
        score,
        passes(score, *slot.rule),
        f"{passed_turns}/{len(turns)} turns passed (mean {score:.4f})",
        {"per_turn_grades": turns, "turns_passed": passed_turns, "turns_total": len(turns)},
    )
    return grade, " | ".join(f"[Turn {t['turn']}] {t['submission']}" for t in turns)


def _errored(message: str, category: str, turns: list[TurnGrade]) -> Grade:
    return make_grade(metadata={"per_turn_grades": turns}, error=message, category=category)
