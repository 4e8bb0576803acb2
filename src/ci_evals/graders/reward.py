"""letta-evals 0.21+ rewards: one per-sample score in [0, 1] composed from the graders' grades.

``reward: {kind: metric, metric_key: quality}`` takes one grader's score; ``reward: {kind: custom,
function: rewards.py:fn}`` calls a ``@reward_composer`` (sync or async) with a :class:`RewardContext`
and accepts what letta-evals accepts: a ``RewardOutput``, a number, or a dict of its fields.
In ci-evals the reward is a metric named ``reward``, aggregated, gated and reported like a
grader's. It fails closed: a reward whose inputs errored (the metric's grade for ``metric``, any
grade for ``custom``), a composer that raises (``SystemExit`` included), runs past the user-code time
limit, or a score outside [0, 1] is an errored grade. A sync composer runs on the user-code thread
(ci_evals.usercode.lane), so a blocking one never keeps a signal from ending the run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ci_evals._util.errors import ConfigError, did_you_mean
from ci_evals.config.specs import Context, Strict, validate_model
from ci_evals.core.rule import passes
from ci_evals.core.sample import GradeResult, Sample
from ci_evals.core.trajectory import Message, Trajectory, Usage
from ci_evals.results.records import Grade, make_grade
from ci_evals.usercode import lane as usercode
from ci_evals.usercode.load import load_object

NAME = "reward"


class RewardOutput(BaseModel):
    """A composed reward (letta-evals ``RewardOutput``): a score in [0, 1] and optional metadata."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    score: float = Field(ge=0.0, le=1.0)
    metadata: dict[str, Any] | None = None


class MetricReward(Strict):
    kind: Literal["metric"]
    metric_key: str


class CustomReward(Strict):
    kind: Literal["custom"]
    function: str


@dataclass(frozen=True)
class RewardContext:
    """What a composer gets (letta-evals ``RewardContext``). ``trajectory`` is a list of turns, each a
    list of messages; ``agent_state`` is None (ci-evals keeps memory blocks in the trajectory)."""

    sample: Sample
    grades: Mapping[str, GradeResult]
    submissions: Mapping[str, str]
    trajectory: list[list[Message]]
    agent_id: str | None
    model_handle: str | None
    agent_state: None
    usage: Usage
    timing: Mapping[str, float]


Composer = Callable[[RewardContext], object]
"""A ``@reward_composer``: ``(ctx)`` to a RewardOutput, a number or a dict (or an awaitable of one)."""


class Reward:
    """A loaded reward spec; :meth:`grade` turns one sample's grades into the ``reward`` grade."""

    def __init__(self, spec: MetricReward | CustomReward, composer: Composer | None = None) -> None:
        self.spec = spec
        self.composer = composer
        self.rule: tuple[str, float] = ("gte", 1.0)

    @property
    def label(self) -> str:
        return NAME

    def describe(self) -> str:
        return (
            f"reward = {self.spec.metric_key}"
            if isinstance(self.spec, MetricReward)
            else f"reward = {self.spec.function}"
        )

    async def grade(
        self,
        sample: Sample,
        grades: Mapping[str, Grade],
        submissions: Mapping[str, str],
        traj: Trajectory,
        model: str | None,
        timing: Mapping[str, float],
    ) -> Grade:
        """The reward's grade (as results.jsonl stores grades), errored when it cannot be computed."""

        if isinstance(self.spec, MetricReward):
            source = grades.get(self.spec.metric_key)
            given = None if source is None or source.get("error") else source.get("score")
            if given is None:  # errored (a grade without an error has a score)
                return make_grade(
                    error=f"reward not computed: grader '{self.spec.metric_key}' errored"
                )
            score, metadata = float(given), {"metric_key": self.spec.metric_key}
        else:
            bad = [n for n, g in grades.items() if g.get("error")]
            if bad:
                return make_grade(error=f"reward not computed: grader '{bad[0]}' errored")
            assert self.composer is not None  # load_reward gives a custom reward its composer
            try:  # off the event loop (a signal still ends the run), time-limited, escapes contained
                out = coerce(
                    await usercode.run(
                        self.composer,
                        _context(sample, grades, submissions, traj, model, timing),
                        what=f"reward composer {self.spec.function}",
                    )
                )
            except Exception as exc:
                return make_grade(
                    error=f"reward composer {self.spec.function} failed: {usercode.describe(exc)}"
                )
            score, metadata = out.score, out.metadata or {}
        return make_grade(score, passes(score, *self.rule), self.describe(), metadata)


def coerce(value: Any) -> RewardOutput:
    """letta-evals' ``coerce_reward_output``: a RewardOutput, a number or a dict of its fields."""
    if isinstance(value, RewardOutput):
        return value
    if isinstance(value, bool):
        raise TypeError("reward composer returned a bool; return a score in [0, 1]")
    if isinstance(value, (int, float)):
        return RewardOutput(score=float(value))
    if isinstance(value, dict):
        return RewardOutput(**value)
    raise TypeError(
        f"reward composer must return RewardOutput, float, or dict; got {type(value).__name__}"
    )


def _context(
    sample: Sample,
    grades: Mapping[str, Grade],
    submissions: Mapping[str, str],
    traj: Trajectory,
    model: str | None,
    timing: Mapping[str, float],
) -> RewardContext:
    """What the composer gets; every grade in ``grades`` has a score (none errored)."""
    return RewardContext(
        sample=sample,
        grades={n: _result(g) for n, g in grades.items()},
        submissions=dict(submissions),
        trajectory=[list(t) for t in traj.turns],
        agent_id=traj.metadata.get("agent_id"),
        model_handle=model,
        agent_state=None,
        usage=traj.usage,
        timing=dict(timing),
    )


def _result(grade: Grade) -> GradeResult:
    """A grade without an error as the composer reads it (letta-evals' GradeResult)."""
    score = grade.get("score")
    if score is None:
        raise TypeError("an errored grade has no score")
    return GradeResult(
        score=float(score),
        rationale=grade.get("rationale"),
        metadata=grade.get("metadata") or {},
    )


_KINDS: dict[str, type[MetricReward] | type[CustomReward]] = {
    "metric": MetricReward,
    "custom": CustomReward,
}


def load_reward(
    raw: Any, graders: list[str], ctx: Context, file: str, lines: dict[str, int]
) -> Reward:
    """Validate the suite's ``reward`` block and load its composer (checked like any custom code)."""
    kind = raw.get("kind") if isinstance(raw, dict) else None
    model = _KINDS.get(kind) if isinstance(kind, str) else None
    if model is None:
        raise ConfigError(
            f"reward needs 'kind: metric' or 'kind: custom' (got {kind!r})",
            file=file,
            key="reward.kind" if isinstance(raw, dict) and "kind" in raw else "reward",
            line=lines.get("reward.kind") or lines.get("reward"),
        )
    spec = validate_model(model, raw, "reward", file, lines)
    if NAME in graders:
        raise ConfigError(
            f"a grader named '{NAME}' clashes with the suite's reward metric; rename the grader",
            file=file,
            key=f"graders.{NAME}",
            line=lines.get(f"graders.{NAME}"),
        )
    if isinstance(spec, MetricReward):
        if spec.metric_key not in graders:
            raise ConfigError(
                f"metric_key '{spec.metric_key}' names no grader{did_you_mean(spec.metric_key, graders)}",
                file=file,
                key="reward.metric_key",
                line=lines.get("reward.metric_key"),
            )
        return Reward(spec)
    fn = load_object(spec.function, ctx.base_dir, key="reward.function")
    if not getattr(fn, "_is_reward_composer", False):
        raise ConfigError(
            f"'{spec.function}' must be decorated with @reward_composer",
            file=file,
            key="reward.function",
            line=lines.get("reward.function"),
        )
    return Reward(spec, fn)


def reward_config(reward: Reward | None) -> dict[str, Any]:
    """The ``reward`` entry of summary.json's ``config.graders`` (empty without a reward)."""
    if reward is None:
        return {}
    return {
        NAME: {
            "label": reward.label,
            "kind": "reward",
            "rule": list(reward.rule),
            "extractor": None,
        }
    }
