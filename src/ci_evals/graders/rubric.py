"""LLM-as-judge graders: the shared JSON-judge machinery and the rubric grader.

``kind: rubric`` (letta-evals 0.5 also calls it ``model_judge``) has two modes (``rubric_mode``):

* ``wrapped`` (letta-evals 0.4-0.16): the judge gets the system prompt below and a user prompt made
  of the rubric (placeholders filled), the original input, the ground truth (when there is one)
  and the submission, in JSON mode.
* ``verbatim`` (letta-evals 0.17+): the rubric is the whole user prompt after the ``str.format``
  template rules (see :func:`ci_evals.config.templating.brace_parts`); the only system prompt is the
  grader's ``system_prompt``; the reply is requested with the ``{score, rationale}`` JSON schema.

The default is chosen by :func:`default_mode`. A sample's own ``rubric`` replaces the grader's
in both modes. The reply must carry ``score`` and ``rationale``; the score is clamped to [0, 1]. A judge that cannot be reached, or whose reply is
not usable, gives an *error* grade (score 0, counted as errored), never a silent low score.

:class:`JudgeGrader` holds what every LLM judge shares (client, JSON call, parse, error grade and
usage metadata); the OpenAI-format ``score_model`` / ``label_model`` graders build on it too.
"""

from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Iterable
from typing import Any, Literal

from pydantic import Field, model_validator
from typing_extensions import TypeVar

from ci_evals._util.errors import ConfigError
from ci_evals._util.registry import GRADER_KINDS
from ci_evals.config.specs import MAX_TIMEOUT, Context
from ci_evals.config.templating import TemplateError
from ci_evals.core.sample import GradeResult, Sample
from ci_evals.core.trajectory import Trajectory
from ci_evals.graders.base import Grader
from ci_evals.graders.judge_prompt import (
    JUDGE_SYSTEM_PROMPT,
    STANDARD_PLACEHOLDERS,
    JudgeReplyError,
    build_judge_prompt,
    check_rubric_vars,
    fill_rubric,
    input_text,
    number_field,
    parse_json_object,
)
from ci_evals.graders.repeats import JudgeRepeatsSpec, reduce_repeats, repeat_index
from ci_evals.graders.rubric_modes import (
    JSON_OBJECT,
    SCHEMA_FORMAT,
    check_verbatim_sample,
    default_mode,
    placeholders,
    verbatim_messages,
)
from ci_evals.llm.client import LLM
from ci_evals.llm.cost import Tally
from ci_evals.llm.errors import LLMError
from ci_evals.llm.openai_api import effective_temperature
from ci_evals.llm.providers import ANTHROPIC_SAMPLING, require

# --- the shared judge base ----------------------------------------------------------------------


class JudgeSpecMixin(JudgeRepeatsSpec):
    """Connection fields every LLM judge has, and ``judge_repeats`` (ci_evals.graders.repeats)."""

    base_url: str | None = Field(
        default=None,
        description="Endpoint; default OPENAI_BASE_URL (ANTHROPIC_BASE_URL, "
        "GOOGLE_GEMINI_BASE_URL for those providers).",
    )
    api_key_env: str | None = Field(
        default=None,
        description="Environment variable with the key; default "
        "OPENAI_API_KEY (ANTHROPIC_API_KEY, GEMINI_API_KEY / GOOGLE_API_KEY).",
    )
    timeout: float = Field(
        default=120.0, gt=0, le=MAX_TIMEOUT, description="Seconds per HTTP attempt."
    )
    max_retries: int = Field(
        default=5, ge=0, description="Retries on 429, 5xx, timeouts and dropped connections."
    )


JudgeSpecT_co = TypeVar(
    "JudgeSpecT_co", bound=JudgeSpecMixin, covariant=True, default=JudgeSpecMixin
)


class JudgeGrader(Grader[JudgeSpecT_co]):
    """Base of the LLM judges: one LLM client, a JSON-mode call, error grades with usage metadata."""

    def __init__(self, name: str, spec: JudgeSpecT_co, ctx: Context) -> None:
        super().__init__(name, spec, ctx)
        provider = getattr(spec, "provider", "openai")
        require(provider, f"graders.{name}.provider")
        # Constructing LLM reads no environment and opens nothing: safe offline.
        self.llm: LLM = LLM(
            provider=provider,
            base_url=spec.base_url,
            api_key_env=spec.api_key_env,
            timeout=spec.timeout,
            max_retries=spec.max_retries,
            cache_dir=ctx.cache_dir,
            owner=f"graders.{name}",
            budget=ctx.budget,  # asked before every judge call, charged after each
            pricing=ctx.pricing,
        )

    def prepare(self) -> None:
        self.llm.prepare()

    async def start(self) -> None:
        await self.llm.start()

    async def aclose(self) -> None:
        await self.llm.aclose()

    async def ask_json(
        self,
        tally: Tally,
        *,
        model: str,
        messages: list[dict[str, Any]],
        params: dict[str, Any],
        repeat: int,
        response_format: dict[str, Any] = JSON_OBJECT,
    ) -> dict[str, Any]:
        """One JSON-mode judge call; the reply's JSON object. Usage goes into ``tally``.

        Raises LLMError (call failed for good) or JudgeReplyError (unusable reply). A bad reply
        is not retried: it is an error grade, as the judge's answer would be the same from cache.
        """
        try:
            result = await self.llm.chat(
                model=model,
                messages=messages,
                params=params,
                response_format=response_format,
                repeat=repeat,
            )
        except LLMError as exc:
            tally.add_error(exc)
            raise
        tally.add(result, model, self.ctx.pricing)
        return parse_json_object(result.content)

    def error_grade(
        self, message: str, tally: Tally | None = None, category: str | None = None, **meta: Any
    ) -> GradeResult:
        """Score 0 with the error in the rationale and metadata (the sample counts as errored).

        ``category`` (an LLMError's: ``budget`` when the run's max_cost_usd stopped the judge call)
        goes into the metadata as ``error_category``: the errored grade's category."""
        metadata = {"error": message, **meta, **(tally.metadata() if tally else {})}
        if category:
            metadata["error_category"] = category
        return GradeResult(
            score=0.0,
            rationale=f"Error during grading: {message}",
            error=message,
            metadata=metadata,
        )

    @staticmethod
    def run_index(trajectory: Trajectory) -> int:
        """The repeat index of the run that produced ``trajectory`` (keeps judge repeats independent)."""
        run = trajectory.metadata.get("run", 0)
        return run if isinstance(run, int) else 0


# --- the rubric grader --------------------------------------------------------------------------


class RubricSpec(JudgeSpecMixin):
    kind: Literal["rubric", "model_judge"] = "rubric"
    prompt: str | None = Field(
        default=None, description="The rubric text (exactly one of prompt / prompt_path)."
    )
    prompt_path: str | None = Field(
        default=None, description="File holding the rubric, relative to the suite."
    )
    model: str = Field(default="gpt-4o-mini", description="Judge model (for the provider).")
    temperature: float = Field(
        default=0.0,
        ge=0.0,
        le=2.0,
        description="OpenAI reasoning models (o1/o3/o4/gpt-5) get 1.0; anthropic takes none.",
    )
    provider: Literal["openai", "anthropic", "google"] = Field(
        default="openai",
        description="openai (any OpenAI-compatible server), anthropic or google (extras).",
    )
    system_prompt: str | None = Field(
        default=None, description="The judge's system prompt (replaces the standard one)."
    )
    rubric_mode: Literal["wrapped", "verbatim"] | None = Field(
        default=None,
        description="wrapped (letta-evals 0.4-0.16) or verbatim (0.17+); default: see the docs.",
    )
    rubric_vars: list[str] | None = Field(
        default=None, description="Variables every sample's rubric_vars must give."
    )
    judge_samples: int = Field(
        default=1,
        ge=1,
        le=20,
        description="Judge calls averaged per grade (the older "
        "spelling of judge_repeats: give one).",
    )

    @model_validator(mode="after")
    def _one_prompt(self) -> RubricSpec:
        if (self.prompt is None) == (self.prompt_path is None):
            which = "both" if self.prompt is not None else "neither"
            raise ValueError(f"give exactly one of 'prompt' or 'prompt_path' ({which} given)")
        return self


class RubricGrader(JudgeGrader[RubricSpec]):
    """``kind: rubric`` / ``model_judge``: an LLM scores the submission against a rubric."""

    spec_model = RubricSpec

    @classmethod
    def resolve(cls, raw: dict[str, Any]) -> type[Grader]:
        """``kind: rubric`` with an ``agent_file`` is an agent judge (a Letta agent grades)."""
        if raw.get("kind") == "rubric" and raw.get("agent_file") is not None:
            return GRADER_KINDS.get("letta_judge")  # by name: the agent judge builds on this module
        return cls

    def __init__(self, name: str, spec: RubricSpec, ctx: Context) -> None:
        super().__init__(name, spec, ctx)
        if spec.prompt_path is not None:
            self.rubric = ctx.read_text(spec.prompt_path, "rubric", f"graders.{name}.prompt_path")
        else:
            self.rubric = spec.prompt or ""
        if not self.rubric.strip():
            raise ConfigError(
                "the rubric is empty",
                key=f"graders.{name}.{'prompt_path' if spec.prompt_path else 'prompt'}",
            )
        clash = [v for v in spec.rubric_vars or [] if v in STANDARD_PLACEHOLDERS]
        if clash:
            raise ConfigError(
                f"rubric variable '{clash[0]}' clashes with a built-in placeholder ({', '.join(STANDARD_PLACEHOLDERS)})",
                key=f"graders.{name}.rubric_vars",
            )
        if spec.judge_samples > 1 and spec.judge_repeats > 1:
            raise ConfigError(
                "judge_samples is the older spelling of judge_repeats: give one of them",
                key=f"graders.{name}.judge_samples",
            )
        self.judge_repeats = max(spec.judge_repeats, spec.judge_samples)
        self.temperature = (
            effective_temperature(spec.model, spec.temperature)
            if spec.provider == "openai"
            else spec.temperature
        )
        self.unsent = spec.provider == "anthropic" and "temperature" in spec.model_fields_set
        if self.unsent:
            print(f"warning: graders.{name}.temperature: {ANTHROPIC_SAMPLING}", file=sys.stderr)
        self.rubric_vars = list(spec.rubric_vars or [])
        self.mode, self.mode_reason = default_mode(
            spec.rubric_mode, spec.system_prompt, self.rubric, getattr(ctx, "suite_raw", None)
        )
        self.fields: set[str] = set()
        if self.mode == "verbatim":
            try:
                self.fields = placeholders(self.rubric)
            except TemplateError as exc:
                raise ConfigError(
                    str(exc),
                    key=f"graders.{name}.{'prompt_path' if spec.prompt_path else 'prompt'}",
                ) from None

    def describe(self) -> str:
        """How this judge is called, for ``validate``."""
        unsent = "; temperature not sent" if self.unsent else ""
        return f"{self.spec.provider} {self.spec.model}, rubric {self.mode} ({self.mode_reason}){unsent}"

    def checks_samples(self) -> bool:
        return bool(self.rubric_vars) or self.mode == "verbatim"

    def check_samples(self, samples: Iterable[Sample]) -> None:
        """Every sample must give every declared rubric variable and, in verbatim mode, every
        placeholder of the rubric it will be judged with; name the first that does not."""
        for sample in samples:
            check_rubric_vars(sample, self.rubric_vars, self.name)
            if self.mode == "verbatim":
                check_verbatim_sample(sample, self.fields, self.name)

    async def grade(self, sample: Sample, submission: str, trajectory: Trajectory) -> GradeResult:
        tally = Tally()
        model = self.spec.model
        template = sample.rubric if sample.rubric is not None else self.rubric
        try:
            messages = self._messages(template, sample, submission, trajectory)
        except TemplateError as exc:
            return self.error_grade(str(exc), model=model)
        params = {"temperature": self.temperature}
        response_format = (
            SCHEMA_FORMAT
            if self.mode == "verbatim" or self.spec.provider != "openai"
            else JSON_OBJECT
        )
        run, k = self.run_index(trajectory), self.judge_repeats
        scores: list[float] = []
        rationales: list[str] = []
        raw_scores: list[float] = []
        try:
            for j in range(
                k
            ):  # one after another: the first failure stops them (ci_evals.graders.repeats)
                reply = await self.ask_json(
                    tally,
                    model=model,
                    messages=messages,
                    params=params,
                    repeat=repeat_index(run, k, j),
                    response_format=response_format,
                )
                raw = number_field(reply, "score")
                if "rationale" not in reply or reply["rationale"] is None:
                    raise JudgeReplyError(
                        f"judge reply has no 'rationale' (keys: {', '.join(reply)})"
                    )
                rationale = reply["rationale"]
                raw_scores.append(raw)
                scores.append(min(1.0, max(0.0, raw)))
                rationales.append(
                    rationale if isinstance(rationale, str) else json.dumps(rationale)
                )
        except LLMError as exc:
            return self.error_grade(exc.message, tally, exc.category, model=model)
        except JudgeReplyError as exc:
            return self.error_grade(str(exc), tally, model=model, judge_scores=scores)
        meta: dict[str, Any] = {"model": model, **tally.metadata()}
        if raw_scores != scores:
            meta["raw_scores"] = raw_scores  # the judge went outside [0, 1]; scores were clamped
        score = scores[0]
        text: str | None = rationales[0]
        if k > 1:
            meta["judge_scores"] = scores
            meta["judge_spread"] = max(scores) - min(scores)
            meta["judge_stdev"] = statistics.pstdev(scores)
            # judge_samples' rationale stays the first call's, as it always was
            score, text, meta["judge_repeats"] = reduce_repeats(
                scores, text, self.rule, note=self.spec.judge_repeats > 1
            )
        return GradeResult(score=score, rationale=text, metadata=meta)

    def _messages(
        self, template: str, sample: Sample, submission: str, trajectory: Trajectory
    ) -> list[dict[str, Any]]:
        """The judge's messages in this grader's mode; TemplateError for a missing variable."""
        if self.mode == "verbatim":
            return verbatim_messages(
                template, sample, input_text(sample), submission, self.spec.system_prompt
            )
        tool_calls = [tc.to_openai() for tc in trajectory.tool_calls()] if "{{" in template else []
        rubric = fill_rubric(template, sample, submission, self.rubric_vars, tool_calls)
        return [
            {"role": "system", "content": self.spec.system_prompt or JUDGE_SYSTEM_PROMPT},
            {"role": "user", "content": build_judge_prompt(rubric, sample, submission)},
        ]
