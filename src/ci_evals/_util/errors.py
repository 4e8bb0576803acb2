"""The small error hierarchy: configuration errors (exit 2) and sample-level errors (counted)."""

from __future__ import annotations

from ci_evals._util.text import shorten


class CiEvalsError(Exception):
    """Base class of every error ci-evals raises on purpose."""


class ConfigError(CiEvalsError):
    """The suite, dataset or user code is invalid: one line, exit code 2.

    Args:
        message: what is wrong and, where possible, the closest valid choice.
        file: the file at fault.
        line: 1-based line in that file.
        key: dotted YAML path of the offending key (``graders.acc.function``).
    """

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        key: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.file = file
        self.line = line
        self.key = key

    def __str__(self) -> str:
        where = ""
        if self.file:
            where = self.file + (f":{self.line}" if self.line else "")
        if self.key:
            where = f"{where}: {self.key}" if where else self.key
        return f"{where}: {self.message}" if where else self.message


class SampleError(CiEvalsError):
    """A failure confined to one sample; it is recorded with its category and counted.

    ``category`` is one of ``target``, ``extraction``, ``grading``, ``budget``.
    """

    def __init__(self, message: str, *, category: str = "target", retries: int = 0) -> None:
        super().__init__(message)
        self.category = category
        self.retries = retries


def closest(name: str, choices: list[str] | tuple[str, ...] | set[str]) -> str | None:
    """The valid choice closest to a misspelled ``name``, or None when nothing is close."""
    import difflib

    found = difflib.get_close_matches(name, sorted(choices), n=1, cutoff=0.6)
    return found[0] if found else None


def did_you_mean(name: str, choices) -> str:
    """`` (did you mean 'x'?)`` or, with no close match, the list of valid choices."""
    best = closest(name, choices)
    if best:
        return f" (did you mean '{best}'?)"
    return f" (valid: {', '.join(sorted(choices))})" if choices else ""


def unknown_choice(what: str, name, choices) -> str:
    """The one message for a value outside an enumeration: ``unknown op 'gtee' (did you mean 'gte'?)``.

    Registries (target kinds, grader kinds and functions, extractors) and every ``Literal`` field
    of the suite models (metrics, ops, reducers, operations, providers...) share it.
    """
    shown = f"'{shorten(name, 60)}'" if isinstance(name, str) else shorten(repr(name), 60)
    return f"unknown {what} {shown}{did_you_mean(str(name), choices)}"
