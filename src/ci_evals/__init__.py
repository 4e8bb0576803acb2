"""ci-evals: a CI-native evaluation gate for LLM agents and prompts.

The public names for user code (custom graders, extractors, setup scripts) are re-exported here
so that ``from ci_evals import grader, GradeResult, Sample`` works.
"""

from ci_evals.decorators import agent_factory, extractor, grader, suite_setup
from ci_evals.models import Grade, GradeResult, Sample

__version__ = "0.1.0"

__all__ = [
    "Grade",
    "GradeResult",
    "Sample",
    "__version__",
    "agent_factory",
    "extractor",
    "grader",
    "suite_setup",
]
