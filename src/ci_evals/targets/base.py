"""The target interface every kind implements."""

from __future__ import annotations

from typing import ClassVar, Generic

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
