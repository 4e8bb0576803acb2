"""The target interface every kind implements."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic

from typing_extensions import TypeVar

from ci_evals.config.specs import Context, TargetSpec
from ci_evals.core.sample import Sample
from ci_evals.core.trajectory import Trajectory

SpecT_co = TypeVar("SpecT_co", bound=TargetSpec, covariant=True, default=TargetSpec)
"""A target's spec type. Covariant: a ``Target[HttpSpec]`` is a ``Target[TargetSpec]`` (the spec
is set once, at construction); a bare ``Target`` means ``Target[TargetSpec]``."""


class Target(Generic[SpecT_co]):
    """A configured target, generic in its spec: ``class HttpTarget(Target[HttpSpec])`` has
    ``self.spec: HttpSpec``; ``spec_model`` names the same class, which validates the suite's entry.

    Construction validates the spec offline (files exist, commands parse) and raises ConfigError.
    :meth:`run` produces one trajectory; any exception it raises is recorded as a ``target`` error
    for that sample (use :class:`ci_evals._util.errors.SampleError` for a clean message).
    """

    spec_model: ClassVar[type[TargetSpec]] = TargetSpec
    cpu_only: ClassVar[bool] = False
    """Runs compute in this process alone (no I/O, no service, no shared state): a CPU-bound run
    of such a target may be split across worker processes (``ci_evals.run.lanes``)."""

    def __init__(self, spec: SpecT_co, ctx: Context) -> None:
        self.spec: SpecT_co = spec
        self.ctx = ctx

    def models(self) -> list[str | None]:
        """The model variants the suite runs once each (Letta ``model_handles``); [None] = one."""
        return [None]

    def prepare(self) -> None:
        """Import the libraries :meth:`start` will use, before the run's clock starts; never raises."""

    async def start(self) -> None:
        """Open clients; called once before the first sample."""

    async def run(
        self, sample: Sample, *, run: int = 0, model: str | None = None, need_memory: bool = False
    ) -> Trajectory:
        raise NotImplementedError

    async def aclose(self) -> None:
        """Close clients and delete anything the run created."""


@dataclass(slots=True)
class Spend:
    """What one sample's calls spent so far: the agent's steps, tokens and cost.

    A target adds each call's answer (:meth:`add`), asks the budget with :attr:`steps` and
    :attr:`tokens`, reports :meth:`metadata` on the trajectory, and on a failure after some calls
    :meth:`tell` s the error, so the run's totals include what the failed sample cost.
    """

    steps: int = 0
    steps_known: bool = False
    """Whether some answer said how many steps it took (a Letta server may not)."""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None
    unpriced: list[str] = field(default_factory=list)

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def usage(self) -> dict[str, int]:
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens}

    def add(
        self, model: str | None, usage: dict[str, int], cost: float | None, steps: int | None
    ) -> None:
        """One call: its ``usage``, its ``cost`` (None: ``model`` has no known price) and the
        ``steps`` it took (None: not said)."""
        prompt, completion = usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0)
        self.prompt_tokens += prompt
        self.completion_tokens += completion
        if steps is not None:
            self.steps += steps
            self.steps_known = True
        if cost is not None:
            self.cost_usd = (self.cost_usd or 0.0) + cost
        elif prompt + completion and (model or "unknown") not in self.unpriced:
            self.unpriced.append(model or "unknown")

    def merge(self, other: Spend) -> None:
        """Add another attempt's spend (a retried sample's failed attempts)."""
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.steps += other.steps
        self.steps_known = self.steps_known or other.steps_known
        if other.cost_usd is not None:
            self.cost_usd = (self.cost_usd or 0.0) + other.cost_usd
        self.unpriced += [m for m in other.unpriced if m not in self.unpriced]

    def metadata(self) -> dict[str, Any]:
        """The trajectory metadata: ``steps`` when known, ``cost_usd`` when priced, ``unpriced``
        (the models that spent tokens at no known price)."""
        meta: dict[str, Any] = {}
        if self.steps_known:
            meta["steps"] = self.steps
        if self.cost_usd is not None:
            meta["cost_usd"] = self.cost_usd
        if self.unpriced:
            meta["unpriced"] = list(self.unpriced)
        return meta

    def tell(self, exc: BaseException) -> None:
        """Put what was spent on the error of a sample that failed after some calls: ``usage``,
        ``cost_usd``, ``unpriced`` (the runner writes them on the failed line)."""
        if self.tokens:
            exc.usage = self.usage  # type: ignore[attr-defined]
        if self.cost_usd is not None:
            exc.cost_usd = self.cost_usd  # type: ignore[attr-defined]
        if self.unpriced:
            exc.unpriced = list(self.unpriced)  # type: ignore[attr-defined]
