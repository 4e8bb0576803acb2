"""The one reader and checker of a results folder's summary.json and results.jsonl.

Every read names how far the folder is trusted (:class:`Trust`):

* ``OWN``: this process's run wrote it a moment ago. Parsed as fast as possible (orjson, see
  :func:`own_loads`; the reports read it in one pass); a torn line from a hard kill is skipped.
* ``OTHER``: another run wrote it: a baseline, a shard to merge, a folder to resume or to rebuild
  report.html from. Bounded (bytes per file and line, nesting depth) and checked: not UTF-8, a
  lone surrogate escape, NaN/Infinity or a number too large for a float, a record or summary of
  another shape each stop the read with one :class:`~ci_evals._util.errors.ConfigError` naming the file
  (and the line, for results.jsonl). Only a torn *last* line (no newline: a killed writer) is
  skipped.
* ``HOSTILE``: an artifact a fork uploaded (the Action's results mode). Checked as ``OTHER``; the
  reports also neutralise its text before rendering (``ci_evals.reports.artifact``).

Nothing read from a folder is used as a path outside it (see :func:`baseline_reference`), and a
file that is a symlink or not a regular file (a FIFO, ``/dev/zero``) is refused rather than
followed, for every trust but ``OWN``.
"""

from __future__ import annotations

import enum
import io
import json
import math
import os
import re
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

from ci_evals._util.bounds import NOT_READ, depth_exceeds, orjson_loads
from ci_evals._util.errors import ConfigError
from ci_evals._util.text import shorten
from ci_evals.results.contract import record_problem, summary_problem
from ci_evals.results.records import ResultRecord, Summary

SUMMARY = "summary.json"
RESULTS = "results.jsonl"
MAX_SUMMARY_BYTES = 64 * 1024 * 1024
"""summary.json from elsewhere is read up to this size (ours are kilobytes; errors.groups is capped)."""
MAX_LINE_BYTES = 64 * 1024 * 1024
"""A results.jsonl line from elsewhere may be this long (each stored field is capped at 100,000 characters)."""
MAX_DEPTH = 200
"""Nesting a results record may have: a dataset row (at most 100 levels) sits a few levels down in it."""


class Trust(enum.Enum):
    """How far a results folder is trusted (see the module docstring)."""

    OWN = "own"
    OTHER = "other"
    HOSTILE = "hostile"


# ---------------------------------------------------------------- decoding


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON (numbers must be finite)")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {shorten(text, 40)} is too large (numbers must be finite)")
    return value


_DECODER = json.JSONDecoder(parse_constant=_no_constant, parse_float=_finite_float)
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def decode(data: bytes, depth: int = MAX_DEPTH) -> Any:
    """One JSON document from another run: strict UTF-8, finite numbers, no lone surrogate,
    at most ``depth`` levels deep. ValueError says what is wrong."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})"
        ) from None
    if text.startswith("\ufeff"):
        text = text[1:]
    try:
        value = _DECODER.decode(text)
    except RecursionError:
        raise ValueError(f"nested more than {depth} levels deep") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON: {shorten(str(exc), 120)}") from None
    # Nesting needs an opening bracket per level: a text with few of them cannot be too deep.
    if text.count("[") + text.count("{") > depth and depth_exceeds(value, depth):
        raise ValueError(f"nested more than {depth} levels deep")
    if "\\u" in text and _SURROGATE_ESCAPE.search(
        text
    ):  # a pair is one character; a lone half cannot be written as UTF-8
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError("a lone surrogate escape (\\ud800-\\udfff) is not text") from None
    return value


def _open_checked(path: Path, trust: Trust) -> io.BufferedReader:
    """``path`` opened for binary reading; another run's file must be a regular file, not a symlink."""
    if trust is not Trust.OWN:
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            raise ConfigError("no such file", file=str(path)) from None
        if stat.S_ISLNK(st.st_mode):
            raise ConfigError(
                "is a symlink; a results folder from elsewhere must hold its own files",
                file=str(path),
            )
        if not stat.S_ISREG(st.st_mode):
            raise ConfigError("is not a regular file", file=str(path))
    return path.open("rb")


# ---------------------------------------------------------------- summary.json


def read_summary(folder: Path, trust: Trust, what: str = SUMMARY) -> Summary:
    """``folder``'s summary.json, checked for ``trust``; ConfigError (one line, naming the file)
    when it is missing, unreadable or of another shape. ``what`` names it in messages
    (``baseline summary.json``)."""
    path = Path(folder) / SUMMARY
    if not os.path.lexists(path):
        raise ConfigError(f"no {SUMMARY} in this folder", file=str(folder))
    with _open_checked(path, trust) as fh:
        data = fh.read(MAX_SUMMARY_BYTES + 1)
    if len(data) > MAX_SUMMARY_BYTES:
        raise ConfigError(
            f"{what} is larger than {MAX_SUMMARY_BYTES // (1 << 20)} MiB", file=str(path)
        )
    try:
        summary = decode(data)
    except ValueError as exc:
        detail = str(exc)
        raise ConfigError(
            f"{what} is {detail}" if detail.startswith("not valid JSON") else f"{what}: {detail}",
            file=str(path),
        ) from None
    if not isinstance(summary, dict):
        raise ConfigError(f"{what} is not a JSON object", file=str(path))
    problem = summary_problem(summary)
    if problem:
        raise ConfigError(f"{what}: {problem}", file=str(path))
    return summary  # type: ignore[return-value]


@contextmanager
def foreign_shape(file: str, what: str) -> Iterator[None]:
    """Turn a crash on a file another run wrote (valid JSON, wrong shape) into a one-line ConfigError."""
    try:
        yield
    except (KeyError, TypeError, AttributeError, ValueError, IndexError) as exc:
        detail = shorten(f"{type(exc).__name__}: {exc}", 80)
        raise ConfigError(
            f"{what} has an unexpected shape ({detail}); is it a ci-evals results folder?",
            file=file,
        ) from None


# ---------------------------------------------------------------- results.jsonl


def iter_records(
    path: Path, trust: Trust, wanted: set[int] | None = None, what: str = RESULTS
) -> Iterator[tuple[int, ResultRecord]]:
    """(0-based line number, record) of a results.jsonl, checked for ``trust``; nothing when the
    file does not exist. ``wanted``: parse only these line numbers (the others are only counted).

    ``OWN``: lines that do not parse, or are not objects, are skipped (a torn line from a hard
    kill). Otherwise any bad line is a ConfigError naming ``file:line``, except a torn last line.
    """
    path = Path(path)
    if not os.path.lexists(path):
        return
    if trust is Trust.OWN:
        yield from _own_records(path, wanted)
        return
    with _open_checked(path, trust) as fh:
        n = -1
        while True:
            raw = fh.readline(MAX_LINE_BYTES + 1)
            if not raw:
                return
            n += 1
            if len(raw) > MAX_LINE_BYTES:
                raise ConfigError(
                    f"{what}: line longer than {MAX_LINE_BYTES >> 20} MiB",
                    file=str(path),
                    line=n + 1,
                )
            if (wanted is not None and n not in wanted) or not raw.strip():
                continue
            try:
                rec = decode(raw)
            except ValueError as exc:
                if not raw.endswith(b"\n") and not fh.peek(
                    1
                ):  # torn last line: a writer was killed
                    return
                raise ConfigError(f"{what}: {exc}", file=str(path), line=n + 1) from None
            problem = record_problem(rec)
            if problem:
                raise ConfigError(f"{what}: {problem}", file=str(path), line=n + 1)
            yield n, rec


def _own_records(path: Path, wanted: set[int] | None) -> Iterator[tuple[int, ResultRecord]]:
    with path.open("rb") as fh:
        for n, raw in enumerate(fh):
            if (wanted is None or n in wanted) and raw.strip():
                rec = own_loads(raw)
                if isinstance(rec, dict):  # our own line: trusted as written (a torn one skipped)
                    yield n, cast(ResultRecord, rec)


def own_loads(raw: bytes) -> Any:
    """One line of our own results.jsonl, parsed as ``json.loads`` parses it (None when it does not
    parse: a torn line): orjson for the usual line (see :func:`~ci_evals._util.bounds.orjson_loads`),
    ``json`` for the rest, bytes that are not UTF-8 decoded with replacement as before."""
    value = orjson_loads(raw)
    if value is not NOT_READ:
        return value
    try:
        return json.loads(raw.decode("utf-8", "replace"))
    except ValueError:
        return None


def records(path: Path, trust: Trust, what: str = RESULTS) -> Iterator[ResultRecord]:
    """The records of a results.jsonl, checked for ``trust`` (see :func:`iter_records`)."""
    for _, rec in iter_records(path, trust, what=what):
        yield rec


def check_records(path: Path, trust: Trust, what: str = RESULTS) -> int:
    """Read a whole results.jsonl once for ``trust`` (ConfigError at the first bad line); its record count."""
    return sum(1 for _ in iter_records(path, trust, what=what))


# ---------------------------------------------------------------- paths named inside a folder


def baseline_reference(
    summary: Summary, folder: Path, root: Path | None
) -> tuple[Path | None, str | None]:
    """(the baseline folder summary.json names in ``baseline.folder``, why it is not read).

    The path is tried as given, then against ``folder``, and is used when it holds a
    results.jsonl. ``root`` None: the summary is our own run's, whose baseline path the user gave
    (``run --baseline``). Otherwise the folder is data, so the path is followed only inside the
    allowed ``root`` (``ci-evals report`` passes the current directory, which is what ``--baseline``
    paths are relative to: CI checks out, runs and keeps its baseline there): once resolved (``..``
    and symlinks followed) it must lie inside. Anything else (``../..``, an absolute path
    elsewhere, a symlink out) is not read: (None, why).
    """
    ref = (summary.get("baseline") or {}).get("folder")
    if not isinstance(ref, str) or not ref:
        return None, None
    if "\x00" in ref:
        return None, "baseline.folder is not a path"
    real_root = root.resolve() if root is not None else None
    outside = False
    for cand in (Path(ref), Path(folder) / ref):
        real = cand.resolve()
        if real_root is not None and real != real_root and real_root not in real.parents:
            outside = True
            continue
        if (real / RESULTS).is_file():
            return (cand if root is None else real), None
    if outside:
        return (
            None,
            f"the baseline folder it names ({shorten(ref, 80)!r}) is outside the current directory: not read",
        )
    return None, None
