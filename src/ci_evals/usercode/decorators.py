"""Decorators that register user code: ``@grader``, ``@extractor``, ``@suite_setup``, ``@agent_factory``,
``@reward_composer``.

Signatures follow letta-evals: a grader is ``(sample, submission) -> GradeResult``; an extractor
is ``(trajectory, config)`` or ``(trajectory, config, agent_state)``; a suite setup takes nothing,
``(client)`` or ``(client, model_handle)``; a reward composer takes ``(ctx)``. Wrong signatures raise
TypeError at import time, so a broken file fails validation rather than a run.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from ci_evals._util.registry import EXTRACTORS, GRADER_FUNCTIONS


def _params(func: Callable[..., Any]) -> list[str]:
    return list(inspect.signature(func).parameters)


def _decorate(kind: str, check: Callable[[Callable[..., Any]], None], registry=None):
    def outer(func=None, *, name: str | None = None):
        def wrap(f):
            check(f)
            setattr(f, f"_is_{kind}", True)
            if registry is not None:
                registry.register(name or f.__name__, f)
            return f

        return wrap(func) if func is not None else wrap

    return outer


def _check_grader(f) -> None:
    if _params(f) != ["sample", "submission"]:
        raise TypeError(
            f"@grader {f.__name__} must take exactly (sample, submission), got {_params(f)}"
        )


def _check_extractor(f) -> None:
    if _params(f) not in (["trajectory", "config"], ["trajectory", "config", "agent_state"]):
        raise TypeError(
            f"@extractor {f.__name__} must take (trajectory, config) or (trajectory, config, agent_state)"
        )


def _check_setup(f) -> None:
    if len(_params(f)) > 2:
        raise TypeError(
            f"@suite_setup {f.__name__} must take (), (client) or (client, model_handle)"
        )


def _check_factory(f) -> None:
    if _params(f) != ["client", "sample"]:
        raise TypeError(f"@agent_factory {f.__name__} must take exactly (client, sample)")


def _check_reward(f) -> None:
    if _params(f) != ["ctx"]:
        raise TypeError(
            f"@reward_composer {f.__name__} must take exactly one parameter named ctx, got {_params(f)}"
        )


grader = _decorate("grader", _check_grader, GRADER_FUNCTIONS)
extractor = _decorate("extractor", _check_extractor, EXTRACTORS)
suite_setup = _decorate("suite_setup", _check_setup)
agent_factory = _decorate("agent_factory", _check_factory)
reward_composer = _decorate("reward_composer", _check_reward)
