"""What a run may spend: per-sample limits (``max_steps``, ``max_tokens``) and the run's
``max_cost_usd``, and what it has spent so far.

One :class:`Budget` per process, held by the :class:`~ci_evals.config.specs.Context` every target
and grader sees. Every priced LLM or agent call is charged here (:meth:`Budget.charge`) when its
answer arrives, and every call asks :meth:`Budget.check` before it is sent: once the run's spend
reaches ``max_cost_usd`` no further call is made, and the call that asked fails with
:class:`BudgetExceeded` (the sample errors with the reason; the verdict is ERRORED, never a pass).
Calls already in flight when the limit is reached finish (they cannot be taken back): the spend
can pass the limit by at most what ``max_concurrent`` calls cost. Pure data, no I/O.
"""

from __future__ import annotations

from ci_evals._util.errors import SampleError


class BudgetExceeded(SampleError):
    """A sample stopped by a budget: its own (``max_steps``, ``max_tokens``, the timeout) or the
    run's (``max_cost_usd``). ``category`` is ``budget``."""

    def __init__(self, message: str, *, retries: int = 0) -> None:
        super().__init__(message, category="budget", retries=retries)


class Budget:
    """A run's limits and its spend. ``None`` limits are no limit."""

    __slots__ = ("max_steps", "max_tokens", "max_cost_usd", "spent_usd", "stopped", "shards")

    def __init__(
        self,
        *,
        max_steps: int | None = None,
        max_tokens: int | None = None,
        max_cost_usd: float | None = None,
        shards: int = 1,
    ) -> None:
        self.max_steps = max_steps
        self.max_tokens = max_tokens
        self.max_cost_usd = max_cost_usd
        self.shards = shards
        """``--shard K/N``: ``max_cost_usd`` is this shard's share, the suite's cap / N."""
        self.spent_usd = 0.0
        self.stopped: str | None = None
        """Why the run stopped calling (the run's budget was spent), or None."""

    def charge(self, cost: float | None, unpriced: str | None = None) -> None:
        """Add one call's cost. None: nothing known to add; with ``unpriced`` (the model of a call
        that spent tokens at no known price) a ``max_cost_usd`` cannot be kept, and the run stops
        calling (fail closed: it would otherwise spend without a bound)."""
        if cost is None:
            if unpriced is not None and self.max_cost_usd is not None and self.stopped is None:
                self.stopped = (
                    f"model {str(unpriced)[:100]!r} has no known price, so max_cost_usd "
                    f"${self.max_cost_usd:g} cannot be kept (give its price under the suite's "
                    "pricing:)"
                )
            return
        if cost <= 0:
            return
        self.spent_usd += cost
        if (
            self.max_cost_usd is not None
            and self.stopped is None
            and self.spent_usd >= self.max_cost_usd
        ):
            cap = (
                f"the run's max_cost_usd ${self.max_cost_usd:g}"
                if self.shards == 1
                else f"this shard's share of max_cost_usd (${self.max_cost_usd * self.shards:g} / "
                f"{self.shards} = ${self.max_cost_usd:g})"
            )
            self.stopped = f"{cap} is spent (${self.spent_usd:.4f} so far)"

    def check(self) -> None:
        """Raise :class:`BudgetExceeded` once the run's budget is spent: a call must not be sent."""
        if self.stopped is not None:
            raise BudgetExceeded(f"not sent: {self.stopped}")

    def check_sample(self, steps: int, tokens: int) -> None:
        """Raise :class:`BudgetExceeded` when one sample's ``steps`` or ``tokens`` so far are past
        its limits (the sample stops there)."""
        if self.max_steps is not None and steps > self.max_steps:
            raise BudgetExceeded(f"stopped after {steps} steps: past max_steps {self.max_steps}")
        if self.max_tokens is not None and tokens > self.max_tokens:
            raise BudgetExceeded(
                f"stopped after {tokens:,} tokens: past max_tokens {self.max_tokens:,}"
            )
