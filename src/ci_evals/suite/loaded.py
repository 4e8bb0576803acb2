"""A suite loaded: its parts built and checked, ready to run (what :func:`ci_evals.suite.loader.load_suite` returns)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ci_evals.config.dataset import Dataset
from ci_evals.config.specs import Context
from ci_evals.core.rule import rule_text
from ci_evals.gating.gates import GateSpec
from ci_evals.gating.letta_gates import TypedGate
from ci_evals.graders.base import Grader
from ci_evals.graders.extractors import Extractor
from ci_evals.graders.reward import Reward
from ci_evals.suite.spec import SuiteSpec
from ci_evals.targets.base import Target


@dataclass
class GraderSlot:
    """A grader with its extractor and its per-sample pass rule."""

    name: str
    grader: Grader
    extractor: Extractor
    rule: tuple[str, float]

    @property
    def rule_text(self) -> str:
        return rule_text(*self.rule)


@dataclass
class LoadedSuite:
    """Everything a run needs of a suite, built and checked: the spec as the YAML gave it (with the
    command line's overrides), its target, graders, gates and their budgets, and its dataset."""

    path: Path
    spec: SuiteSpec
    ctx: Context
    dataset: Dataset
    target: Target
    graders: dict[str, GraderSlot]
    gates: list[GateSpec]
    lines: dict[str, int] = field(default_factory=dict)
    setup: Callable[..., Any] | None = None  # the suite's setup_script function
    max_errors: int | None = 0  # the run's error budget when there is no gate
    max_error_rate: float | None = None
    typed_gates: list[TypedGate] = field(
        default_factory=list
    )  # letta-evals weighted_average / logical gates
    reward: Reward | None = None  # a letta-evals 0.21+ reward, the metric `reward`
    dialect: str = "ci-evals"
    builtins: dict[str, tuple[str, float]] = field(default_factory=dict)
    """Built-in metrics its gates read (latency, cost_usd...), each with its per-sample rule."""

    @property
    def metric_names(self) -> list[str]:
        """Every metric a result record has: the graders', then ``reward`` when the suite has one."""
        return list(self.graders) + (["reward"] if self.reward is not None else [])

    @property
    def needs_memory(self) -> bool:
        return any(
            s.extractor.needs_memory or getattr(s.grader, "needs_memory", False)
            for s in self.graders.values()
        )
