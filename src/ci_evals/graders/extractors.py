"""Extractors: pick what to grade out of a trajectory.

The nine built-ins have letta-evals 0.5 semantics exactly (see docs in ``EXTRACTOR_DOCS``); their
config is validated when the suite loads (a missing ``tool_name`` is a ConfigError, not a failure
at grade time). Custom extractors use ``@extractor`` and are referenced by name or as
``file.py:function``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from pydantic import field_validator

from ci_evals._util.errors import ConfigError
from ci_evals._util.registry import EXTRACTORS
from ci_evals._util.rx import compile_pattern, findall, search
from ci_evals.config.specs import Strict, validate_model
from ci_evals.core.trajectory import ToolCall, Trajectory
from ci_evals.usercode import lane as usercode
from ci_evals.usercode.load import load_object, split_ref


class _NoConfig(Strict):
    pass


class _Separator(Strict):
    separator: str = "\n"


class _Pattern(Strict):
    pattern: str
    group: int = 0
    search_all: bool = False

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, v: str) -> str:
        try:
            compile_pattern(v)
        except ValueError as exc:
            raise ValueError(f"invalid regular expression: {exc}") from None
        return v


class _ToolName(Strict):
    tool_name: str


class _Marker(Strict):
    marker: str
    include_marker: bool = False


class _BlockLabel(Strict):
    block_label: str


def _assistant(t: Trajectory) -> list[str]:
    return [m.content for m in t.messages() if m.role == "assistant" and m.content]


def last_assistant(t: Trajectory, c: _NoConfig) -> str:
    texts = _assistant(t)
    return texts[-1] if texts else ""


def first_assistant(t: Trajectory, c: _NoConfig) -> str:
    texts = _assistant(t)
    return texts[0] if texts else ""


def all_assistant(t: Trajectory, c: _Separator) -> str:
    return c.separator.join(_assistant(t))


def last_turn(t: Trajectory, c: _Separator) -> str:
    if not t.turns:
        return ""
    return c.separator.join(m.content for m in t.turns[-1] if m.role == "assistant" and m.content)


def pattern(t: Trajectory, c: _Pattern) -> str:
    rx = compile_pattern(c.pattern)
    for text in reversed(_assistant(t)):
        if c.search_all:
            found = findall(rx, text)
            if found:
                if rx.groups >= 2:
                    return " ".join(f[c.group] for f in found)
                return " ".join(found)
        else:
            m = search(rx, text)
            if m:
                return m.group(c.group) or ""
    return ""


def _first_call(t: Trajectory, name: str) -> ToolCall | None:
    return next((tc for tc in t.tool_calls() if tc.name == name), None)


def tool_arguments(t: Trajectory, c: _ToolName) -> str:
    call = _first_call(t, c.tool_name)
    return call.arguments if call else "{}"


def tool_output(t: Trajectory, c: _ToolName) -> str:
    call = _first_call(t, c.tool_name)
    if call is None:
        return ""
    for m in t.messages():
        if m.role == "tool" and m.tool_call_id == call.id:
            return m.content
    return ""


def after_marker(t: Trajectory, c: _Marker) -> str:
    for text in reversed(_assistant(t)):
        i = text.find(c.marker)
        if i >= 0:
            start = i if c.include_marker else i + len(c.marker)
            return text[start:].strip()
    return ""


def memory_block(t: Trajectory, c: _BlockLabel) -> str:
    return t.memory_blocks.get(c.block_label, "")


BUILTINS: dict[str, tuple[Callable[..., str], type[Strict], str]] = {
    "last_assistant": (last_assistant, _NoConfig, "the last assistant message over all turns"),
    "first_assistant": (first_assistant, _NoConfig, "the first assistant message"),
    "all_assistant": (
        all_assistant,
        _Separator,
        "all assistant messages joined by `separator` (\\n)",
    ),
    "last_turn": (
        last_turn,
        _Separator,
        "the final turn's assistant messages joined by `separator`",
    ),
    "pattern": (
        pattern,
        _Pattern,
        "regex `pattern` on assistant messages, newest first; `group`, `search_all`",
    ),
    "tool_arguments": (
        tool_arguments,
        _ToolName,
        "JSON arguments of the first call to `tool_name` ('{}' if none)",
    ),
    "tool_output": (tool_output, _ToolName, "the result of the first call to `tool_name`"),
    "after_marker": (
        after_marker,
        _Marker,
        "text after `marker` in the newest message having it (`include_marker`)",
    ),
    "memory_block": (
        memory_block,
        _BlockLabel,
        "the value of memory block `block_label` at the end of the run",
    ),
}
for _name, (_fn, _cfg, _doc) in BUILTINS.items():
    EXTRACTORS.register(_name, _fn)


class Extractor:
    """A configured extractor: ``extractor(trajectory) -> str``."""

    def __init__(
        self, name: str, fn: Callable[..., Any], config: Any, needs_memory: bool, custom: bool
    ) -> None:
        self.name = name
        self.fn = fn
        self.config = config
        self.needs_memory = needs_memory
        self.custom = custom
        self._three = custom and len(inspect.signature(fn).parameters) == 3

    async def extract(self, trajectory: Trajectory) -> str:
        """The submission; a custom extractor runs off the event loop, time-limited (ci_evals.usercode.lane)."""
        if not self.custom:
            return self(trajectory)
        return await usercode.call(self, trajectory, what=f"extractor '{self.name}'")

    def __call__(self, trajectory: Trajectory) -> str:
        if self._three:
            blocks = [
                SimpleNamespace(label=k, value=v) for k, v in trajectory.memory_blocks.items()
            ]
            state = SimpleNamespace(
                blocks=blocks,
                memory=SimpleNamespace(blocks=blocks),
                memory_blocks=trajectory.memory_blocks,
            )
            out = self.fn(trajectory.turns, self.config, state)
        elif self.custom:
            out = self.fn(trajectory.turns, self.config)
        else:
            out = self.fn(trajectory, self.config)
        if not isinstance(out, str):
            raise TypeError(f"extractor '{self.name}' returned {type(out).__name__}, expected str")
        return out


def make_extractor(
    name: str,
    config: dict[str, Any],
    base_dir: Path,
    *,
    key: str,
    file: str | None = None,
    lines: dict[str, int] | None = None,
) -> Extractor:
    """Build an extractor from a grader's ``extractor``/``extractor_config``; validate the config now."""
    if name in BUILTINS:
        fn, cfg_model, _ = BUILTINS[name]
        cfg = validate_model(cfg_model, config or {}, f"{key}.extractor_config", file, lines)
        return Extractor(name, fn, cfg, needs_memory=(name == "memory_block"), custom=False)
    if split_ref(name):
        fn = load_object(name, base_dir, key=f"{key}.extractor")
        if not getattr(fn, "_is_extractor", False):
            raise ConfigError(
                f"'{name}' is not decorated with @extractor", key=f"{key}.extractor", file=file
            )
    else:
        fn = EXTRACTORS.get(name, key=f"{key}.extractor")
    three = len(inspect.signature(fn).parameters) == 3
    return Extractor(name, fn, dict(config or {}), needs_memory=three, custom=True)
