"""Decorators that register user code: ``@grader``, ``@extractor``, ``@suite_setup``, ``@agent_factory``,
``@reward_composer``.

Signatures follow letta-evals: a grader is ``(sample, submission) -> GradeResult``; an extractor
is ``(trajectory, config)`` or ``(trajectory, config, agent_state)``; a suite setup takes nothing,
``(client)`` or ``(client, model_handle)``; a reward composer takes ``(ctx)``. Wrong signatures raise
TypeError at import time, so a broken file fails validation rather than a run. Each decorator
returns the function it is given, with its own type (for a type checker, a ``@grader`` must take
``(Sample, str)`` and return a GradeResult or an awaitable of one).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar, overload

from ci_evals._util.registry import EXTRACTORS, GRADER_FUNCTIONS, Registry

if TYPE_CHECKING:  # the grader's contract, for type checkers only: registering one loads no model
    from ci_evals.core.sample import GradeResult, Sample

_F = TypeVar("_F", bound=Callable[..., Any])
"""A decorated function: every decorator returns it unchanged (registered, and marked)."""
_GraderF = TypeVar(
    "_GraderF", bound="Callable[[Sample, str], GradeResult | Awaitable[GradeResult]]"
)
"""A ``@grader``: ``(sample, submission)`` to a GradeResult, sync or async."""


def _params(func: Callable[..., Any]) -> list[str]:
    return list(inspect.signature(func).parameters)


def _register(
    kind: str,
    check: Callable[[Callable[..., Any]], None],
    registry: Registry | None,
    func: _F | None,
    name: str | None,
) -> _F | Callable[[_F], _F]:
    """``func`` checked, marked ``_is_<kind>`` and registered under ``name`` (default its own); or,
    without ``func``, the decorator doing that (``@grader(name="x")``)."""

    def wrap(f: _F) -> _F:
        check(f)
        setattr(f, f"_is_{kind}", True)
        if registry is not None:
            registry.register(name or f.__name__, f)
        return f

    return wrap(func) if func is not None else wrap


def _check_grader(f: Callable[..., Any]) -> None:
    if _params(f) != ["sample", "submission"]:
        raise TypeError(
            f"@grader {f.__name__} must take exactly (sample, submission), got {_params(f)}"
        )


def _check_extractor(f: Callable[..., Any]) -> None:
    if _params(f) not in (["trajectory", "config"], ["trajectory", "config", "agent_state"]):
        raise TypeError(
            f"@extractor {f.__name__} must take (trajectory, config) or (trajectory, config, agent_state)"
        )


def _check_setup(f: Callable[..., Any]) -> None:
    if len(_params(f)) > 2:
        raise TypeError(
            f"@suite_setup {f.__name__} must take (), (client) or (client, model_handle)"
        )


def _check_factory(f: Callable[..., Any]) -> None:
    if _params(f) != ["client", "sample"]:
        raise TypeError(f"@agent_factory {f.__name__} must take exactly (client, sample)")


def _check_reward(f: Callable[..., Any]) -> None:
    if _params(f) != ["ctx"]:
        raise TypeError(
            f"@reward_composer {f.__name__} must take exactly one parameter named ctx, got {_params(f)}"
        )


@overload
def grader(func: _GraderF, *, name: str | None = None) -> _GraderF: ...
@overload
def grader(func: None = None, *, name: str | None = None) -> Callable[[_GraderF], _GraderF]: ...
def grader(
    func: _GraderF | None = None, *, name: str | None = None
) -> _GraderF | Callable[[_GraderF], _GraderF]:
    """Register a custom grader ``(sample, submission) -> GradeResult`` (sync or async) under its
    name, or ``name``: ``@grader`` or ``@grader(name="x")``."""
    return _register("grader", _check_grader, GRADER_FUNCTIONS, func, name)


@overload
def extractor(func: _F, *, name: str | None = None) -> _F: ...
@overload
def extractor(func: None = None, *, name: str | None = None) -> Callable[[_F], _F]: ...
def extractor(func: _F | None = None, *, name: str | None = None) -> _F | Callable[[_F], _F]:
    """Register a custom extractor ``(trajectory, config)`` or ``(trajectory, config, agent_state)``
    returning the text to grade: ``@extractor`` or ``@extractor(name="x")``."""
    return _register("extractor", _check_extractor, EXTRACTORS, func, name)


@overload
def suite_setup(func: _F, *, name: str | None = None) -> _F: ...
@overload
def suite_setup(func: None = None, *, name: str | None = None) -> Callable[[_F], _F]: ...
def suite_setup(func: _F | None = None, *, name: str | None = None) -> _F | Callable[[_F], _F]:
    """Mark a setup script's function: ``()``, ``(client)`` or ``(client, model_handle)``."""
    return _register("suite_setup", _check_setup, None, func, name)


@overload
def agent_factory(func: _F, *, name: str | None = None) -> _F: ...
@overload
def agent_factory(func: None = None, *, name: str | None = None) -> Callable[[_F], _F]: ...
def agent_factory(func: _F | None = None, *, name: str | None = None) -> _F | Callable[[_F], _F]:
    """Mark an agent factory ``(client, sample)`` returning the agent it made (or its id)."""
    return _register("agent_factory", _check_factory, None, func, name)


@overload
def reward_composer(func: _F, *, name: str | None = None) -> _F: ...
@overload
def reward_composer(func: None = None, *, name: str | None = None) -> Callable[[_F], _F]: ...
def reward_composer(func: _F | None = None, *, name: str | None = None) -> _F | Callable[[_F], _F]:
    """Mark a reward composer ``(ctx)`` returning a RewardOutput, a number or a dict of its fields
    (sync or async; ``ctx`` is a :class:`ci_evals.graders.reward.RewardContext`)."""
    return _register("reward_composer", _check_reward, None, func, name)
