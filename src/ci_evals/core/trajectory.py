"""The one normalized trajectory every target produces and every extractor reads.

A trajectory is a list of turns (one per user input); a turn is a list of messages. Roles:
``user``, ``assistant``, ``tool``, ``reasoning``, ``system``. An assistant message may carry tool
calls ``{id, name, arguments}`` (arguments as a JSON string, as the OpenAI and Letta APIs send
them); a ``tool`` message is a tool result ``{tool_call_id, name, content}``. ``memory_blocks``
maps a Letta memory block's label to its value at the end of the run; ``usage`` counts tokens.

Two input shapes are accepted by :func:`messages_from_dicts`: this normalized shape and the OpenAI
chat-completions shape (``tool_calls: [{id, type: function, function: {name, arguments}}]``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from typing_extensions import TypedDict

ROLES = ("user", "assistant", "tool", "reasoning", "system")
_LETTA_TYPES = {
    "user": "user_message",
    "assistant": "assistant_message",
    "tool": "tool_return_message",
    "reasoning": "reasoning_message",
    "system": "system_message",
}


@dataclass(slots=True)
class ToolCall:
    id: str
    name: str
    arguments: str = "{}"

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}

    def to_openai(self) -> dict[str, Any]:
        """The chat-completions shape, as ``{{ sample.output_tools }}`` exposes it."""
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


class MessageDict(TypedDict, total=False):
    """A message as a results line stores it (``results.records.Message`` is this shape, validated)."""

    role: str
    content: Any
    tool_calls: list[dict[str, Any]] | None
    tool_call_id: str | None
    name: str | None


@dataclass(slots=True)
class Message:
    role: str
    content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None

    @property
    def message_type(self) -> str:
        """The letta-client name of this message's type, so letta-evals extractors keep working."""
        if self.role == "assistant" and self.tool_calls and not self.content:
            return "tool_call_message"
        return _LETTA_TYPES[self.role]

    @property
    def tool_call(self) -> ToolCall | None:
        """The first tool call (letta-client's ``tool_call_message.tool_call``)."""
        return self.tool_calls[0] if self.tool_calls else None

    @property
    def tool_return(self) -> str | None:
        """A tool result's text (letta-client's ``tool_return_message.tool_return``)."""
        return self.content if self.role == "tool" else None

    def to_dict(self) -> MessageDict:
        d: MessageDict = {"role": self.role, "content": self.content}
        if self.tool_calls:
            d["tool_calls"] = [t.to_dict() for t in self.tool_calls]
        if self.tool_call_id is not None:
            d["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            d["name"] = self.name
        return d


@dataclass(slots=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def add(self, prompt: int | None, completion: int | None) -> None:
        self.prompt_tokens += prompt or 0
        self.completion_tokens += completion or 0

    def to_dict(self) -> dict[str, int]:
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens}


@dataclass(slots=True)
class Trajectory:
    turns: list[list[Message]] = field(default_factory=list)
    memory_blocks: dict[str, str] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)
    # Target-specific facts worth keeping in results (agent id, model handle, latency...).
    metadata: dict[str, Any] = field(default_factory=dict)

    def messages(self):
        """Every message in order, across turns."""
        for turn in self.turns:
            yield from turn

    def assistant_texts(self) -> list[str]:
        return [m.content for m in self.messages() if m.role == "assistant" and m.content]

    def tool_calls(self) -> list[ToolCall]:
        return [t for m in self.messages() if m.role == "assistant" for t in m.tool_calls]

    def to_dict(self) -> dict[str, Any]:
        return {
            "turns": [[m.to_dict() for m in turn] for turn in self.turns],
            "memory_blocks": dict(self.memory_blocks),
            "usage": self.usage.to_dict(),
        }

    @classmethod
    def from_text(cls, text: str) -> Trajectory:
        """A one-turn trajectory holding a single assistant message."""
        return cls(turns=[[Message(role="assistant", content=text)]])


def content_text(content: Any) -> str:
    """Flatten a message's content: a string, or a list of text parts joined by one space."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and "text" in part:
                parts.append(str(part["text"]))
        return " ".join(parts)
    return str(content)


def _tool_call(raw: dict[str, Any], index: int) -> ToolCall:
    fn = raw.get("function") if isinstance(raw.get("function"), dict) else None
    name = (fn or raw).get("name")
    args = (fn or raw).get("arguments", "{}")
    if not isinstance(name, str):
        raise ValueError(f"tool call {index} has no 'name'")
    if not isinstance(args, str):
        args = json.dumps(args)
    return ToolCall(id=str(raw.get("id") or f"call_{index}"), name=name, arguments=args)


def message_from_dict(raw: dict[str, Any]) -> Message:
    """One message from the normalized or the OpenAI chat-completions shape."""
    if not isinstance(raw, dict):
        raise ValueError(f"a message must be an object, got {type(raw).__name__}")
    role = raw.get("role")
    if role not in ROLES:
        raise ValueError(f"message role must be one of {', '.join(ROLES)}; got {role!r}")
    calls = raw.get("tool_calls") or []
    if not isinstance(calls, list):
        raise ValueError("'tool_calls' must be a list")
    return Message(
        role=role,
        content=content_text(raw.get("content")),
        tool_calls=[_tool_call(c, i) for i, c in enumerate(calls)],
        tool_call_id=raw.get("tool_call_id"),
        name=raw.get("name"),
    )


def trajectory_from_record(record: dict[str, Any]) -> Trajectory:
    """A trajectory from ``{output}`` or ``{messages}`` (+ optional ``memory_blocks``, ``usage``).

    ``messages`` is a flat list (one turn) or a list of lists (one list per turn).
    """
    if "messages" in record:
        msgs = record["messages"]
        if not isinstance(msgs, list):
            raise ValueError("'messages' must be a list")
        if msgs and all(isinstance(t, list) for t in msgs):
            turns = [[message_from_dict(m) for m in turn] for turn in msgs]
        else:
            turns = [[message_from_dict(m) for m in msgs]]
        traj = Trajectory(turns=turns)
    elif "output" in record:
        out = record["output"]
        traj = Trajectory.from_text(out if isinstance(out, str) else json.dumps(out))
    else:
        raise ValueError("expected 'output' (a string) or 'messages' (a list)")
    blocks = record.get("memory_blocks")
    if blocks is not None:
        if not isinstance(blocks, dict):
            raise ValueError("'memory_blocks' must be an object of label -> value")
        traj.memory_blocks = {str(k): str(v) for k, v in blocks.items()}
    usage = record.get("usage")
    if isinstance(usage, dict):
        traj.usage.add(usage.get("prompt_tokens"), usage.get("completion_tokens"))
    return traj
