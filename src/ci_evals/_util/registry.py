"""One registry mechanism for targets, grader kinds, grader functions and extractors.

Entries may be registered lazily as ``"module:attr"`` strings so that heavy modules (openai,
letta_client, nltk...) are imported only when a suite uses them.
"""

from __future__ import annotations

import importlib
from typing import Any

from ci_evals._util.errors import ConfigError, unknown_choice


class Registry:
    """A name -> object map whose entries may be ``"module:attr"`` paths imported on first use."""

    def __init__(self, what: str) -> None:
        self.what = what
        self._entries: dict[str, Any] = {}

    def register(self, name: str, obj: Any) -> Any:
        self._entries[name] = obj
        return obj

    def register_lazy(self, name: str, path: str) -> None:
        self._entries[name] = path

    def __contains__(self, name: str) -> bool:
        return name in self._entries

    def names(self) -> list[str]:
        return list(self._entries)

    def get(self, name: str, *, key: str | None = None) -> Any:
        """The entry named ``name``; an unknown name is a ConfigError naming the closest one."""
        if name not in self._entries:
            raise ConfigError(unknown_choice(self.what, name, self._entries), key=key)
        obj = self._entries[name]
        if isinstance(obj, str):
            module, _, attr = obj.partition(":")
            obj = getattr(importlib.import_module(module), attr)
            self._entries[name] = obj
        return obj


TARGETS = Registry("target kind")
GRADER_KINDS = Registry("grader kind")
GRADER_FUNCTIONS = Registry("grader function")
EXTRACTORS = Registry("extractor")

for _kind, _path in {
    "replay": "ci_evals.targets.replay:ReplayTarget",
    "command": "ci_evals.targets.command:CommandTarget",
    "http": "ci_evals.targets.http:HttpTarget",
    "model": "ci_evals.targets.model:ModelTarget",
    "agent": "ci_evals.targets.letta:LettaTarget",
    "letta_agent": "ci_evals.targets.letta:LettaTarget",
    "letta_code": "ci_evals.targets.letta_code:LettaCodeTarget",
}.items():
    TARGETS.register_lazy(_kind, _path)

for _kind, _path in {
    "tool": "ci_evals.graders.tool:ToolGrader",
    "rubric": "ci_evals.graders.rubric:RubricGrader",
    "model_judge": "ci_evals.graders.rubric:RubricGrader",
    "letta_judge": "ci_evals.graders.letta_judge:LettaJudgeGrader",
    "score_model": "ci_evals.graders.score_model:ScoreModelGrader",
    "label_model": "ci_evals.graders.score_model:LabelModelGrader",
    "string_check": "ci_evals.graders.string_check:StringCheckGrader",
    "text_similarity": "ci_evals.graders.text_similarity:TextSimilarityGrader",
    "python": "ci_evals.graders.python_grader:PythonGrader",
    "multi": "ci_evals.graders.multi:MultiGrader",
}.items():
    GRADER_KINDS.register_lazy(_kind, _path)
