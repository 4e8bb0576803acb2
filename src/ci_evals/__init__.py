"""ci-evals: a CI-native evaluation gate for LLM agents and prompts.

The public names for user code (custom graders, extractors, setup scripts) are importable from
here: ``from ci_evals import grader, GradeResult, Sample``. They load on first use so that
``ci-evals --version`` starts without importing pydantic.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:  # what a type checker sees of the lazy names below (py.typed is shipped)
    from ci_evals.core.sample import Grade, GradeResult, Sample
    from ci_evals.graders.reward import RewardContext, RewardOutput
    from ci_evals.usercode.decorators import (
        agent_factory,
        extractor,
        grader,
        reward_composer,
        suite_setup,
    )

_LAZY = {
    "grader": "ci_evals.usercode.decorators",
    "extractor": "ci_evals.usercode.decorators",
    "suite_setup": "ci_evals.usercode.decorators",
    "agent_factory": "ci_evals.usercode.decorators",
    "reward_composer": "ci_evals.usercode.decorators",
    "RewardOutput": "ci_evals.graders.reward",
    "RewardContext": "ci_evals.graders.reward",
    "Grade": "ci_evals.core.sample",
    "GradeResult": "ci_evals.core.sample",
    "Sample": "ci_evals.core.sample",
}

__all__ = [
    "Grade",
    "GradeResult",
    "RewardContext",
    "RewardOutput",
    "Sample",
    "__version__",
    "agent_factory",
    "extractor",
    "grader",
    "reward_composer",
    "suite_setup",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'ci_evals' has no attribute {name!r}")
