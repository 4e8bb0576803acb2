"""How the Action talks to GitHub's runner: workflow commands on stdout (``::error::``, ``::add-mask::``),
step outputs in ``$GITHUB_OUTPUT``, the step summary in ``$GITHUB_STEP_SUMMARY``. Every value is
escaped as the runner documents, so an output or a message can never become a command.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Mapping
from typing import TextIO

from ci_evals._util.redact import is_secret_name, scrub

STEP_SUMMARY_LIMIT = 1_000_000
"""GitHub rejects a step summary over 1 MiB; we stay below it."""


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_prop(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def command(name: str, message: str = "", out: TextIO | None = None, **props: str) -> None:
    """Print a workflow command (``::error title=..::message``) with GitHub's escaping."""
    stream = out or sys.stdout
    if name != "add-mask":
        message = scrub(message)
    params = ",".join(f"{k}={_escape_prop(scrub(v))}" for k, v in props.items() if v)
    stream.write(f"::{name}{' ' + params if params else ''}::{_escape_data(message)}\n")
    stream.flush()


def secrets_to_mask(env: Mapping[str, str]) -> list[str]:
    """Values to ``::add-mask::``: the token input and every ``*_API_KEY``/``*_TOKEN``-style variable."""
    values = []
    for name, value in env.items():
        if is_secret_name(name) and value:
            values += [line.strip() for line in value.splitlines() if len(line.strip()) >= 4]
    return sorted(set(values))


def set_outputs(path: str | None, outputs: Mapping[str, str]) -> None:
    """Append step outputs to ``$GITHUB_OUTPUT`` in the multi-line-safe heredoc form."""
    if not path:
        return
    with open(path, "a", encoding="utf-8") as f:
        for name, value in outputs.items():
            delim = f"ghadelimiter_{uuid.uuid4().hex}"
            while delim in value:
                delim = f"ghadelimiter_{uuid.uuid4().hex}"
            f.write(f"{name}<<{delim}\n{value}\n{delim}\n")


def append_step_summary(path: str | None, text: str) -> None:
    """Append markdown to ``$GITHUB_STEP_SUMMARY`` (no-op outside GitHub), kept under GitHub's limit."""
    if not path:
        return
    text = scrub(text)
    data = text.encode("utf-8")
    if len(data) > STEP_SUMMARY_LIMIT:
        text = data[: STEP_SUMMARY_LIMIT - 200].decode("utf-8", "ignore")
        text = text[: text.rfind("\n")] + "\n\n… (step summary truncated; see summary.md)\n"
    with open(path, "a", encoding="utf-8") as f:
        f.write(text + "\n")
