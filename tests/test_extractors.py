"""The nine built-in extractors with letta-evals 0.5 semantics, and their config validation."""

from __future__ import annotations

from pathlib import Path

import pytest

from ci_evals._util.errors import ConfigError
from ci_evals.core.trajectory import Message, ToolCall, Trajectory
from ci_evals.graders.extractors import make_extractor
from ci_evals.suite import letta_evals_shim

TRAJ = Trajectory(
    turns=[
        [
            Message("user", "hi"),
            Message("assistant", "Hello! ANSWER: 1"),
            Message("reasoning", "thinking"),
        ],
        [
            Message("user", "search please"),
            Message("assistant", "", tool_calls=[ToolCall("c1", "search", '{"q": "pandas"}')]),
            Message("tool", "pandas are bears", tool_call_id="c1", name="search"),
            Message("assistant", "", tool_calls=[ToolCall("c2", "search", '{"q": "koalas"}')]),
            Message("tool", "koalas are marsupials", tool_call_id="c2", name="search"),
            Message("assistant", "Found it. ANSWER: 42 and ANSWER: 43"),
            Message("assistant", "Done."),
        ],
    ],
    memory_blocks={"human": "Name: Ada", "persona": "helpful"},
)


def ex(name, config=None):
    return make_extractor(name, config or {}, Path("."), key="graders.g")


@pytest.mark.parametrize(
    ("name", "config", "expected"),
    [
        ("last_assistant", {}, "Done."),
        ("first_assistant", {}, "Hello! ANSWER: 1"),
        ("all_assistant", {}, "Hello! ANSWER: 1\nFound it. ANSWER: 42 and ANSWER: 43\nDone."),
        (
            "all_assistant",
            {"separator": " | "},
            "Hello! ANSWER: 1 | Found it. ANSWER: 42 and ANSWER: 43 | Done.",
        ),
        ("last_turn", {}, "Found it. ANSWER: 42 and ANSWER: 43\nDone."),
        ("last_turn", {"separator": "+"}, "Found it. ANSWER: 42 and ANSWER: 43+Done."),
        ("pattern", {"pattern": r"ANSWER: (\d+)"}, "ANSWER: 42"),
        ("pattern", {"pattern": r"ANSWER: (\d+)", "group": 1}, "42"),
        ("pattern", {"pattern": r"ANSWER: (\d+)", "search_all": True}, "42 43"),
        ("pattern", {"pattern": r"(ANSWER): (\d+)", "search_all": True, "group": 1}, "42 43"),
        ("pattern", {"pattern": r"Hello"}, "Hello"),
        ("pattern", {"pattern": r"nomatch"}, ""),
        ("tool_arguments", {"tool_name": "search"}, '{"q": "pandas"}'),
        ("tool_arguments", {"tool_name": "missing"}, "{}"),
        ("tool_output", {"tool_name": "search"}, "pandas are bears"),
        ("tool_output", {"tool_name": "missing"}, ""),
        ("after_marker", {"marker": "ANSWER:"}, "42 and ANSWER: 43"),
        (
            "after_marker",
            {"marker": "ANSWER:", "include_marker": True},
            "ANSWER: 42 and ANSWER: 43",
        ),
        ("after_marker", {"marker": "zzz"}, ""),
        ("memory_block", {"block_label": "human"}, "Name: Ada"),
        ("memory_block", {"block_label": "nope"}, ""),
    ],
)
def test_builtin_extractor(name, config, expected):
    assert ex(name, config)(TRAJ) == expected


def test_empty_trajectory_gives_empty_text():
    assert ex("last_assistant")(Trajectory()) == ""
    assert ex("last_turn")(Trajectory()) == ""


def test_only_memory_block_needs_memory():
    assert ex("memory_block", {"block_label": "x"}).needs_memory is True
    assert ex("last_assistant").needs_memory is False


@pytest.mark.parametrize(
    ("name", "config", "message"),
    [
        ("tool_arguments", {}, "graders.g.extractor_config.tool_name: required key is missing"),
        ("memory_block", {}, "graders.g.extractor_config.block_label: required key is missing"),
        ("pattern", {}, "graders.g.extractor_config.pattern: required key is missing"),
        ("after_marker", {}, "graders.g.extractor_config.marker: required key is missing"),
        (
            "tool_output",
            {"toolname": "x"},
            "graders.g.extractor_config.toolname: unknown key 'toolname' (did you mean 'tool_name'?)",
        ),
        (
            "pattern",
            {"pattern": "(unclosed"},
            "graders.g.extractor_config.pattern: invalid regular expression: missing ), unterminated subpattern at position 0",
        ),
        (
            "last_assistant",
            {"separator": ","},
            "graders.g.extractor_config.separator: unknown key 'separator'",
        ),
    ],
)
def test_extractor_config_is_validated_at_load(name, config, message):
    with pytest.raises(ConfigError) as exc:
        ex(name, config)
    assert str(exc.value) == message


def test_unknown_extractor_names_closest():
    with pytest.raises(ConfigError) as exc:
        ex("last_asistant")
    assert (
        str(exc.value)
        == "graders.g.extractor: unknown extractor 'last_asistant' (did you mean 'last_assistant'?)"
    )


def test_custom_extractor_written_for_letta_evals_works(tmp_path):
    (tmp_path / "ex.py").write_text(
        "from letta_evals.decorators import extractor\n\n"
        "@extractor\n"
        "def tool_names(trajectory, config):\n"
        "    names = []\n"
        "    for turn in trajectory:\n"
        "        for msg in turn:\n"
        "            if msg.message_type == 'tool_call_message':\n"
        "                names.append(msg.tool_call.name)\n"
        "            elif msg.message_type == 'tool_return_message':\n"
        "                names.append('->' + msg.tool_return[:6])\n"
        "    return config.get('sep', ',').join(names)\n"
    )
    letta_evals_shim.install()  # as the suite loader does before any user file (this test runs no suite)
    e = make_extractor("ex.py:tool_names", {"sep": "|"}, tmp_path, key="graders.g")
    assert e(TRAJ) == "search|->pandas|search|->koalas"
