"""OpenAI-format model graders: ``score_model`` (a number in ``range``) and ``label_model`` (a label).

Both take ``input``, a list of chat messages whose text is templated with ``{{ item.x }}`` (the
dataset row, nested paths allowed) and ``{{ sample.output_text }}`` / ``{{ sample.output_json }}``
/ ``{{ sample.output_tools }}`` (the extracted submission and the trajectory's tool calls). The
judge answers in JSON mode with ``{"result": ..., "steps": [{"description", "conclusion"}]}``;
an instruction saying so is added to the first system message (or as one).

* ``score_model``: ``result`` is clamped to ``range`` (default [0, 1]) and normalised to 0–1.
  ``pass_threshold`` is in ``range`` units, as in OpenAI's API (normalised with the score).
* ``label_model``: ``result`` must be one of ``labels``; the score is 1 when it is one of
  ``passing_labels``, else 0. A label outside ``labels`` is an error grade.

A missing template variable, a non-numeric result or bad JSON is an error grade for that sample.
With ``judge_repeats: K`` the judge is asked K times and the scores averaged
(:mod:`ci_evals.graders.repeats`); the metadata and rationale are the first answer's.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator
from typing_extensions import TypeVar

from ci_evals._util.errors import ConfigError, unknown_choice
from ci_evals.config.specs import Context, Strict
from ci_evals.config.templating import TemplateError, render
from ci_evals.core.sample import GradeResult, Sample
from ci_evals.core.trajectory import Trajectory
from ci_evals.graders.judge_prompt import JudgeReplyError, number_field
from ci_evals.graders.repeats import reduce_repeats, repeat_index
from ci_evals.graders.rubric import JudgeGrader, JudgeSpecMixin
from ci_evals.graders.string_check import openai_context
from ci_evals.llm.cost import Tally
from ci_evals.llm.errors import LLMError
from ci_evals.llm.openai_api import effective_temperature

_TEXT_PARTS = ("input_text", "output_text", "text")


class InputMessage(Strict):
    """One templated message of a model grader's ``input``."""

    role: Literal["system", "developer", "user", "assistant"]
    content: str | list[dict[str, Any]]
    type: Literal["message"] | None = None

    @field_validator("content")
    @classmethod
    def _parts(cls, value: Any) -> Any:
        if isinstance(value, list):
            for part in value:
                kind = part.get("type")
                if kind in _TEXT_PARTS:
                    if not isinstance(part.get("text"), str):
                        raise ValueError(f"a '{kind}' content part needs a 'text' string")
                elif kind == "input_image":
                    if not isinstance(part.get("image_url"), str):
                        raise ValueError(
                            "an 'input_image' content part needs an 'image_url' string"
                        )
                else:
                    raise ValueError(
                        unknown_choice("content part type", kind, [*_TEXT_PARTS, "input_image"])
                    )
        return value


class SamplingParams(Strict):
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    seed: int | None = None
    max_completions_tokens: int | None = Field(
        default=None, gt=0, description="OpenAI's spelling; sent as max_completion_tokens."
    )
    max_completion_tokens: int | None = Field(default=None, gt=0)
    reasoning_effort: Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"] | None = (
        None
    )

    def wire(self, model: str) -> dict[str, Any]:
        """The request parameters (reasoning models get temperature 1.0)."""
        return {
            "temperature": effective_temperature(model, self.temperature),
            "top_p": self.top_p,
            "seed": self.seed,
            "max_completion_tokens": self.max_completions_tokens or self.max_completion_tokens,
            "reasoning_effort": self.reasoning_effort,
        }


class ModelGraderSpec(JudgeSpecMixin):
    input: list[InputMessage] = Field(
        min_length=1, description="Templated chat messages sent to the judge."
    )
    model: str = Field(default="gpt-4o-mini", description="Judge model.")
    sampling_params: SamplingParams = Field(default_factory=SamplingParams)


class ScoreModelSpec(ModelGraderSpec):
    kind: Literal["score_model"] = "score_model"
    range: tuple[float, float] = Field(
        default=(0.0, 1.0), description="[min, max] of the judge's result."
    )

    @model_validator(mode="after")
    def _check_range(self) -> ScoreModelSpec:
        lo, hi = self.range
        if not lo < hi:
            raise ValueError(f"range must be [min, max] with min < max; got [{lo:g}, {hi:g}]")
        if self.pass_threshold is not None and not lo <= self.pass_threshold <= hi:
            raise ValueError(
                f"pass_threshold {self.pass_threshold:g} is outside range [{lo:g}, {hi:g}]"
            )
        return self


class LabelModelSpec(ModelGraderSpec):
    kind: Literal["label_model"] = "label_model"
    labels: list[str] = Field(min_length=1, description="The labels the judge may choose from.")
    passing_labels: list[str] = Field(min_length=1, description="Labels that pass (score 1).")

    @model_validator(mode="after")
    def _subset(self) -> LabelModelSpec:
        unknown = [p for p in self.passing_labels if p not in self.labels]
        if unknown:
            raise ValueError(unknown_choice("passing label", unknown[0], self.labels))
        return self


def _chat_content(
    content: str | list[dict[str, Any]], ctx: dict[str, Any]
) -> str | list[dict[str, Any]]:
    """Rendered content in the chat-completions shape (text parts and image URLs)."""
    if isinstance(content, str):
        return render(content, ctx)
    parts: list[dict[str, Any]] = []
    for part in content:
        if part["type"] == "input_image":
            image: dict[str, Any] = {"url": render(part["image_url"], ctx)}
            if part.get("detail"):
                image["detail"] = part["detail"]
            parts.append({"type": "image_url", "image_url": image})
        else:
            parts.append({"type": "text", "text": render(part["text"], ctx)})
    return parts


ModelSpecT_co = TypeVar(
    "ModelSpecT_co", bound=ModelGraderSpec, covariant=True, default=ModelGraderSpec
)


class ModelGrader(JudgeGrader[ModelSpecT_co]):
    """What score_model and label_model share: templated messages, the JSON call, metadata."""

    answer_format = ""

    def __init__(self, name: str, spec: ModelSpecT_co, ctx: Context) -> None:
        super().__init__(name, spec, ctx)
        self.params = spec.sampling_params.wire(spec.model)

    def messages(
        self, sample: Sample, submission: str, trajectory: Trajectory
    ) -> list[dict[str, Any]]:
        """The judge's messages; raises TemplateError for a variable the sample lacks."""
        ctx = openai_context(sample, submission, trajectory)
        out = [
            {
                "role": "system" if m.role == "developer" else m.role,
                "content": _chat_content(m.content, ctx),
            }
            for m in self.spec.input
        ]
        first = out[0]
        if first["role"] == "system" and isinstance(first["content"], str):
            first["content"] = f"{first['content']}\n\n{self.answer_format}"
        else:
            out.insert(0, {"role": "system", "content": self.answer_format})
        return out

    async def grade(self, sample: Sample, submission: str, trajectory: Trajectory) -> GradeResult:
        tally = Tally()
        model = self.spec.model
        try:
            messages = self.messages(sample, submission, trajectory)
        except TemplateError as exc:
            return self.error_grade(str(exc), model=model)
        run, k = self.run_index(trajectory), self.spec.judge_repeats
        scores: list[float] = []
        answers: list[
            tuple[dict[str, Any], dict[str, Any]]
        ] = []  # (reply, its metadata) per repeat
        try:
            for j in range(
                k
            ):  # one after another: the first failure stops them (ci_evals.graders.repeats)
                reply = await self.ask_json(
                    tally,
                    model=model,
                    messages=messages,
                    params=self.params,
                    repeat=repeat_index(run, k, j),
                )
                score, meta = self.interpret(reply)
                scores.append(score)
                answers.append((reply, meta))
        except LLMError as exc:
            return self.error_grade(exc.message, tally, exc.category, model=model)
        except JudgeReplyError as exc:
            return self.error_grade(str(exc), tally, model=model)
        reply, meta = answers[0]  # the first repeat's reply is the grade's
        given = reply.get("steps")
        steps = given if isinstance(given, list) else []
        metadata = {"model": model, **meta, "steps": steps, **tally.metadata()}
        score, rationale = scores[0], _steps_text(steps) or None
        if k > 1:
            score, rationale, metadata["judge_repeats"] = reduce_repeats(
                scores, rationale, self.rule
            )
        return GradeResult(score=score, rationale=rationale, metadata=metadata)

    def interpret(self, reply: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        """(score in 0–1, metadata) from the judge's JSON; raises JudgeReplyError."""
        raise NotImplementedError


def _answer_format(result: str) -> str:
    """The reply shape OpenAI's model graders ask for: ``{result, steps}``, ``result`` described."""
    return (
        "Respond with a JSON object of this shape: "
        f'{{"result": <{result}>, '
        '"steps": [{"description": "<what you checked>", "conclusion": "<what you found>"}]}'
    )


class ScoreModelGrader(ModelGrader[ScoreModelSpec]):
    """``score_model``: the judge returns a number in ``range``; the score is it, normalised."""

    spec_model = ScoreModelSpec

    def __init__(self, name: str, spec: ScoreModelSpec, ctx: Context) -> None:
        lo, hi = spec.range
        if spec.pass_threshold is not None and (lo, hi) != (0.0, 1.0):
            # The threshold is written in range units; the runner compares normalised scores.
            spec = spec.model_copy(
                update={"pass_threshold": (spec.pass_threshold - lo) / (hi - lo)}
            )
        self.answer_format = _answer_format(f"a number from {lo:g} to {hi:g}")
        super().__init__(name, spec, ctx)

    def interpret(self, reply: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        lo, hi = self.spec.range
        result = number_field(reply, "result")
        clamped = min(hi, max(lo, result))
        return (clamped - lo) / (hi - lo), {"result": result, "range": [lo, hi]}


class LabelModelGrader(ModelGrader[LabelModelSpec]):
    """``label_model``: the judge picks one of ``labels``; 1 if it is a passing label, else 0."""

    spec_model = LabelModelSpec

    def __init__(self, name: str, spec: LabelModelSpec, ctx: Context) -> None:
        if len(set(spec.labels)) != len(spec.labels):
            raise ConfigError("labels must be distinct", key=f"graders.{name}.labels")
        self.answer_format = _answer_format(f"exactly one of {json.dumps(spec.labels)}")
        super().__init__(name, spec, ctx)

    def interpret(self, reply: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        label = reply.get("result")
        if not isinstance(label, str):
            raise JudgeReplyError(f"judge reply has no label in 'result' (got {label!r})")
        label = label.strip()
        if label not in self.spec.labels:
            raise JudgeReplyError(f"label {label!r} is not one of {', '.join(self.spec.labels)}")
        return (1.0 if label in self.spec.passing_labels else 0.0), {"label": label}


def _steps_text(steps: list[Any]) -> str:
    """The judge's reasoning steps as one readable rationale."""
    lines = []
    for step in steps:
        if isinstance(step, dict):
            desc, concl = step.get("description"), step.get("conclusion")
            lines.append(": ".join(str(x) for x in (desc, concl) if x))
        elif step:
            lines.append(str(step))
    return "\n".join(line for line in lines if line)
