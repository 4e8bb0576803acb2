"""The grader interface every kind implements."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar, Generic

from typing_extensions import TypeVar

from ci_evals._util.errors import ConfigError
from ci_evals._util.registry import GRADER_KINDS
from ci_evals.config.specs import Context, GraderSpec, validate_model
from ci_evals.core.sample import GradeResult, Sample
from ci_evals.core.trajectory import Trajectory

SpecT_co = TypeVar("SpecT_co", bound=GraderSpec, covariant=True, default=GraderSpec)
"""A grader's spec type. Covariant: a ``Grader[RubricSpec]`` is a ``Grader[GraderSpec]`` (the spec
is set once, at construction); a bare ``Grader`` means ``Grader[GraderSpec]``."""


class Grader(Generic[SpecT_co]):
    """A configured grader, generic in its spec: ``class RubricGrader(Grader[RubricSpec])`` has
    ``self.spec: RubricSpec``.

    Subclasses set ``spec_model`` (the same spec class, which validates the suite's entry) and
    implement :meth:`grade`. Construction validates everything that can be checked without calling
    out (files, templates, expressions) and raises ConfigError; :meth:`grade` never raises for a
    sample-level problem, it returns a GradeResult with ``error`` set (the runner also catches
    anything that escapes).

    LLM-backed graders put ``usage`` ({prompt_tokens, completion_tokens}), ``cache_hits`` and
    ``retries`` in ``GradeResult.metadata``; the runner sums them for the reports.
    """

    spec_model: ClassVar[type[GraderSpec]] = GraderSpec
    rule: tuple[str, float] | None = None
    """The metric's per-sample pass rule (``(op, value)``), given by the suite loader once the gates
    are known; a judge with ``judge_repeats`` marks each repeat's pass with it (None: not known)."""

    def __init__(self, name: str, spec: SpecT_co, ctx: Context) -> None:
        self.name = name
        self.spec: SpecT_co = spec
        self.ctx = ctx

    @classmethod
    def resolve(cls, raw: dict[str, Any]) -> type[Grader[GraderSpec]]:
        """The class that handles this raw spec (lets ``kind: rubric`` + ``agent_file`` pick the agent judge)."""
        return cls

    @property
    def label(self) -> str:
        return self.spec.display_name or self.name

    def check_samples(self, samples: Iterable[Sample]) -> None:
        """Validate every sample before anything runs (e.g. required rubric_vars); raise ConfigError."""

    def checks_samples(self) -> bool:
        """Whether :meth:`check_samples` has anything to check: the loader then builds each
        selected sample for it (and gives them one at a time); otherwise the dataset is only scanned."""
        return type(self).check_samples is not Grader.check_samples

    def prepare(self) -> None:
        """Import the libraries :meth:`start` will use, before the run's clock starts; never raises."""

    async def start(self) -> None:
        """Set up clients; called once before the first sample."""

    async def grade(self, sample: Sample, submission: str, trajectory: Trajectory) -> GradeResult:
        raise NotImplementedError

    async def aclose(self) -> None:
        """Release clients and delete anything the grader created."""


def normalize_raw(raw: dict[str, Any]) -> dict[str, Any]:
    """Accept an OpenAI grader object verbatim: ``type`` -> ``kind``, ``name`` -> ``display_name``."""
    raw = dict(raw)
    if "kind" not in raw and "type" in raw:
        raw["kind"] = raw.pop("type")
    if "name" in raw and "display_name" not in raw and raw.get("kind") not in ("tool",):
        raw["display_name"] = raw.pop("name")
    return raw


def build_grader(
    name: str,
    raw: Any,
    ctx: Context,
    *,
    key: str | None = None,
    file: str | None = None,
    lines: dict[str, int] | None = None,
) -> Grader[GraderSpec]:
    """Validate one ``graders.<name>`` entry with its kind's spec model and construct the grader."""
    key = key or f"graders.{name}"
    if not isinstance(raw, dict):
        raise ConfigError("a grader must be a mapping with a 'kind'", file=file, key=key)
    kind_key = (
        f"{key}.{'kind' if 'kind' in raw or 'type' not in raw else 'type'}"  # as the user wrote it
    )
    raw = normalize_raw(raw)
    if "kind" not in raw:
        raise ConfigError(
            "missing 'kind' (or 'type')", file=file, key=key, line=(lines or {}).get(key)
        )
    cls: type[Grader[GraderSpec]] = GRADER_KINDS.get(str(raw["kind"]), key=kind_key).resolve(raw)
    spec = validate_model(cls.spec_model, raw, key, file, lines)
    try:
        return cls(name, spec, ctx)
    except ConfigError as exc:
        if exc.key is None:
            exc.key = key
        if exc.file is None:
            exc.file = file
        raise
