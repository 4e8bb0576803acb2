"""``letta_evals`` for user files written for letta-evals, when letta-evals itself is not installed.

Grader, extractor, setup and reward files written for letta-evals import ``letta_evals.decorators``,
``letta_evals.models`` and ``letta_evals.extractors``; :func:`install` maps those modules onto
ci-evals' own (the decorators register with ci-evals, the models are ci-evals' models, the
built-in extractors are callable as letta-evals calls them) so such files load unchanged. The
suite loader installs it once, before any user file is imported; an installed letta-evals wins.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from collections.abc import Callable, Iterable
from typing import Any

from pydantic import BaseModel

import ci_evals.core.sample as models
import ci_evals.graders.reward as rewards
import ci_evals.usercode.decorators as decorators
from ci_evals.core.trajectory import Message, Trajectory
from ci_evals.graders.extractors import BUILTINS


def install() -> None:
    """Make ``letta_evals.decorators``/``letta_evals.models`` importable when letta-evals is absent."""
    if "letta_evals" in sys.modules:
        return
    if importlib.util.find_spec("letta_evals") is not None:
        return
    pkg = types.ModuleType("letta_evals")
    pkg.__path__ = []  # a package, so submodule imports resolve from sys.modules
    shim_models = types.ModuleType("letta_evals.models")
    vars(shim_models).update(
        GradeResult=models.GradeResult,
        Sample=models.Sample,
        SuiteSpec=dict,  # setup scripts only annotate with it
    )
    vars(pkg).update(decorators=decorators, models=shim_models)
    for name, value in vars(decorators).items():
        if not name.startswith("_"):
            setattr(pkg, name, value)
    for name in ("GradeResult", "Sample"):
        setattr(pkg, name, getattr(models, name))
    for name in (
        "RewardOutput",
        "RewardContext",
    ):  # letta-evals 0.21+ reward composers import these
        setattr(pkg, name, getattr(rewards, name))
        setattr(shim_models, name, getattr(rewards, name))
    # custom extractors get ci-evals messages, turn by turn
    vars(shim_models)["LettaMessageUnion"] = Message
    extractors = _extractors_shim()
    vars(pkg)["extractors"] = extractors
    sys.modules.update(
        {
            "letta_evals": pkg,
            "letta_evals.decorators": decorators,
            "letta_evals.models": shim_models,
            "letta_evals.extractors": extractors,
            "letta_evals.extractors.builtin": extractors,
        }
    )


def _extractors_shim() -> types.ModuleType:
    """``letta_evals.extractors(.builtin)``: the built-in extractors, callable as letta-evals calls them,
    ``fn(trajectory_turns, config_dict)``, so a custom extractor can build on one."""
    mod = types.ModuleType("letta_evals.extractors")
    mod.__path__ = []

    def wrap(fn: Callable[..., str], cfg_model: type[BaseModel]) -> Callable[..., str]:
        def builtin(
            trajectory: Iterable[list[Message]], config: dict[str, Any] | None = None, *_: Any
        ) -> str:
            return fn(Trajectory(turns=list(trajectory)), cfg_model.model_validate(config or {}))

        builtin.__name__ = fn.__name__
        return builtin

    for name, (fn, cfg_model, _) in BUILTINS.items():
        if name != "memory_block":  # it reads the agent's memory, not the turns
            setattr(mod, name, wrap(fn, cfg_model))
    vars(mod).update(extractor=decorators.extractor, builtin=mod)
    return mod
