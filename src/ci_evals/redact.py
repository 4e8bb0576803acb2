"""Secrets out of every message: one scrub of the whole text, then (and only then) truncation.

Known secrets are the values of environment variables named like secrets (``*_API_KEY``,
``*_TOKEN``, ``*_SECRET``, ``*_PASSWORD``, ``*_ACCESS_KEY``, ``*_PRIVATE_KEY``, ``*_SECRET_KEY``,
``*_PAT``, the action's token input)
plus every value a component registers (an http target's header from the environment, a Letta
``api_key`` from the suite, the GitHub token read from its pipe). Shapes that are secrets wherever
they appear are masked too: OpenAI-style and GitHub keys, ``Bearer``/``Basic`` credentials,
``Authorization``-style header values and the password of a URL.

Scrubbing comes first because a cut can split a secret: the half that survives the cut no longer
matches, and would leak.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

MASK = "***"
MESSAGE_LIMIT = 600
"""Characters of foreign text (a server's reply, a program's stderr) kept in one error message."""
MIN_SECRET = 6
"""Shorter values (``1``, ``true``) are not masked: they would shred ordinary text."""
SECRET_SUFFIXES = ("_API_KEY", "_TOKEN", "_SECRET", "_PASSWORD", "_ACCESS_KEY", "_PRIVATE_KEY", "_SECRET_KEY", "_PAT")
TOKEN_INPUTS = ("INPUT_GITHUB-TOKEN", "INPUT_GITHUB_TOKEN")

# (pattern, replacement, substrings one of which the lower-cased text must hold for it to match)
_PATTERNS = [
    (re.compile(r"\bsk-[A-Za-z0-9_\-]{8,}"), "sk-" + MASK, ("sk-",)),
    (re.compile(r"\b(gh[pousr]_|github_pat_)[A-Za-z0-9_]{8,}"), r"\1" + MASK,
     ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_")),
    # A credential after a scheme or a header name; it must hold a digit, so prose stays intact.
    (re.compile(r"(?i)\b(bearer|basic)(\s+)(?=[A-Za-z._~+/=\-]*\d)[A-Za-z0-9._~+/=\-]{8,}"), r"\1\2" + MASK,
     ("bearer", "basic")),
    (re.compile(r"(?i)((?:proxy-)?authorization|x-api-key|api[-_]?key|private-token)"
                r"([\"']?\s*[:=]\s*[\"']?)(?:(?:bearer|basic|token)\s+)?(?=[^\s\"',;}\\]*\d)[^\s\"',;}\\]{4,}"),
     r"\1\2" + MASK, ("authorization", "api-key", "api_key", "apikey", "private-token")),
    (re.compile(r"(://[^/\s:@\"\\]*):[^/\s@\"\\]+@"), r"\1:" + MASK + "@", ("@",)),
]
_registered: set[str] = set()
generation = 0
"""Bumped by every :func:`register` that adds a value: a cached :func:`known_secrets` is stale."""


def is_secret_name(name: str) -> bool:
    """True for environment variable names that hold secrets by convention."""
    upper = name.upper()
    return upper.endswith(SECRET_SUFFIXES) or upper in TOKEN_INPUTS


def env_secrets(env: Mapping[str, str] | None = None) -> set[str]:
    """The values (and each of their lines) of secret-named variables in ``env``."""
    found: set[str] = set()
    for name, value in (os.environ if env is None else env).items():
        if value and is_secret_name(name):
            found.add(value.strip())
            found.update(line.strip() for line in value.splitlines())
    return {s for s in found if len(s) >= MIN_SECRET}


def register(*values: str | None) -> None:
    """Values to mask from now on in every scrubbed text (keys from a suite, tokens from a pipe)."""
    global generation
    for value in values:
        if value and len(value.strip()) >= MIN_SECRET and value.strip() not in _registered:
            _registered.add(value.strip())
            generation += 1


def known_secrets() -> list[str]:
    """Every secret to mask, longest first (a key containing another is masked whole)."""
    return sorted(_registered | env_secrets(), key=len, reverse=True)


def scrub(text: str, extra: Iterable[str | None] = ()) -> str:
    """``text`` with every known secret, every ``extra`` value and every secret-shaped string masked."""
    if not text:
        return text
    for secret in sorted({e for e in extra if e and len(e) >= MIN_SECRET}, key=len, reverse=True):
        text = text.replace(secret, MASK)
    return scrub_with(text, known_secrets())


def scrub_with(text: str, secrets: list[str]) -> str:
    """``text`` with each of ``secrets`` (longest first, from :func:`known_secrets`) and every
    secret-shaped string masked: for scrubbing many strings against one list."""
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, MASK)
    low = text.lower()
    for pattern, repl, triggers in _PATTERNS:
        for trigger in triggers:  # a plain loop: this runs for every result line
            if trigger in low:
                text = pattern.sub(repl, text)
                break
    return text


def clip(text: str, limit: int, extra: Iterable[str | None] = (), *, tail: bool = False) -> str:
    """The one way to put foreign text into a message: scrub the whole text, then cut it.

    One line, at most ``limit`` characters plus an ellipsis; ``tail`` keeps the end instead of the
    start (the end of a response body usually holds the error).
    """
    text = " ".join(scrub(str(text), extra).split())
    if len(text) <= limit:
        return text
    return "…" + text[-limit:] if tail else text[:limit] + "…"


def scrub_tree(value, secrets: list[str] | None = None):
    """``value`` (JSON-like: dicts, lists, strings) with every string scrubbed, keys included.

    ``secrets`` (from :func:`known_secrets`) can be passed in when scrubbing many records.
    """
    if secrets is None:
        secrets = known_secrets()
    if isinstance(value, str):
        return scrub_with(value, secrets) if value else value
    if isinstance(value, dict):
        return {(scrub_with(k, secrets) if isinstance(k, str) else k): scrub_tree(v, secrets)
                for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [scrub_tree(v, secrets) for v in value]
    return value
