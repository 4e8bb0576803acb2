"""Results mode: another job's results folder, every string of it treated as hostile.

In the fork-safe ``workflow_run`` flow the folder comes from an artifact that a fork's pull
request produced: its summary.json and results.jsonl can hold anything, in any field (a gate's
status, an error category, a metric's name), including fields the renderers print without
escaping because a run of ours never puts markup there. So every string, keys included, is made
inert before rendering: the characters that open HTML, links, images, code, tables and pings
become look-alikes (``<`` ‹, ``[`` ［, ``@`` ＠, ...), URLs lose their autolink, and single-line
fields lose their line breaks. The text stays readable; nothing in it acts.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ci_evals.results.files import RESULTS, Trust, check_records, read_summary, records
from ci_evals.results.records import ResultRecord, Summary

_SWAP = str.maketrans(
    {
        "<": "‹",
        ">": "›",
        "&": "＆",
        "@": "＠",
        "[": "［",
        "]": "］",
        "`": "ˋ",
        "|": "¦",
        "\\": "⧵",
        "#": "＃",
        "\x00": "",
        "\r": " ",
    }
)
_AUTOLINK = re.compile(r"(?i)(://|www\.)")
MULTILINE_KEYS = frozenset(
    {"input", "ground_truth", "submission", "rationale", "message", "output", "description"}
)
"""Long text whose line breaks are kept (the renderers show it in fenced blocks)."""


def neutralise(text: str, multiline: bool = False) -> str:
    """``text`` with markup made inert; line breaks kept only when ``multiline``."""
    text = _AUTOLINK.sub(
        lambda m: m.group(1)[:-1] + "\u2060" + m.group(1)[-1], text.translate(_SWAP)
    )
    return text if multiline else " ".join(text.split("\n"))


def neutralise_tree(value: Any, multiline: bool = False) -> Any:
    """Every string of a JSON document made inert; keys are single-line, values of
    :data:`MULTILINE_KEYS` keep their line breaks."""
    if isinstance(value, str):
        return neutralise(value, multiline)
    if isinstance(value, dict):
        return {
            (neutralise(k) if isinstance(k, str) else k): neutralise_tree(
                v, multiline or (isinstance(k, str) and k in MULTILINE_KEYS)
            )
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [neutralise_tree(v, multiline) for v in value]
    return value


def load_summary(folder: str | Path) -> Summary:
    """The folder's summary.json, checked as a hostile artifact and made inert; ConfigError
    (one line naming the file) when it is unreadable or of another shape."""
    return neutralise_tree(dict(read_summary(Path(folder), Trust.HOSTILE)))


def check_results(folder: str | Path) -> int:
    """Read the folder's results.jsonl once as a hostile artifact (ConfigError naming the first
    bad line), before anything renders it; its record count."""
    return check_records(Path(folder) / RESULTS, Trust.HOSTILE)


def inert_results(folder: str | Path) -> Iterator[ResultRecord]:
    """The folder's results.jsonl records, checked as a hostile artifact, each made inert (see
    :func:`ci_evals.reports.write.own_results` for this run's own, trusted as written)."""
    for rec in records(Path(folder) / RESULTS, Trust.HOSTILE):
        yield neutralise_tree(rec)
