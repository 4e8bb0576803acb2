"""Limits on untrusted input: JSON nesting and non-finite numbers, URLs, echoed text, announced lengths.

A leaf module (imports nothing of ci-evals but errors) shared by the dataset, replay and results
readers and the URL-taking specs. What a results folder must hold is checked in
:mod:`ci_evals.results.files`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import Any

import orjson

from ci_evals._util.errors import ConfigError

MAX_JSON_DEPTH = 100
"""Nesting levels a JSON record (dataset row, replay record) may have."""


def announced_length(headers: Any) -> int | None:
    """An HTTP body's length as its Content-Length header announces it in ASCII digits, else None
    (``int()`` would also read "٣" or "²" as a number, or raise)."""
    declared = headers.get("content-length") or ""
    return int(declared) if declared.isascii() and declared.isdigit() else None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON (numbers must be finite)")


def depth_exceeds(value: Any, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether lists/dicts nest more than ``limit`` levels (iterative: no recursion to exhaust)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children: Iterable[Any]
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


_DECODER = json.JSONDecoder(
    parse_constant=_no_constant, parse_float=_finite_float
)  # one decoder: json.loads(**kw) builds one per call
_DIGITS = bytes(
    0x30 if 0x30 <= b <= 0x39 else 0x2E for b in range(256)
)  # every digit a 0, the rest a dot
_LONG_RUN = b"0" * 19
NOT_READ = object()
"""What :func:`orjson_loads` returns for a text it leaves to ``json``."""


def orjson_loads(data: bytes) -> Any:
    """``data`` (UTF-8 JSON) parsed by orjson, 3-4x faster than ``json``, when orjson reads it as
    ``json`` does; else :data:`NOT_READ`. orjson refuses what ``json`` may take or word otherwise
    (NaN, a lone surrogate escape, bytes that are not UTF-8, a BOM, 1e999, 1,024 levels of
    nesting) and reads an integer outside 64 bits as a float: any run of 19+ digits (found by
    translate + find, ~10x cheaper than a regex) is left to ``json``."""
    if _LONG_RUN in data.translate(_DIGITS):
        return NOT_READ
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return NOT_READ


def quick_loads(raw: bytes) -> Any:
    """What ``loads(raw.decode("utf-8"))`` gives, when orjson can read ``raw`` and it has too few
    brackets to nest too deep (the usual JSONL line); else :data:`NOT_READ`, and :func:`loads`
    (after the caller's own checks) says what is wrong."""
    if raw.count(b"[") + raw.count(b"{") > MAX_JSON_DEPTH:
        return NOT_READ
    return orjson_loads(raw)


def loads(text: str | bytes) -> Any:
    """``json.loads`` that refuses NaN/Infinity and nesting deeper than MAX_JSON_DEPTH (ValueError)."""
    if isinstance(text, (bytes, bytearray)):
        text = text.decode(json.detect_encoding(text), "surrogatepass")
    try:
        value = orjson_loads(text.encode("utf-8"))
    except UnicodeEncodeError:  # a lone surrogate (from "surrogatepass"): json words the error
        value = NOT_READ
    if value is NOT_READ:
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
