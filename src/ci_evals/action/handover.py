"""Keep the GitHub token away from user code: re-execute without it, receive it through a pipe.

GitHub hands the token to a Docker action as ``INPUT_GITHUB-TOKEN`` in the environment. A process
cannot take a variable back out of ``/proc/<pid>/environ`` (``os.environ.pop`` changes only its
own copy), and every program ci-evals starts (command targets, python graders, their children)
could read that file of its parent. So the action reads the token, writes it into a pipe, and
replaces itself (``execve``) with a copy whose environment has no token: neither the inputs, nor
any variable whose value *contains* it in any of its :func:`token_forms` (an ``Authorization:
bearer <token>`` header, a ``https://x-access-token:<token>@github.com`` URL, actions/checkout's
``AUTHORIZATION: basic <base64 of x-access-token:<token>>``), nor the runner's ``ACTIONS_*_TOKEN``
credentials. ``execve`` gives the process a new ``/proc/<pid>/environ`` (unlike ``os.environ.pop``
or ``unsetenv``, which leave the kernel's copy as it was), so no child can read the token from its
parent's environ file; the re-executed process is also made non-dumpable. The new
process reads the token from the inherited pipe at once and closes it, then marks itself
non-dumpable, so other processes of the same user cannot read its memory or open its files
through ``/proc`` (root with ``CAP_SYS_PTRACE`` still can; Docker does not grant it by default).

What this does not do: code that runs *inside* the ci-evals process (custom graders, extractors,
setup scripts) shares its memory and can find the token there. See the Security section of docs/reference.md.
"""

from __future__ import annotations

import binascii
import os
import sys
from collections.abc import Mapping, MutableMapping
from urllib.parse import quote

from ci_evals._util.redact import encoded_forms

TOKEN_FD = "CI_EVALS_TOKEN_FD"
TOKEN_INPUTS = ("INPUT_GITHUB-TOKEN", "INPUT_GITHUB_TOKEN")
PR_SET_DUMPABLE = 4
MIN_CONTAINED = 8
"""A shorter token (only ever a test's) hides only variables equal to it, not every value holding it."""


class HandoverError(Exception):
    """The token could not be handed over safely (the action stops: exit 3)."""


def token_forms(token: str) -> list[str]:
    """The token as it may sit inside another variable's value: itself, URL-quoted, hex, and the
    base64 runs that any encoded text holding it contains (:func:`ci_evals._util.redact.encoded_forms`:
    ``x-access-token:<token>``, ``<token>:x-oauth-basic``, ``user:<token>``)."""
    hexed = binascii.hexlify(token.encode("utf-8")).decode()
    forms = {token, quote(token, safe=""), hexed, hexed.upper(), *encoded_forms(token)}
    return sorted(f for f in forms if f)


def hidden_names(env: Mapping[str, str]) -> list[str]:
    """The variables user code must not see: the token inputs, any variable holding the token in
    any of its :func:`token_forms`, and the runner's tokens."""
    token = next((env[n].strip() for n in TOKEN_INPUTS if (env.get(n) or "").strip()), None)
    forms = token_forms(token) if token is not None and len(token) >= MIN_CONTAINED else []
    return sorted(
        name
        for name, value in env.items()
        if name in TOKEN_INPUTS
        or (token is not None and value.strip() == token)
        or any(form in value for form in forms)
        or (name.startswith("ACTIONS_") and name.endswith("_TOKEN"))
    )


def reexec_without_token(env: Mapping[str, str], argv: list[str]) -> None:
    """Replace this process with ``argv`` run without the hidden variables; return if none are set.

    The token (when there is one) waits in a pipe whose read end the new process inherits; its
    number is in ``CI_EVALS_TOKEN_FD``.
    """
    names = hidden_names(env)
    if not names:
        return
    token = next((env[n].strip() for n in TOKEN_INPUTS if (env.get(n) or "").strip()), "")
    new_env = {k: v for k, v in env.items() if k not in names and k != TOKEN_FD}
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, token.encode("utf-8"))  # far below the pipe's buffer: never blocks
    finally:
        os.close(write_end)
    os.set_inheritable(read_end, True)
    new_env[TOKEN_FD] = str(read_end)
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execve(argv[0], argv, new_env)
    except OSError as exc:
        os.close(read_end)
        raise HandoverError(
            f"could not restart without the token in the environment: {exc}"
        ) from None


def take_token(env: MutableMapping[str, str]) -> str | None:
    """The token handed over by :func:`reexec_without_token` (None when there was none); the pipe
    is closed and the variable removed, so nothing started later inherits either."""
    raw = env.pop(TOKEN_FD, None)
    if raw is None:
        return None
    if not raw.isascii() or not raw.isdigit():
        raise HandoverError(f"{TOKEN_FD} must be a file descriptor number, got {raw!r}")
    fd = int(raw)
    chunks = []
    try:
        while chunk := os.read(fd, 4096):
            chunks.append(chunk)
    except OSError as exc:
        raise HandoverError(f"could not read the token from its pipe: {exc}") from None
    finally:
        try:
            os.close(fd)
        except OSError:
            pass
    token = b"".join(chunks).decode("utf-8", "replace").strip()
    return token or None


def make_undumpable() -> bool:
    """``prctl(PR_SET_DUMPABLE, 0)`` on Linux: /proc/<pid>/mem, environ and fd of this process
    become unreadable to other processes of the same user. False where it is not available.

    A process with ``CAP_SYS_PTRACE``, ``CAP_SYS_ADMIN`` or ``CAP_PERFMON`` (root outside a
    container, measured on Linux 6.18) still reads them; Docker grants none of the three by
    default. ``python`` grader workers drop every capability (ci_evals.graders.python_grader).
    What this cannot hide: the environment of the processes *above* ci-evals (the CI step's
    shell), readable by any program of the same user."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False
