"""User-facing data models: a dataset ``Sample`` and a grader's ``GradeResult``.

Names and fields match letta-evals so that grader files written for it load unchanged.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Sample(BaseModel):
    """One dataset row.

    ``input`` is a string or a list of strings (one user message per turn). ``extra_vars`` holds
    the row's other columns, available to templates as ``{{ item.<column> }}``.
    """

    model_config = ConfigDict(extra="forbid", defer_build=True)

    id: int | str
    input: str | list[str]
    ground_truth: str | list[str] | None = (
        None  # a list: one per input turn, each turn graded on its own
    )
    metadata: dict[str, Any] = Field(default_factory=dict)
    tags: list[str] = Field(default_factory=list)
    agent_args: dict[str, Any] | None = None
    rubric_vars: dict[str, Any] | None = None
    extra_vars: dict[str, Any] = Field(default_factory=dict)
    rubric: str | None = None
    """This sample's own rubric (dataset ``rubric`` / ``rubric_path``); overrides the grader's."""

    def item(self) -> dict[str, Any]:
        """The row as OpenAI graders see it (``{{ item.x }}``): fields plus extra columns."""
        row: dict[str, Any] = {
            "id": self.id,
            "input": self.input,
            "ground_truth": self.ground_truth,
            "metadata": self.metadata,
            "tags": self.tags,
        }
        if self.agent_args is not None:
            row["agent_args"] = self.agent_args
        if self.rubric_vars is not None:
            row["rubric_vars"] = self.rubric_vars
        row.update(self.extra_vars)
        return row


class GradeResult(BaseModel):
    """What a grader returns: a score in [0, 1], why, and anything else worth keeping.

    ``error`` is set when grading could not be done (the judge failed, the grader raised); such a
    grade scores 0 and the sample is counted as errored, not as a low score.
    """

    model_config = ConfigDict(extra="forbid", defer_build=True)

    score: float
    rationale: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    error: str | None = None


Grade = GradeResult
