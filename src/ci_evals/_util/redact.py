"""Secrets out of every message: one scrub of the whole text, then (and only then) truncation.

Known secrets are the values of environment variables named like secrets (``*_API_KEY``,
``*_TOKEN``, ``*_SECRET``, ``*_PASSWORD``, ``*_ACCESS_KEY``, ``*_PRIVATE_KEY``, ``*_SECRET_KEY``,
``*_PAT``, the action's token input)
plus every value a component registers (an http target's header from the environment, a Letta
``api_key`` from the suite, the GitHub token read from its pipe). Shapes that are secrets wherever
they appear are masked too: OpenAI-style and GitHub keys, ``Bearer``/``Basic`` credentials,
``Authorization``-style header values, the password of a URL, and a key as a vendor's error
shows it masked (``sk-proj-****...j1Aa``: its visible ends are pieces of the key).

Scrubbing comes first because a cut can split a secret: the half that survives the cut no longer
matches, and would leak.

A secret can also reach a text in pieces: split over two lines, wrapped by an encoder at 76
characters, broken by a ``\\n`` escape. So every run of :data:`PIECE` or more characters of a
secret is masked too, wherever it stands; and a secret's base64 forms (standard and URL-safe, at
each of the three alignments it can have inside a longer encoded text: :func:`encoded_forms`) and
its hex forms (lower and upper case: :func:`hex_forms`) are secrets of their own. The search stays cheap: only the text's whitespace-free words of 16 or more
characters are looked at (prose has few), for the aligned 8-character blocks of each secret
(every 16-character piece holds one); only a hit is extended both ways. A piece that spans
whitespace inside a secret (a passphrase) is not looked for.
"""

from __future__ import annotations

import base64
import functools
import io
import os
import re
from collections.abc import Iterable, Mapping
from typing import NamedTuple, TextIO, final

MASK = "***"
MESSAGE_LIMIT = 600
"""Characters of foreign text (a server's reply, a program's stderr) kept in one error message."""
MIN_SECRET = 6
"""Shorter values (``1``, ``true``) are not masked: they would shred ordinary text."""
PIECE = 16
"""A run of this many characters of a secret is masked on its own (a secret split in halves)."""
_BLOCK = PIECE // 2
SECRET_SUFFIXES = (
    "_API_KEY",
    "_TOKEN",
    "_SECRET",
    "_PASSWORD",
    "_ACCESS_KEY",
    "_PRIVATE_KEY",
    "_SECRET_KEY",
    "_PAT",
)
TOKEN_INPUTS = ("INPUT_GITHUB-TOKEN", "INPUT_GITHUB_TOKEN")

# (pattern, replacement, substrings one of which the lower-cased text must hold for it to match).
# A (gate, substrings) entry stands for the substrings, each of which holds the gate: one search for
# the gate spares the others in the usual text, where it is absent (each search scans the whole line;
# a one-character gate is found by memchr, at about a tenth of the cost of a longer search).


@final
class _Gate(NamedTuple):
    """A (gate, substrings) trigger (final: ``type(t) is _Gate`` tells it from a plain substring)."""

    gate: str
    held: tuple[str, ...]


_PATTERNS: list[tuple[re.Pattern[str], str, tuple[str | _Gate, ...]]] = [
    (re.compile(r"\bsk-[A-Za-z0-9_\-]{8,}"), "sk-" + MASK, (_Gate("-", ("sk-",)),)),
    (
        re.compile(r"\b(gh[pousr]_|github_pat_)[A-Za-z0-9_]{8,}"),
        r"\1" + MASK,
        (_Gate("gh", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_")),),
    ),
    # A credential after a scheme or a header name; it must hold a digit, so prose stays intact.
    (
        re.compile(r"(?i)\b(bearer|basic)(\s+)(?=[A-Za-z._~+/=\-]*\d)[A-Za-z0-9._~+/=\-]{8,}"),
        r"\1\2" + MASK,
        ("bearer", "basic"),
    ),
    (
        re.compile(
            r"(?i)((?:proxy-)?authorization|x-api-key|api[-_]?key|private-token)"
            r"([\"']?\s*[:=]\s*[\"']?)(?:(?:bearer|basic|token)\s+)?(?=[^\s\"',;}\\]*\d)[^\s\"',;}\\]{4,}"
        ),
        r"\1\2" + MASK,
        (
            "authorization",
            _Gate("-", ("private-token",)),
            _Gate("api", ("api-key", "api_key", "apikey")),
        ),
    ),
    (re.compile(r"(://[^/\s:@\"\\]*):[^/\s@\"\\]+@"), r"\1:" + MASK + "@", ("@",)),
    # A key as a vendor shows it masked (OpenAI's 401: "sk-proj-*****...****j1Aa"): its visible ends
    # are pieces of the key. Six asterisks or more, joined to a word on either side; a match starts
    # only where a word or a run of asterisks starts, so no text makes it backtrack quadratically.
    (
        re.compile(
            r"(?<![A-Za-z0-9_\-])[A-Za-z0-9_\-]+\*{6,}[A-Za-z0-9_\-]*|(?<![*A-Za-z0-9_\-])\*{6,}[A-Za-z0-9_\-]+"
        ),
        MASK,
        (_Gate("*", ("******",)),),
    ),
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


@functools.lru_cache(maxsize=512)
def encoded_forms(secret: str) -> tuple[str, ...]:
    """Runs of characters that base64 of any text holding ``secret`` contains (standard and URL-safe).

    Base64 encodes 3 bytes as 4 characters, so the secret's encoding depends on where it falls in
    the groups: one run per alignment, without the characters it shares with its neighbours.
    """
    raw = secret.encode("utf-8")
    forms = set()
    for shift in range(3):
        enc = base64.b64encode(b"\0" * shift + raw).decode()
        run = enc[(shift * 4 + 2) // 3 : (len(raw) + shift) // 3 * 4]
        if len(run) >= 8:
            forms.update({run, run.replace("+", "-").replace("/", "_")})
    return tuple(sorted(forms))


@functools.lru_cache(maxsize=512)
def hex_forms(secret: str) -> tuple[str, str]:
    """``secret``'s UTF-8 bytes in hex, lower and upper case (a server or a tool that echoes a key
    as hex: twice its length, so even a short secret's form is long enough to mask safely)."""
    hexed = secret.encode("utf-8").hex()
    return hexed, hexed.upper()


def known_secrets() -> list[str]:
    """Every secret to mask, and its base64 and hex forms, longest first (a key containing another is
    masked whole)."""
    found = _registered | env_secrets()
    forms = found.union(
        *(encoded_forms(s) for s in found if len(s) >= PIECE), *(hex_forms(s) for s in found)
    )
    return sorted(forms, key=len, reverse=True)


@functools.lru_cache(maxsize=64)
def _blocks(secrets: tuple[str, ...]) -> dict[str, tuple[tuple[str, int], ...]]:
    """``{block: ((secret, offset), ...)}``: the aligned 8-character blocks of every secret long
    enough to have pieces (every 16-character piece of a secret holds one of them)."""
    blocks: dict[str, list[tuple[str, int]]] = {}
    for secret in secrets:
        if len(secret) >= PIECE:
            for k in range(0, len(secret) - _BLOCK + 1, _BLOCK):
                blocks.setdefault(secret[k : k + _BLOCK], []).append((secret, k))
    return {b: tuple(v) for b, v in blocks.items()}


def _mask_pieces(text: str, secrets: list[str]) -> str:
    """``text`` with every run of PIECE or more characters of a secret masked.

    A piece (of a secret without whitespace) lies inside one of the text's whitespace-free words
    of PIECE+ characters; prose and our JSON have few, so the blocks are looked for in those alone.
    """
    blocks = _blocks(tuple(secrets))
    if not blocks:
        return text
    long_words = "\n".join(w for w in text.split() if len(w) >= PIECE)
    hits = (
        [(block, owners) for block, owners in blocks.items() if block in long_words]
        if long_words
        else None
    )
    if not hits:
        return text
    spans = []
    for block, owners in hits:
        at = text.find(block)
        while at != -1:
            for secret, k in owners:
                a, b = at, at + _BLOCK
                while a > 0 and k - (at - a) > 0 and text[a - 1] == secret[k - (at - a) - 1]:
                    a -= 1
                while (
                    b < len(text) and k + (b - at) < len(secret) and text[b] == secret[k + (b - at)]
                ):
                    b += 1
                if b - a >= PIECE:
                    spans.append((a, b))
            at = text.find(block, at + 1)
    if not spans:
        return text
    out, pos = [], 0
    for a, b in sorted(spans):
        if b <= pos:
            continue
        out.append(text[pos : max(a, pos)])
        if a >= pos:
            out.append(MASK)
        pos = b
    return "".join(out) + text[pos:]


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
    if secrets:
        text = _mask_pieces(text, secrets)
    low = text.lower()
    for pattern, repl, triggers in _PATTERNS:
        for trigger in triggers:  # plain loops, no generator: this runs for every result line
            if type(trigger) is _Gate:
                gate, held = trigger
                if gate not in low:
                    continue
                for t in held:
                    if t in low:
                        break
                else:
                    continue
            elif trigger not in low:
                continue
            text = pattern.sub(repl, text)
            break
    return text


def scrub_and_shorten(
    text: str, limit: int, extra: Iterable[str | None] = (), *, tail: bool = False
) -> str:
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
        return {
            (scrub_with(k, secrets) if isinstance(k, str) else k): scrub_tree(v, secrets)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [scrub_tree(v, secrets) for v in value]
    return value


class ScrubbedStream(io.TextIOBase):
    """A text stream (``sys.stderr``) that scrubs what passes through it, a line at a time.

    Python prints some things itself: the traceback of an exception nobody caught, a thread's
    uncaught exception, asyncio's "Task exception was never retrieved", a warning. Each can
    quote a secret (a user's ``raise KeyboardInterrupt(key)``). Whole lines are scrubbed before they
    are written; a partial line waits for its end, or for :meth:`flush` (a progress bar's redraw).
    """

    def __init__(self, target: TextIO) -> None:
        self.target = target
        self._pending = ""

    def write(self, text: str) -> int:
        data = self._pending + text
        cut = data.rfind("\n") + 1
        self._pending = data[cut:]
        if cut:
            self.target.write(scrub(data[:cut]))
        return len(text)

    def flush(self) -> None:
        if self._pending:
            self.target.write(scrub(self._pending))
            self._pending = ""
        self.target.flush()

    def isatty(self) -> bool:
        return self.target.isatty()

    def fileno(self) -> int:
        return self.target.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self.target.encoding
