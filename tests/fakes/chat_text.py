"""Reading chat requests, shared by the fake LLMs (stdlib only: the Letta server's venv imports it)."""

from __future__ import annotations

import re
from typing import Any


def text_of(content: Any) -> str:
    """A message content (string or list of parts) as plain text."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def last_user(req: dict[str, Any]) -> str:
    """The text of the last user message of a chat request."""
    for m in reversed(req.get("messages") or []):
        if m.get("role") == "user":
            return text_of(m.get("content"))
    return ""


def prompt_text(req: dict[str, Any]) -> str:
    """Every message's text in a chat request, joined by newlines."""
    return "\n".join(text_of(m.get("content")) for m in req.get("messages") or [])


def section(text: str, heading: str) -> str | None:
    """The text under a ``## heading`` line up to the next ``---`` or ``##`` line."""
    m = re.search(
        r"^## " + re.escape(heading) + r"[^\n]*\n(.*?)(?=^---$|^## |\Z)", text, re.M | re.S
    )
    return m.group(1).strip() if m else None
