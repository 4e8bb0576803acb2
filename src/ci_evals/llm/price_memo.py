"""The price list's answers, kept on disk for the rest of the day: a run that prices only models
priced here before today does not import genai-prices (0.25-0.3 s of CPU at every start).

One small JSON file per day and price list, in this user's cache folder
(:func:`ci_evals._util.usercache.own_cache_dir`: never one others may write to, since a price
decides a cost gate): ``prices/<list>-<YYYY-MM-DD>.json``, where ``<list>`` fingerprints the
installed genai-prices (its data file's size and mtime: a reinstall or an upgrade is a new file).
It maps ``model`` + NUL + ``base_url`` (``loopback`` for a server on this machine) to the flat
``[input, output]`` dollars per million tokens (decimal strings: exact, as the list's own) or to
``null`` (the list knows no price). A tiered price
is not kept (each call's size decides it: the list's calculator prices it). The day is UTC, as
:func:`ci_evals.llm.prices._linear` asks the list for today's price.

Everything read from the file is checked (two finite decimals >= 0, or null); anything else is a
miss, never an error: a damaged or foreign file only costs the import it would have saved. Writes
are whole-file replacements (a concurrent run's entry may be lost: it is found again).
"""

from __future__ import annotations

import functools
import ipaddress
import json
import math
import os
import tempfile
import threading
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from importlib.util import find_spec
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

from ci_evals._util import usercache

MISS: Final = object()
"""What :meth:`Memo.get` returns for a pair the memo does not know."""
MAX_BYTES: Final = 1 << 20
"""A memo file larger than this is not read (a day's models are a few hundred bytes each)."""

Rates = tuple[Decimal, Decimal]


def _fingerprint() -> str | None:
    """The installed price list, as its data file's size and mtime (None when not installed)."""
    try:
        spec = find_spec("genai_prices")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    try:
        st = os.stat(os.path.join(next(iter(spec.submodule_search_locations)), "data.py"))
    except OSError:
        return None
    return f"{st.st_size:x}{st.st_mtime_ns:x}"


@functools.lru_cache(maxsize=256)
def _key(model: str, base_url: str | None) -> str:
    """``model`` NUL where: the base URL, or ``loopback`` for a server on this machine (any port,
    any path): the list names providers by their public addresses, so every loopback URL prices
    a model alike (tests/test_price_memo.py holds the installed list to that), and a local server
    on a new port each run is still found. Cached: every priced call asks."""
    if base_url:
        try:
            host = urlsplit(base_url).hostname or ""
            local = host == "localhost" or ipaddress.ip_address(host).is_loopback
        except ValueError:
            local = False
        return f"{model}\0{'loopback' if local else base_url}"
    return f"{model}\0"


def _rates(value: Any) -> Rates | None | object:
    """A file's entry read fail-closed: rates, None (no price known), or MISS."""
    if value is None:
        return None
    if not (isinstance(value, list) and len(value) == 2 and all(type(v) is str for v in value)):
        return MISS
    try:
        pair = (Decimal(value[0]), Decimal(value[1]))
    except InvalidOperation:
        return MISS
    if not all(d.is_finite() and d >= 0 and math.isfinite(float(d)) for d in pair):
        return MISS
    return pair


class Memo:
    """Today's memo of the price list's answers (see the module docstring)."""

    def __init__(self, folder: Path | None, today: str | None = None) -> None:
        fingerprint = _fingerprint()
        day = today or datetime.now(tz=UTC).date().isoformat()
        self.path = folder / f"{fingerprint}-{day}.json" if folder and fingerprint else None
        self.entries: dict[str, Any] = {}
        self._parsed: dict[str, Rates | None | object] = {}
        self._loaded = False
        self._lock = threading.Lock()

    @classmethod
    def default(cls) -> Memo:
        """The memo in this user's cache folder, or one that keeps nothing when there is none."""
        return cls(usercache.own_cache_dir("prices"))

    def load(self) -> bool:
        """Read the file once (the price list's thread and the run's may both ask); whether it held
        any entry."""
        with self._lock:
            if not self._loaded:
                self.entries = self._read()
                self._loaded = True
        return bool(self.entries)

    def _read(self) -> dict[str, Any]:
        if self.path is None:
            return {}
        try:
            with open(self.path, "rb") as fh:
                raw = fh.read(MAX_BYTES + 1)
            data = json.loads(raw) if len(raw) <= MAX_BYTES else None
        except (OSError, ValueError, RecursionError):
            return {}
        return dict(data) if isinstance(data, dict) else {}

    def get(self, model: str, base_url: str | None) -> Rates | None | object:
        """The list's flat rates for ``model`` at ``base_url``, None (no price), or :data:`MISS`."""
        key = _key(model, base_url)
        found = self._parsed.get(key, MISS)
        if found is MISS:
            self.load()
            found = _rates(self.entries[key]) if key in self.entries else MISS
            self._parsed[key] = found
        return found

    def put(self, model: str, base_url: str | None, rates: Rates | None) -> None:
        """Keep the list's answer (flat rates, or None for no price) and write the file."""
        self.load()
        value = None if rates is None else [str(rates[0]), str(rates[1])]
        key = _key(model, base_url)
        self._parsed[key] = rates
        if self.path is None or self.entries.get(key, MISS) == value:
            return
        self.entries[key] = value
        tmp = None
        try:
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".memo-")
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(self.entries, fh)
            os.replace(tmp, self.path)
        except OSError:
            if tmp is not None:
                Path(tmp).unlink(missing_ok=True)
            return
        for old in self.path.parent.glob("*.json"):  # earlier days' and lists' files
            if old != self.path:
                old.unlink(missing_ok=True)
