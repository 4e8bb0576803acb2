"""Letta messages into ci-evals' normalized trajectory: one turn per message sent, tool calls and
their returns paired, usage and steps read; and the stop reasons that mean the server failed.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterable
from typing import Any

from ci_evals._util.errors import SampleError
from ci_evals.core.trajectory import Message, ToolCall, Usage, content_text

# Stop reasons that mean the server or its model failed, not that the agent chose to stop.
FAILED_STOPS = {
    "error",
    "llm_api_error",
    "invalid_llm_response",
    "insufficient_credits",
    "cancelled",
    "context_window_overflow_in_system_prompt",
}
MAX_STEPS_STOP = "max_steps"
"""The stop reason of an agent loop the request's ``max_steps`` ended (not a failure of itself:
a sample's ``max_steps`` budget makes it one)."""


# -- Letta messages -> normalized messages -----------------------------------------------------


def calls_of(msg: dict[str, Any]) -> list[ToolCall]:
    """The tool calls of a tool_call/approval_request message (``tool_calls`` list, else ``tool_call``)."""
    raw = msg.get("tool_calls")
    if isinstance(raw, dict):
        raw = [raw]
    if not raw:
        raw = [msg["tool_call"]] if isinstance(msg.get("tool_call"), dict) else []
    out = []
    for i, c in enumerate(raw):
        if not isinstance(c, dict) or not c.get("name"):
            continue
        args = c.get("arguments")
        args = args if isinstance(args, str) else json.dumps(args or {})
        out.append(
            ToolCall(
                id=str(c.get("tool_call_id") or f"{msg.get('id', 'call')}_{i}"),
                name=str(c["name"]),
                arguments=args,
            )
        )
    return out


def to_turn(messages: list[dict[str, Any]], sent: str | None = None) -> list[Message]:
    """Map one response's Letta messages to a turn.

    ``sent`` (the user text) opens the turn; the server's echo of it is skipped. A tool call joins
    the assistant message of the same step, else starts an assistant message with empty content;
    a tool return becomes ``role=tool`` with the call's id and name.
    """
    turn: list[Message] = [Message(role="user", content=sent)] if sent is not None else []
    names: dict[str, str] = {}
    holder: tuple[Message, Any] | None = None  # the assistant message tool calls may attach to
    echo_pending = sent is not None
    for msg in messages:
        kind = msg.get("message_type")
        if kind == "user_message":
            text = content_text(msg.get("content"))
            if echo_pending and text == sent:
                echo_pending = False
                continue
            turn.append(Message(role="user", content=text))
            holder = None
        elif kind == "system_message":
            turn.append(Message(role="system", content=content_text(msg.get("content"))))
            holder = None
        elif kind in ("reasoning_message", "hidden_reasoning_message"):
            thought = (
                msg.get("reasoning") if kind == "reasoning_message" else msg.get("hidden_reasoning")
            )
            turn.append(Message(role="reasoning", content=thought or ""))
        elif kind == "assistant_message":
            m = Message(role="assistant", content=content_text(msg.get("content")))
            turn.append(m)
            holder = (m, msg.get("step_id"))
        elif kind in ("tool_call_message", "approval_request_message"):
            calls = calls_of(msg)
            for c in calls:
                names[c.id] = c.name
            step = msg.get("step_id")
            if holder is not None and step is not None and holder[1] == step:
                holder[0].tool_calls.extend(calls)
            elif calls:
                m = Message(role="assistant", content="", tool_calls=calls)
                turn.append(m)
                holder = (m, step)
        elif kind == "tool_return_message":
            returns = msg.get("tool_returns") or []
            if len(returns) <= 1:
                returns = [msg]
            for r in returns:
                cid = r.get("tool_call_id")
                turn.append(
                    Message(
                        role="tool",
                        content=content_text(r.get("tool_return")),
                        tool_call_id=cid,
                        name=names.get(cid),
                    )
                )
            holder = None
        # approval responses, summaries and events carry nothing to grade
    return turn


def dump(messages: list[Any]) -> list[dict[str, Any]]:
    """letta-client message models as plain dicts."""
    return [m if isinstance(m, dict) else m.model_dump(mode="json") for m in messages]


def add_usage(total: Usage, usage: Any) -> None:
    """Add a LettaResponse's usage (None-safe) to ``total``."""
    counts = tokens_of(usage)
    total.add(counts["prompt_tokens"], counts["completion_tokens"])


def tokens_of(usage: Any) -> dict[str, int]:
    """A LettaResponse's usage statistics as ``{prompt_tokens, completion_tokens}``: a missing or
    malformed count (None, negative, not a whole number) is 0."""
    return {
        "prompt_tokens": _count(getattr(usage, "prompt_tokens", None)) or 0,
        "completion_tokens": _count(getattr(usage, "completion_tokens", None)) or 0,
    }


def step_count(usage: Any) -> int | None:
    """The agent steps a LettaResponse took (its usage's ``step_count``), None when not said."""
    return _count(getattr(usage, "step_count", None))


def _count(value: Any) -> int | None:
    return value if type(value) is int and value >= 0 else None


# -- the target ----------------------------------------------------------------------------------


MAX_MEMORY_BLOCKS = 1_000
"""Memory blocks of one agent read at most (an agent has a handful)."""


async def memory_blocks(client: Any, agent_id: str) -> dict[str, Any]:
    """The agent's memory blocks by label, as the server lists them, at most
    :data:`MAX_MEMORY_BLOCKS` (:func:`listed`)."""
    blocks = await listed(
        client.agents.blocks.list(agent_id), MAX_MEMORY_BLOCKS, "memory blocks for one agent"
    )
    return {b.label: b.value for b in blocks if b.label is not None}


async def listed(pages: AsyncIterable[Any], limit: int, what: str) -> list[Any]:
    """Every item a Letta list call pages through, at most ``limit``: past it a SampleError naming
    ``what`` (a server paging on for ever fails the sample, not the memory)."""
    out: list[Any] = []
    async for item in pages:
        out.append(item)
        if len(out) > limit:
            raise SampleError(f"the Letta server listed over {limit:,} {what}")
    return out
