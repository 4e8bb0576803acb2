"""GitHub workflow commands switched off around everything ci-evals prints.

On a GitHub runner every line a step prints is scanned for ``::command::``; a model output such as
``::error::...``, ``::add-mask::...`` or ``::stop-commands::...`` printed by ``--dry-run`` or the
console report would be obeyed. Under ``GITHUB_ACTIONS=true`` each command runs inside a
stop-commands window (``::stop-commands::TOKEN`` ... ``::TOKEN::``) with a random token that no
printed text can guess, so every line in between is shown, never obeyed.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import sys
from collections.abc import Iterator

_open = False


@contextlib.contextmanager
def commands_stopped(force: bool = False) -> Iterator[None]:
    """Print ``::stop-commands::TOKEN`` now and ``::TOKEN::`` at the end (also on errors) when on a
    GitHub runner (or ``force``); nested windows reuse the open one."""
    global _open
    if _open or not (force or os.environ.get("GITHUB_ACTIONS") == "true"):
        yield
        return
    token = secrets.token_hex(16)
    sys.stdout.write(f"::stop-commands::{token}\n")
    sys.stdout.flush()
    _open = True
    try:
        yield
    finally:
        _open = False
        sys.stderr.flush()
        sys.stdout.write(f"::{token}::\n")
        sys.stdout.flush()
