"""Regular expressions on untrusted text with a time limit (``regex_match``, the ``pattern`` extractor).

Python's ``re`` cannot be interrupted: a catastrophic pattern such as ``^(a|aa)+$`` on a long
model output pins the CPU, and no signal is handled until it returns. These helpers use the
``regex`` package (already installed with NLTK) in its ``re``-compatible mode. A search first
runs inline with a short limit (almost every search ends in microseconds); one that does not is
moved to a daemon thread (the GIL released) and abandoned after :data:`MATCH_SECONDS` of wall
time in all, so the sample gets an error and signals are handled. (``regex``'s own timeout is
only checked now and then: it overshoots several-fold on a busy machine, so it is a backstop.)
"""

from __future__ import annotations

import functools
import threading
import time
from typing import Any

MAX_PATTERN_CHARS = 10_000
"""Longest pattern compiled. Compiling cannot be interrupted (no signal is handled meanwhile) and
grows with the pattern: 200,000 alternatives took 8.7 s; 10,000 characters take about 0.1 s."""
MATCH_SECONDS = 1.0
"""Seconds one search may take before it is abandoned (an error for that sample)."""
INLINE_SECONDS = 0.05


class RegexTimeout(Exception):
    """A search ran past MATCH_SECONDS."""


class PatternTooLong(ValueError):
    """A pattern over MAX_PATTERN_CHARS: refused before compiling."""


@functools.lru_cache(maxsize=256)
def compile_pattern(pattern: str) -> Any:
    """The compiled pattern (``re`` syntax, compiled once per distinct pattern while the cache holds
    it); raises ``ValueError`` with the reason when invalid or longer than MAX_PATTERN_CHARS."""
    import re

    if len(pattern) > MAX_PATTERN_CHARS:
        raise PatternTooLong(
            f"the pattern is {len(pattern):,} characters long; at most {MAX_PATTERN_CHARS:,} "
            "are compiled (compiling cannot be interrupted)"
        )

    import regex

    try:
        re.compile(pattern)  # the syntax is re's, and so are the error messages users know
    except (re.error, OverflowError, RecursionError) as exc:
        raise ValueError(str(exc)) from None
    try:
        return regex.compile(pattern, regex.VERSION0)
    except (regex.error, OverflowError, RecursionError) as exc:
        raise ValueError(str(exc)) from None


def _limited(method: str, rx: Any, text: str) -> Any:
    started = time.monotonic()
    try:
        return getattr(rx, method)(text, timeout=INLINE_SECONDS)
    except TimeoutError:
        pass
    box: dict[str, Any] = {}
    done = threading.Event()

    def work() -> None:
        try:
            box["value"] = getattr(rx, method)(text, timeout=MATCH_SECONDS, concurrent=True)
        except BaseException as exc:  # handed to the caller (or dropped once abandoned)
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=work, name="ci-evals-regex", daemon=True).start()
    if done.wait(max(0.0, MATCH_SECONDS - (time.monotonic() - started))):
        if "value" in box:
            return box["value"]
        if not isinstance(box["error"], TimeoutError):
            raise box["error"]
    raise RegexTimeout(
        f"regex {rx.pattern[:80]!r} took over {MATCH_SECONDS:g} s on a "
        f"{len(text):,}-character text (catastrophic backtracking?)"
    ) from None


def search(rx: Any, text: str) -> Any:
    """``rx.search(text)`` under the time limit (RegexTimeout past it)."""
    return _limited("search", rx, text)


def findall(rx: Any, text: str) -> list:
    """``rx.findall(text)`` under the time limit (RegexTimeout past it)."""
    return _limited("findall", rx, text)
