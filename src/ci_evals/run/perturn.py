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
from typing import Any

from ci_evals.core.rule import passes
from ci_evals.core.trajectory import Trajectory
from ci_evals.results.records import Grade, make_grade

GradeOne = Callable[[Any, Any, Trajectory], Awaitable[tuple[dict[str, Any], str]]]


def turn_trajectory(traj: Trajectory, i: int) -> Trajectory:
    """Turn ``i`` alone, with the trajectory's memory blocks, usage and metadata."""
    return Trajectory(
        turns=[traj.turns[i]] if i < len(traj.turns) else [],
        memory_blocks=traj.memory_blocks,
        usage=traj.usage,
        metadata=traj.metadata,
    )


async def grade_per_turn(
    grade_one: GradeOne, slot, sample, traj: Trajectory
) -> tuple[dict[str, Any], str]:
    """(grade dict, submission) of one grader over every turn of ``sample``."""
    truths: list[str] = sample.ground_truth
    inputs = sample.input if isinstance(sample.input, list) else [sample.input] * len(truths)
    turns: list[dict[str, Any]] = []
    for i, truth in enumerate(truths):
        if i >= len(traj.turns) or not traj.turns[i]:
            message = f"turn {i}: the target returned no messages for this turn"
            return _errored(message, "extraction", turns), ""
        turn_sample = sample.model_copy(update={"input": inputs[i], "ground_truth": truth})
        grade, submission = await grade_one(slot, turn_sample, turn_trajectory(traj, i))
        if grade.get("error"):
            return _errored(
                f"turn {i}: {grade['error']}", grade.get("error_category", "grading"), turns
            ), ""
        turns.append(
            {
                "turn": i,
                "score": grade["score"],
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


def _errored(message: str, category: str, turns: list[dict[str, Any]]) -> Grade:
    return make_grade(metadata={"per_turn_grades": turns}, error=message, category=category)
