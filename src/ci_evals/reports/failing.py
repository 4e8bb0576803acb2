"""The failing and errored samples of a run, gathered in one pass over its result lines.

:class:`FailingPass` is fed one line at a time, so the reports' one read of results.jsonl can
feed it too (``ci_evals.reports.write``); it keeps the first ``FAILING_SHOWN`` entries by sample
id (an earlier line first on a tie) and counts the rest. The console shows them
(``ci_evals.reports.console.failing_lines``).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from ci_evals.results.records import ResultRecord, Summary

FAILING_SHOWN = 10

SortKey = tuple[str, int, str, str]
"""(sample id, run, model, the grade's place in its line): the order the entries are shown in."""
Entry = tuple[SortKey, str, str, str, float | None, str]
"""(sort key, status, sample, grader or error category, score, reason)."""


def failing_entries(results: Iterable[ResultRecord], num_runs: int = 1) -> Iterator[Entry]:
    """``(sort key, status, sample, grader, score, reason)`` for every failing or errored grade.

    A result line whose target or extraction failed is one ERRORED entry (its graders never saw an
    answer); otherwise each grade that errored (ERRORED) or did not pass (FAIL) is one entry.
    """
    for rec in results:
        sid = str(rec.get("sample_id"))
        label = (
            sid
            + (f" run {rec.get('run')}" if num_runs > 1 or rec.get("run") else "")
            + (f" [{rec['model']}]" if rec.get("model") else "")
        )
        key = (sid, rec.get("run") or 0, str(rec.get("model") or ""))
        grades = rec.get("grades") or {}
        err = rec.get("error")
        if err:
            cat, msg = (
                (err.get("category") or "target", err.get("message"))
                if isinstance(err, dict)
                else ("target", err)
            )
            yield (*key, ""), "ERRORED", label, cat, None, f"{cat} error: {msg}"
            continue
        for i, (name, g) in enumerate(grades.items()):
            if g.get("error"):
                yield (
                    (*key, f"{i:04d}"),
                    "ERRORED",
                    label,
                    name,
                    None,
                    f"{g.get('error_category') or 'grading'} error: {g['error']}",
                )
            elif not g.get("passed"):
                yield (
                    (*key, f"{i:04d}"),
                    "FAIL",
                    label,
                    name,
                    g.get("score"),
                    g.get("rationale") or "",
                )


@dataclass
class FailingTally:
    """What the console's ``failing_lines`` shows: the first failing entries by sample id, and
    how many failures and failing samples there were in all."""

    shown: list[Entry]
    failures: int
    samples: int


class FailingPass:
    """The console's ``failing_lines`` pass over the result lines, fed one line at a time
    (:meth:`add`), so the reports' read of results.jsonl can feed it too (ci_evals.reports.write)."""

    def __init__(self, num_runs: int = 1, limit: int = FAILING_SHOWN) -> None:
        self.num_runs, self.limit = num_runs, limit
        self._kept: list[tuple[SortKey, int, Entry]] = []  # sorted: heapq.nsmallest's order
        self._seen = 0
        self._samples: set[tuple[str, int, str]] = set()

    @classmethod
    def of(cls, summary: Summary, limit: int = FAILING_SHOWN) -> FailingPass:
        """The pass for the result lines of the run ``summary`` describes (its ``num_runs``)."""
        return cls(int(summary.get("num_runs") or 1), limit)

    def add(self, rec: ResultRecord) -> None:
        kept, limit = self._kept, self.limit
        for entry in failing_entries((rec,), self.num_runs):
            self._seen += 1
            self._samples.add(entry[0][:3])
            if len(kept) < limit or (
                kept and entry[0] < kept[-1][0]
            ):  # an equal key came earlier: it stays ahead
                bisect.insort(kept, (entry[0], self._seen, entry))
                del kept[limit:]

    def tally(self) -> FailingTally:
        return FailingTally([e for _, _, e in self._kept], self._seen, len(self._samples))
