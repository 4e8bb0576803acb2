"""The run's limits on calls: how many at once, how fast, how long one may wait.

The defaults of ``max_concurrent`` and ``max_wait``, and the rate-limit arithmetic the suite's
settings are checked with and the LLM scheduler paces by. A leaf (no ci-evals import): the suite
loader checks ``rate_limits`` and ``max_wait`` with it without importing the LLM package, the
command line's options read the defaults without importing anything else; :mod:`ci_evals.llm.limits`
paces calls with the same numbers.
"""

from __future__ import annotations

DEFAULT_MAX_CONCURRENT = 10
"""Samples in flight at once, and each LLM endpoint's highest in-flight limit (its AIMD limit stays
between 1 and it), when neither ``--max-concurrent`` (the Action's ``max-concurrent`` input) nor the
suite's ``max_concurrent`` sets it. Documented in docs/reference.md (the suite keys), README.md and
action.yml; tests/test_max_concurrent.py checks the documented value is this one."""

DEFAULT_MAX_WAIT = 600.0
HEADROOM = 0.97
"""Calls are paced at this share of a known limit: at exactly the limit, network jitter alone
makes some calls arrive a moment before the server's bucket refilled."""

MIN_MAX_WAIT = 1.0
"""The shortest ``max_wait`` a run accepts: under a second, no throttling answer could be waited out."""


def seconds_per_request(per_minute: float) -> float:
    """How long one request (or token) takes at ``per_minute``, paced at ``HEADROOM``."""
    return 60.0 / (per_minute * HEADROOM)


def check_rates(
    rates: dict[str, tuple[float | None, float | None]], max_wait: float, where: str
) -> str | None:
    """The one line that says a requests-per-minute setting is too slow for ``max_wait`` (one request
    would wait longer than any call may), or None. ``where`` names the setting (``--rpm``)."""
    for key, (rpm, _tpm) in rates.items():
        if rpm is not None and seconds_per_request(rpm) > max_wait:
            scope = "" if key == "*" else f" for {key}"
            return (
                f"{where}{scope}: {rpm:g} requests a minute is one request every "
                f"{seconds_per_request(rpm):.3g} s, more than max_wait {max_wait:g} s allows"
            )
    return None
