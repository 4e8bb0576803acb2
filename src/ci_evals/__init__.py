"""ci-evals: a CI-native evaluation gate for LLM agents and prompts.

The public names for user code (custom graders, extractors, setup scripts) are importable from
here: ``from ci_evals import grader, GradeResult, Sample``. They load on first use so that
``ci-evals --version`` starts without importing pydantic.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "grader": "ci_evals.decorators", "extractor": "ci_evals.decorators",
    "suite_setup": "ci_evals.decorators", "agent_factory": "ci_evals.decorators",
    "reward_composer": "ci_evals.decorators", "RewardOutput": "ci_evals.rewards", "RewardContext": "ci_evals.rewards",
    "Grade": "ci_evals.models", "GradeResult": "ci_evals.models", "Sample": "ci_evals.models",
}

__all__ = ["Grade", "GradeResult", "RewardContext", "RewardOutput", "Sample", "__version__", "agent_factory",
           "extractor", "grader", "reward_composer", "suite_setup"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'ci_evals' has no attribute {name!r}")
