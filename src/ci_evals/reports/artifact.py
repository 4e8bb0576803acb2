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

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

_SWAP = str.maketrans({"<": "‹", ">": "›", "&": "＆", "@": "＠", "[": "［", "]": "］", "`": "ˋ",
                       "|": "¦", "\\": "⧵", "#": "＃", "\x00": "", "\r": " "})
_AUTOLINK = re.compile(r"(?i)(://|www\.)")
MULTILINE_KEYS = frozenset({"input", "ground_truth", "submission", "rationale", "message", "output",
                            "description"})
"""Long text whose line breaks are kept (the renderers show it in fenced blocks)."""


def neutralise(text: str, multiline: bool = False) -> str:
    """``text`` with markup made inert; line breaks kept only when ``multiline``."""
    text = _AUTOLINK.sub(lambda m: m.group(1)[:-1] + "\u2060" + m.group(1)[-1], text.translate(_SWAP))
    return text if multiline else " ".join(text.split("\n"))


def neutralise_tree(value: Any, multiline: bool = False) -> Any:
    """Every string of a JSON document made inert; keys are single-line, values of
    :data:`MULTILINE_KEYS` keep their line breaks."""
    if isinstance(value, str):
        return neutralise(value, multiline)
    if isinstance(value, dict):
        return {(neutralise(k) if isinstance(k, str) else k):
                neutralise_tree(v, multiline or (isinstance(k, str) and k in MULTILINE_KEYS))
                for k, v in value.items()}
    if isinstance(value, list):
        return [neutralise_tree(v, multiline) for v in value]
    return value


def load_summary(folder: str | Path) -> dict[str, Any]:
    """The folder's summary.json made inert; ValueError when it is not a JSON object."""
    path = Path(folder) / "summary.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot be read ({exc})") from None
    except ValueError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not a ci-evals summary (a JSON object)")
    return neutralise_tree(data)


def iter_results(folder: str | Path) -> Iterator[dict[str, Any]]:
    """The folder's results.jsonl records, each made inert; lines that are not objects are skipped."""
    from ci_evals.reports.summary import iter_results as raw

    for rec in raw(Path(folder) / "results.jsonl"):
        if isinstance(rec, dict):
            yield neutralise_tree(rec)
