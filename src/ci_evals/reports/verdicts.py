"""The words for each verdict: one table that every report and the Action read.

gating decides a run's verdict once (``ci_evals.gating.verdict.decide``) and writes it into
summary.json; a report only reads it (:func:`verdict_of`). A summary without one (written by
another tool, or by an older version) is shown as having none (:data:`NO_VERDICT`): no renderer
decides a verdict again.

A verdict's word (``PASSED``) heads the console's last line and report.html; its icon heads
summary.md and the PR comment; its sentence stands under report.html's heading; its colour is
the console's (an SGR code, used only when the stream takes colour).
"""

from __future__ import annotations

from typing import NamedTuple

from ci_evals.results.records import Summary, Verdict


class Words(NamedTuple):
    """How the reports name one verdict."""

    word: str
    icon: str
    sentence: str
    ansi: str


WORDS: dict[Verdict, Words] = {
    "passed": Words("PASSED", "✅", "Every gate passed.", "1;32"),
    "failed": Words("FAILED", "❌", "A gate failed on the measured scores.", "1;31"),
    "errored": Words(
        "ERRORED",
        "❌",
        "Samples errored: the gates could not be judged on scores alone.",
        "1;35",
    ),
    "interrupted": Words(
        "INTERRUPTED", "⚠️", "The run was interrupted; these are partial results.", "1;33"
    ),
    "partial": Words(
        "PARTIAL",
        "⚠️",
        "Samples are missing (merge or resume incomplete); these are partial results.",
        "1;33",
    ),
}

NO_VERDICT = Words(
    "NO VERDICT",
    "❔",
    "summary.json records no verdict (written by another tool or an older version).",
    "",
)
"""How a summary without a verdict is shown (its word is never coloured)."""

ORDER: tuple[Verdict, ...] = ("passed", "failed", "partial", "errored", "interrupted")
"""Best to worst: the Action's verdict over several suites is the worst of theirs."""


def verdict_of(summary: Summary) -> Verdict | None:
    """summary.json's verdict as gating decided it, or None when it records none."""
    verdict = summary.get("verdict")
    return verdict if verdict in WORDS else None


def words_of(summary: Summary) -> Words:
    """The words of the summary's verdict (:data:`NO_VERDICT` when it records none)."""
    verdict = verdict_of(summary)
    return NO_VERDICT if verdict is None else WORDS[verdict]
