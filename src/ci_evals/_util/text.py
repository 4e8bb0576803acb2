"""The one text kit: how text is cut and flattened before it goes into a message or a report.

Three cuts, one module, so every message and every report cuts the same way:

- :func:`shorten` echoes a value into an error message: the start, then how long it was.
- :func:`fit` makes text fit a hard width (a table cell, an XML attribute): the note about what
  was dropped counts against the width.
- :func:`some_ids` names a few ids of many, and says how many more.
- :func:`one_line` puts text on one console line: whitespace runs become one space, control
  characters (ESC included, so no terminal escape gets through) become U+FFFD.

None of them scrubs secrets: text that may hold one goes through
:func:`ci_evals._util.redact.scrub_and_shorten`, whose name says it does both.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

ECHO_CHARS = 200
"""Characters of a bad value echoed in an error message."""

CAUSE_CHARS = 600
"""Characters of a cause quoted on one line (an endpoint's breaker: why the run stopped calling)."""

_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def shorten(text: str, limit: int = ECHO_CHARS) -> str:
    """``text`` cut to ``limit`` characters, marked with its full length when cut."""
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters)"


def fit(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, ending with how many were dropped."""
    if limit <= 0:
        return ""
    if len(text) <= limit:
        return text
    keep = limit
    for _ in range(3):  # the note's length depends on the count it states: settle it
        keep = limit - len(f"… ({len(text) - keep:,} more characters)")
        if keep <= 0:
            return text[:limit]
    result = text[:keep] + f"… ({len(text) - keep:,} more characters)"
    return result if len(result) <= limit else text[:limit]


def one_line(text: Any, limit: int = 300) -> str:
    """``text`` on one line, control characters (ESC included) replaced by U+FFFD, cut at ``limit``."""
    flat = _CONTROL.sub("\ufffd", " ".join(str(text).split()))
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def some_ids(ids: Iterable[str], limit: int = 5) -> str:
    """``'a', 'b' and 3 more``: ids for a message, sorted, each and their number bounded."""
    ids = sorted(ids)
    text = ", ".join(repr(i if len(i) <= 60 else i[:59] + "…") for i in ids[:limit])
    return text + (f" and {len(ids) - limit} more" if len(ids) > limit else "")
