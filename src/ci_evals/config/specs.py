"""Base pydantic models shared by the suite, target and grader specs (strict everywhere)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from ci_evals._util.errors import ConfigError, did_you_mean, unknown_choice
from ci_evals._util.text import shorten
from ci_evals.config.budget import Budget

if TYPE_CHECKING:
    from pydantic_core import ErrorDetails

M = TypeVar("M", bound=BaseModel)


class Strict(BaseModel):
    """Every spec model forbids unknown keys, so a typo is an error, never silently ignored."""

    model_config = ConfigDict(
        extra="forbid", populate_by_name=True, allow_inf_nan=False, defer_build=True
    )


MAX_TIMEOUT = 86_400.0
"""Seconds: the largest ``timeout`` any spec accepts (a day; larger values only fail later)."""


class TargetSpec(Strict):
    kind: str


class GraderSpec(Strict):
    """Fields every grader kind shares."""

    kind: str
    display_name: str | None = None
    extractor: str = "last_assistant"
    extractor_config: dict[str, Any] = Field(default_factory=dict)
    pass_threshold: float | None = Field(
        default=None,
        description="Per-sample pass: score >= pass_threshold (default: this metric's gate's rule).",
    )
    pass_op: Literal["gt", "gte", "lt", "lte", "eq"] | None = Field(
        default=None,
        description="Per-sample pass: score <pass_op> pass_value (e.g. lte for lower-is-better).",
    )
    pass_value: float | None = Field(
        default=None, description="The threshold of pass_op (default 1.0)."
    )


class Context:
    """What every target and grader may need from the suite: where it lives and run options.

    Args:
        base_dir: the suite file's folder; relative paths resolve against it.
        suite_file: the suite file itself (for messages).
        cache_dir: LLM response cache folder, or None when caching is off.
        offline: True for ``validate``: nothing may be called, nothing created.
    """

    def __init__(
        self,
        base_dir: Path,
        suite_file: Path | None = None,
        *,
        cache_dir: Path | None = None,
        offline: bool = False,
        pricing: dict[str, Any] | None = None,
    ) -> None:
        self.base_dir = base_dir
        self.suite_file = suite_file
        self.cache_dir = cache_dir
        self.offline = offline
        self.pricing = pricing or {}
        self.budget = Budget()
        """The run's budgets and spend (ci_evals.config.budget): targets and graders charge every
        priced call to it and ask it before each call."""
        self.suite_raw: dict[str, Any] | None = (
            None  # the suite as written (graders pick dialect defaults)
        )
        self.files_read: set[Path] = (
            set()
        )  # rubrics, prompts, .af files: part of the suite's code fingerprint

    def resolve(self, path: str | Path) -> Path:
        p = Path(path).expanduser()
        return p if p.is_absolute() else (self.base_dir / p)

    def read_text(self, path: str | Path, what: str, key: str) -> str:
        """A UTF-8 file named in the suite (a rubric, a system prompt); ConfigError naming it otherwise."""
        full = self.resolve(path)
        shown = shorten(str(full))
        try:
            text = full.read_text(encoding="utf-8")
            self.files_read.add(full.resolve())
            return text
        except UnicodeDecodeError as exc:
            raise ConfigError(
                f"cannot read {what} {shown}: not UTF-8 text (byte {exc.start})", key=key
            ) from None
        except OSError as exc:
            reason = (
                "file not found" if isinstance(exc, FileNotFoundError) else exc.strerror or str(exc)
            )
            raise ConfigError(f"cannot read {what} {shown}: {reason}", key=key) from None


def _loc(prefix: str, loc: tuple) -> str:
    parts = [prefix] if prefix else []
    for p in loc:
        if isinstance(p, int):
            parts[-1:] = [f"{parts[-1]}[{p}]"] if parts else [f"[{p}]"]
        else:
            parts.append(str(p))
    return ".".join(parts)


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model inside an annotation such as ``Gate | None`` or ``list[Gate]``."""
    from typing import get_args

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _is_mapping(annotation: Any) -> bool:
    """Whether an annotation such as ``dict[str, Price]`` (or ``... | None``) is a mapping."""
    from typing import get_args, get_origin

    return get_origin(annotation) is dict or any(_is_mapping(a) for a in get_args(annotation))


def _unknown_value(err: ErrorDetails, loc: tuple[int | str, ...]) -> str:
    """A value outside a ``Literal``/enum field, in the registries' wording, with the closest choice."""
    import re

    what = next((str(p) for p in reversed(loc) if isinstance(p, str)), "value")
    choices = re.findall(r"'([^']*)'", str((err.get("ctx") or {}).get("expected", "")))
    return unknown_choice(what, err.get("input"), choices)


def validate_model(
    model: type[M],
    raw: Any,
    key: str = "",
    file: str | None = None,
    lines: dict[str, int] | None = None,
) -> M:
    """Validate ``raw`` with ``model``; turn the first pydantic error into a one-line ConfigError.

    The message names the YAML path and, for an unknown key, the closest valid key. ``lines`` maps
    a dotted YAML path to its line number (see :mod:`ci_evals.config.yamlio`).
    """
    from pydantic import ValidationError

    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        # A typo shows up as an unknown key plus a missing one: report the unknown key first.
        err = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
        loc = tuple(err.get("loc", ()))
        path = _loc(key, loc)
        line = lines.get(path) if lines else None
        if err["type"] == "extra_forbidden":
            # Find the model that owns the parent path to list its valid keys.
            owner: Any = model
            dict_key = False
            for part in loc[:-1]:
                if isinstance(part, int) or dict_key:
                    dict_key = False
                    continue  # a list index or a dict key: the owner is the item model
                field = getattr(owner, "model_fields", {}).get(part)
                owner = _model_in(field.annotation) if field is not None else None
                if field is None or owner is None:
                    break
                dict_key = _is_mapping(field.annotation)
            valid = list(getattr(owner, "model_fields", {})) if owner is not None else []
            long = len(str(loc[-1])) > 100  # no sensible suggestion; keep the line short
            hint = did_you_mean(str(loc[-1]), valid) if valid and not long else ""
            msg = f"unknown key '{shorten(str(loc[-1]), 60)}'{hint}"
        elif err["type"] == "missing":
            msg = "required key is missing"
        elif err["type"] in ("literal_error", "enum"):
            msg = _unknown_value(err, loc)
        else:
            msg = err["msg"]
            if msg.startswith("Value error, "):
                msg = msg[len("Value error, ") :]
            given = err.get("input")
            if err["type"] not in ("value_error", "assertion_error") and not isinstance(
                given, (dict, list)
            ):
                msg += f" (got {shorten(repr(given))})"
        raise ConfigError(
            msg, file=file, line=line, key=shorten(path, 60) if path else None
        ) from None
