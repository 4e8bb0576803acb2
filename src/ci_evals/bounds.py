"""Limits on untrusted input: JSON nesting and non-finite numbers, URLs, echoed text.

A leaf module (imports nothing of ci-evals but errors) shared by the dataset, replay, baseline,
resume and merge readers and the URL-taking specs.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ci_evals.errors import ConfigError

MAX_JSON_DEPTH = 100
"""Nesting levels a JSON record (dataset row, replay record) may have."""
ECHO_CHARS = 200
"""Characters of a user's input an error message may quote."""


def clip(text: str, limit: int = ECHO_CHARS) -> str:
    """``text`` cut to ``limit`` characters, marked with its full length when cut."""
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters)"


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON (numbers must be finite)")


def depth_exceeds(value: Any, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether lists/dicts nest more than ``limit`` levels (iterative: no recursion to exhaust)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return False


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e999: a literal too large for a float reads as inf
        raise ValueError(f"{text[:40]} is not a finite number")
    return value


_DECODER = json.JSONDecoder(parse_constant=_no_constant, parse_float=_finite_float)  # one decoder: json.loads(**kw) builds one per call


def loads(text: str | bytes) -> Any:
    """``json.loads`` that refuses NaN/Infinity and nesting deeper than MAX_JSON_DEPTH (ValueError)."""
    if isinstance(text, (bytes, bytearray)):
        text = text.decode(json.detect_encoding(text), "surrogatepass")
    try:
        value = _DECODER.decode(text)
    except RecursionError:
        raise ValueError(f"nested more than {MAX_JSON_DEPTH} levels deep") from None
    # Nesting needs an opening bracket per level: a text with few of them cannot be too deep.
    if text.count("[") + text.count("{") > MAX_JSON_DEPTH and depth_exceeds(value):
        raise ValueError(f"nested more than {MAX_JSON_DEPTH} levels deep")
    return value


def finite(value: Any) -> Any:
    """``value`` with every NaN/±inf float replaced by None (JSON has no such numbers)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def dumps(value: Any, **kwargs: Any) -> str:
    """``json.dumps`` that always gives valid JSON: a non-finite number becomes null."""
    try:
        return json.dumps(value, allow_nan=False, **kwargs)
    except ValueError:  # only the rare record holding NaN/inf pays for the copy
        return json.dumps(finite(value), allow_nan=False, **kwargs)


@contextmanager
def foreign_shape(file: str, what: str) -> Iterator[None]:
    """Turn a crash on a file another run wrote (valid JSON, wrong shape) into a one-line ConfigError."""
    try:
        yield
    except (KeyError, TypeError, AttributeError, ValueError, IndexError) as exc:
        detail = clip(f"{type(exc).__name__}: {exc}", 80)
        raise ConfigError(f"{what} has an unexpected shape ({detail}); is it a ci-evals results folder?",
                          file=file) from None


def _number(value: Any, *, none: bool = False) -> bool:
    if value is None:
        return none
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def record_problem(rec: Any) -> str | None:
    """What makes a results.jsonl record (from another run: baseline, merge, resume) unusable, or None."""
    if not isinstance(rec, dict):
        return "a record must be a JSON object"
    sid, run = rec.get("sample_id"), rec.get("run", 0)
    if isinstance(sid, bool) or not isinstance(sid, (str, int)):
        return "'sample_id' must be a string or an integer"
    if isinstance(run, bool) or not isinstance(run, int) or run < 0:
        return "'run' must be a non-negative integer"
    if rec.get("model") is not None and not isinstance(rec["model"], str):
        return "'model' must be a string or null"
    error = rec.get("error")
    if error is not None and not (isinstance(error, dict) and isinstance(error.get("message"), str)):
        return "'error' must be null or an object with a 'message'"
    if not _number(rec.get("duration_s"), none=True):
        return "'duration_s' must be a number"
    grades = rec.get("grades")
    if not isinstance(grades, dict):
        return "'grades' must be an object"
    for name, grade in grades.items():  # an errored grade has no score (null)
        if not isinstance(grade, dict) or not _number(grade.get("score"), none=bool(grade.get("error"))):
            return f"grades.{clip(str(name), 40)} must be an object with a numeric 'score'"
        if grade.get("error") is not None and not isinstance(grade["error"], str):
            return f"grades.{clip(str(name), 40)}.error must be a string or null"
    return None


def summary_problem(summary: dict[str, Any]) -> str | None:
    """What makes another run's summary.json unusable as a baseline or merge input, or None."""
    metrics = summary.get("metrics", {})
    if not isinstance(metrics, dict):
        return "'metrics' must be an object"
    for name, m in metrics.items():
        if not (isinstance(m, dict) and _number(m.get("mean"), none=True) and _number(m.get("pass_rate"), none=True)):
            return f"metrics.{clip(str(name), 40)} must be an object with numeric 'mean' and 'pass_rate'"
    if not isinstance(summary.get("config", {}), dict):
        return "'config' must be an object"
    return None


def check_output_folder(path: Any, option: str = "--output") -> None:
    """ConfigError when a results folder path names an existing file (it could only fail later)."""
    from pathlib import Path

    if Path(path).exists() and not Path(path).is_dir():
        raise ConfigError(f"{option}: is a file, expected a folder", file=str(path))


def check_url(url: str, key: str) -> None:
    """ConfigError (naming ``key``) unless ``url`` is http(s) with a host and a valid port.

    The URL itself is not quoted: it may carry a password.
    """
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (raises ValueError when out of range or not a number)
    except ValueError as exc:
        raise ConfigError(f"invalid URL: {exc}", key=key) from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError("invalid URL: expected http:// or https:// and a host name", key=key)
