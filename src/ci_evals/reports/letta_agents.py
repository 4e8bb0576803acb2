"""The agents a run left on a Letta server, for the console and the PR comment.

From summary.json's ``letta`` block: ``leftover_agents`` (the run could not delete them: listed
with the reason and a command that deletes them) and ``kept_agents`` (``cleanup: false``). Ids and
names come from the server, so they are shell-quoted in the command and escaped in markdown.
"""

from __future__ import annotations

import shlex

from ci_evals.reports.text import escape_md, fenced
from ci_evals.results.records import LettaAgent, Summary

MAX_LISTED = 20


def delete_command(base_url: str, ids: list[str]) -> str:
    """One shell line that deletes these agents (the API key, if any, from $LETTA_API_KEY)."""
    quoted = " ".join(shlex.quote(i) for i in ids)
    url = shlex.quote(base_url.rstrip("/") + "/v1/agents/")
    return (
        f'for id in {quoted}; do curl -fsS -X DELETE -H "Authorization: Bearer $LETTA_API_KEY" '
        f'{url}"$id"; done'
    )


def _parts(summary: Summary) -> tuple[list[LettaAgent], list[LettaAgent], str]:
    block = summary.get("letta") or {}
    base = str(block.get("base_url") or "$LETTA_BASE_URL")
    return list(block.get("leftover_agents") or []), list(block.get("kept_agents") or []), base


def _unanswered(summary: Summary) -> tuple[int, list[str]]:
    """How many agent imports (or ``agent_script`` factories) were cut off unanswered, and their
    distinct names (at most :data:`MAX_LISTED`)."""
    names = [str(n) for n in (summary.get("letta") or {}).get("unanswered_imports") or []]
    return len(names), sorted(set(names))[:MAX_LISTED]


def _unanswered_line(n: int, base: str) -> str:
    return (
        f"{n} agent import(s) or agent_script call(s) on {base} had not answered when their "
        "sample was cut off (Ctrl-C, a time limit): the server may hold agents that this run "
        "could not delete, ids unknown"
    )


def _more(n: int) -> list[str]:
    return (
        [f"  … and {n - MAX_LISTED} more (all in summary.json, key letta)"]
        if n > MAX_LISTED
        else []
    )


def console_lines(summary: Summary) -> list[str]:
    """Plain lines for the terminal; empty when the run left nothing on a Letta server."""
    left, kept, base = _parts(summary)
    lines = []
    if left:
        lines.append(
            f"Letta: {len(left)} agent(s) the run created could not be deleted; still on {base}:"
        )
        lines += [
            f"  {a.get('id')} ({a.get('name') or 'unnamed'}): {a.get('error')}"
            for a in left[:MAX_LISTED]
        ]
        lines += _more(len(left))
        lines.append("  delete them: " + delete_command(base, [str(a.get("id")) for a in left]))
    if kept:
        lines.append(f"Letta: {len(kept)} agent(s) kept on {base} (cleanup: false):")
        lines += [f"  {a.get('id')} ({a.get('name') or 'unnamed'})" for a in kept[:MAX_LISTED]]
        lines += _more(len(kept))
    n, names = _unanswered(summary)
    if n:
        lines.append(f"Letta: {_unanswered_line(n, base)}: {', '.join(m[:80] for m in names)}")
    return lines


def comment_lines(summary: Summary) -> list[str]:
    """Markdown for the PR comment; empty when the run left nothing on a Letta server."""
    left, kept, base = _parts(summary)
    lines: list[str] = []
    if left:
        lines += [
            f"⚠️ **{len(left)} Letta agent(s) could not be deleted** and are still on "
            f"{escape_md(base)}:",
            "",
        ]
        lines += [
            f"- {escape_md(a.get('id'))} ({escape_md(a.get('name') or 'unnamed')}): "
            f"{escape_md(a.get('error'), 200)}"
            for a in left[:MAX_LISTED]
        ]
        lines += _more(len(left))
        lines += [
            "",
            "Delete them with:",
            "",
            fenced(delete_command(base, [str(a.get("id")) for a in left]), lang="sh"),
            "",
        ]
    if kept:
        lines += [
            f"{len(kept)} Letta agent(s) kept (`cleanup: false`): "
            + ", ".join(escape_md(a.get("id")) for a in kept[:MAX_LISTED])
            + (f" and {len(kept) - MAX_LISTED} more" if len(kept) > MAX_LISTED else ""),
            "",
        ]
    n, names = _unanswered(summary)
    if n:
        lines += [
            f"⚠️ {escape_md(_unanswered_line(n, base))}: "
            + ", ".join(escape_md(name, 80) for name in names),
            "",
        ]
    return lines
