"""The command line's overrides of what a loaded suite says: ``--model-handle`` (one of the
target's model handles), and ``--rpm``/``--tpm`` over the suite's ``rate_limits``.

The suite's dialects translate what its YAML says; what a flag of this run changes is applied
here, after the suite is loaded and checked.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from ci_evals._util.errors import ConfigError, did_you_mean
from ci_evals.run.options import SuiteOptions
from ci_evals.suite.loaded import LoadedSuite

Rates = dict[str, tuple[float | None, float | None]]
"""LLM rate limits: provider, base URL or ``*`` -> (rpm, tpm)."""


@runtime_checkable
class _ModelHandles(Protocol):
    """A target spec that lists model handles (the Letta targets')."""

    model_handles: list[str] | None


def select_model(suite: LoadedSuite, handle: str) -> None:
    """``--model-handle``: run only this one of the target's ``model_handles`` (letta-evals 0.25)."""
    spec = suite.target.spec
    handles = list(spec.model_handles or []) if isinstance(spec, _ModelHandles) else []
    if not isinstance(spec, _ModelHandles) or handle not in handles:
        listed = (
            f"its model_handles are {', '.join(handles)}"
            if handles
            else "it lists no model_handles"
        )
        raise ConfigError(
            f"--model-handle {handle}: not one of the target's model handles ({listed})"
            + did_you_mean(handle, handles),
            file=str(suite.path),
            key="target.model_handles",
            line=suite.lines.get("target.model_handles"),
        )
    spec.model_handles = [handle]


def rate_limits(suite: LoadedSuite, args: SuiteOptions) -> Rates:
    """The suite's ``rate_limits``, with ``--rpm``/``--tpm`` winning over them key by key."""
    rates: Rates = {key: (lim.rpm, lim.tpm) for key, lim in suite.spec.rate_limits.items()}
    for given, index in ((args.rpm, 0), (args.tpm, 1)):
        for key, value in given or []:  # the command line wins over the suite
            pair = list(rates.get(key, (None, None)))
            pair[index] = value
            rates[key] = (pair[0], pair[1])
    return rates
