"""Outside text made valid at the boundary: lone UTF-16 surrogates and undecodable bytes replaced.

Agents, models, commands, HTTP bodies and datasets can hand us strings that are not valid Unicode
(``json.loads('"answer \\ud83d"')`` gives a lone surrogate, which UTF-8 cannot encode). Each one
becomes U+FFFD and is counted, so results.jsonl is always valid UTF-8 JSON and one sample's bytes
can never cost the run its verdict.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Protocol, Self, TypeVar

REPLACEMENT = "\ufffd"
_SURROGATE = re.compile("[\ud800-\udfff]")


def clean_text(text: str) -> tuple[str, int]:
    """``text`` with every surrogate code point replaced, and how many there were."""
    if not _SURROGATE.search(text):
        return text, 0
    return _SURROGATE.subn(REPLACEMENT, text)


def clean_value(value: Any) -> tuple[Any, int]:
    """A JSON-like value (dicts, lists, strings) with its strings and keys cleaned; the count."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        out, total = {}, 0
        for k, v in value.items():
            k2, a = clean_text(k) if isinstance(k, str) else (k, 0)
            out[k2], b = clean_value(v)
            total += a + b
        return out, total
    if isinstance(value, (list, tuple)):
        items = [clean_value(v) for v in value]
        return [v for v, _ in items], sum(n for _, n in items)
    return value, 0


def decode(data: bytes) -> tuple[str, int]:
    """UTF-8 bytes as text; undecodable bytes become U+FFFD, counted."""
    try:
        return data.decode("utf-8"), 0
    except UnicodeDecodeError:
        text = data.decode("utf-8", "replace")
        return text, text.count(REPLACEMENT) - data.count(REPLACEMENT.encode("utf-8"))


def clean_trajectory(traj) -> int:
    """Clean a target's trajectory in place (message text, tool calls, memory blocks); the count."""
    total = 0
    for msg in traj.messages():
        msg.content, n = clean_text(msg.content)
        total += n
        for call in msg.tool_calls:
            call.name, a = clean_text(call.name)
            call.arguments, b = clean_text(call.arguments)
            total += a + b
    if traj.memory_blocks:
        blocks, n = clean_value(traj.memory_blocks)
        if n:
            traj.memory_blocks = blocks
            total += n
    return total


class _Texts(Protocol):
    """What :func:`clean_sample` reads of a sample (``core.sample.Sample``, which _util cannot import)."""

    input: Any
    ground_truth: Any

    def model_copy(
        self, *, update: Mapping[str, Any] | None = None, deep: bool = False
    ) -> Self: ...


_S = TypeVar("_S", bound=_Texts)


def clean_sample(sample: _S) -> tuple[_S, int]:
    """The sample with its input and ground truth cleaned (the same object when nothing changed); the count."""
    inp, a = clean_value(sample.input)
    truth, b = clean_value(sample.ground_truth)
    if not a + b:
        return sample, 0
    return sample.model_copy(update={"input": inp, "ground_truth": truth}), a + b
