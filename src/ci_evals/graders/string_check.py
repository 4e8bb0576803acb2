"""``string_check``: OpenAI's string comparison grader, scored 0 or 1.

Rules (``input`` and ``reference`` are rendered first; no trimming, no Unicode normalisation):

* ``eq``: ``input == reference``, case-sensitive.
* ``ne`` (also ``neq``, the guide's spelling): ``input != reference``, case-sensitive.
* ``like``: ``reference in input`` (a plain substring, not SQL ``LIKE``: no wildcards).
* ``ilike``: ``reference.casefold() in input.casefold()`` (case-insensitive substring).

An empty reference is a substring of everything, so ``like``/``ilike`` score 1 with it. A template
variable the sample does not have is an error for that sample (score 0), never "".

This module also holds the small helpers every OpenAI-style grader shares: the template context
of a sample and the load-time check of a template's variables.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field
from typing_extensions import TypeVar

from ci_evals._util.errors import ConfigError
from ci_evals.config.specs import Context, GraderSpec
from ci_evals.config.templating import MUSTACHE, TemplateError, grader_context, render
from ci_evals.core.sample import GradeResult, Sample
from ci_evals.core.trajectory import Trajectory
from ci_evals.graders.base import Grader

DEFAULT_INPUT = "{{ sample.output_text }}"
_ANY_MUSTACHE = re.compile(r"\{\{(.*?)\}\}", re.S)


def openai_context(sample: Sample, submission: str, trajectory: Trajectory) -> dict[str, Any]:
    """The ``item``/``sample`` namespaces of OpenAI templates for one graded sample."""
    return grader_context(
        sample.item(), submission, lambda: [tc.to_openai() for tc in trajectory.tool_calls()]
    )


def check_template(template: str, field: str) -> None:
    """Reject ``{{ ... }}`` that is not an ``item.`` / ``sample.`` path (it would never render)."""
    for m in _ANY_MUSTACHE.finditer(template):
        if not MUSTACHE.fullmatch(m.group(0)):
            raise ConfigError(
                f"{field}: bad template variable '{m.group(0)}'; use '{{{{ item.<column> }}}}' or "
                f"'{{{{ sample.output_text }}}}' (namespaces: item, sample)"
            )


def short(text: str, limit: int = 80) -> str:
    """``text`` cut to ``limit`` characters for a rationale."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def error_grade(message: str, **metadata: Any) -> GradeResult:
    """A grade for a sample that could not be graded: score 0, ``error`` set."""
    return GradeResult(score=0.0, rationale=message, error=message, metadata=metadata)


OPERATIONS = {
    "eq": lambda a, b: a == b,
    "ne": lambda a, b: a != b,
    "neq": lambda a, b: a != b,
    "like": lambda a, b: b in a,
    "ilike": lambda a, b: b.casefold() in a.casefold(),
}


class PairSpec(GraderSpec):
    """The two templates a pair grader compares (each kind redeclares them with its own wording)."""

    input: str = DEFAULT_INPUT
    reference: str


PairSpecT_co = TypeVar("PairSpecT_co", bound=PairSpec, covariant=True, default=PairSpec)


class StringCheckSpec(PairSpec):
    input: str = Field(default=DEFAULT_INPUT, description="Template of the text to check.")
    reference: str = Field(description="Template of the text to compare with.")
    operation: Literal["eq", "ne", "neq", "like", "ilike"]


class PairGrader(Grader[PairSpecT_co]):
    """A grader that compares a rendered ``input`` with a rendered ``reference`` (string_check,
    text_similarity): both templates are checked at load and rendered per sample here."""

    def __init__(self, name: str, spec: PairSpecT_co, ctx: Context) -> None:
        super().__init__(name, spec, ctx)
        check_template(spec.input, "input")
        check_template(spec.reference, "reference")

    def texts(
        self, sample: Sample, submission: str, trajectory: Trajectory
    ) -> tuple[str, str] | GradeResult:
        """(input, reference) for one sample, or the error grade of a missing template variable."""
        context = openai_context(sample, submission, trajectory)
        try:
            return render(self.spec.input, context), render(self.spec.reference, context)
        except TemplateError as exc:
            return error_grade(str(exc))

    async def grade(self, sample: Sample, submission: str, trajectory: Trajectory) -> GradeResult:
        rendered = self.texts(sample, submission, trajectory)
        if isinstance(rendered, GradeResult):
            return rendered
        return await self.compare(*rendered)

    async def compare(self, text: str, reference: str) -> GradeResult:
        """The grade of the rendered ``input`` against the rendered ``reference``."""
        raise NotImplementedError


class StringCheckGrader(PairGrader[StringCheckSpec]):
    """Compare the rendered ``input`` with the rendered ``reference`` (see the module rules)."""

    spec_model = StringCheckSpec

    async def compare(self, text: str, reference: str) -> GradeResult:
        op = self.spec.operation
        ok = OPERATIONS[op](text, reference)
        return GradeResult(
            score=1.0 if ok else 0.0,
            rationale=f"{short(text)!r} {op} {short(reference)!r}: {'true' if ok else 'false'}",
            metadata={"operation": op},
        )
