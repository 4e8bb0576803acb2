"""A breaker for systematic failures: stop calling a service that has never answered.

While a service (an LLM endpoint, a Letta server) has not answered a single call successfully,
a run of calls failing *for the same cause that no retry fixes* (a host that does not resolve,
nothing listening, a TLS failure, 401, 403, 404, an exhausted quota) opens the breaker: the run
stops calling it, and every later call fails at once with that cause, so a mistyped host costs
seconds, not minutes of retries per sample. A 400 needs a longer run (``AFTER_400``): one sample
can be too long while the others are fine. One success disarms the breaker for good: after that,
failures are each call's own. Transient failures (timeouts, 5xx, dropped connections, throttling)
never count, so a burst of them at the start cannot open it.
"""

from __future__ import annotations

AFTER = 3
AFTER_400 = 8


class Breaker:
    """``stopped`` is the one line saying why calls stopped (None while closed)."""

    def __init__(self) -> None:
        self.successes = 0
        self.streak = 0
        self.kind: str | None = None
        self.stopped: str | None = None

    @property
    def first_contact(self) -> bool:
        """No call has succeeded yet: a systematic failure is not worth a retry."""
        return self.successes == 0

    def success(self) -> None:
        self.successes += 1
        self.streak, self.kind = 0, None

    def failure(self, kind: str | None, line: str) -> bool:
        """Count a call's final failure (``kind``: a systematic cause, or None); True when it opened now."""
        if self.successes or kind is None or self.stopped:
            self.streak, self.kind = 0, None
            return False
        self.streak = self.streak + 1 if kind == self.kind else 1
        self.kind = kind
        if self.streak >= (AFTER_400 if kind == "http_400" else AFTER):
            self.stopped = line
            return True
        return False

    def trip(self, line: str) -> None:
        """Open it now (a server asked for a wait no call may take)."""
        self.stopped = line
