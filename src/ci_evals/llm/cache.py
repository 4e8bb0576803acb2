"""The content-addressed response cache on disk, and the key that addresses it.

The key is the sha256 of the canonical JSON of (endpoint, full request body, repeat index), so
a changed prompt, model or parameter is a miss and repeated runs of one request (``repeat``) stay
independent. Entries are response JSON at ``root/<key[:2]>/<key>.json``; only usable responses
are ever written (the caller decides), secrets are scrubbed before writing, and a corrupt entry
is a miss. Concurrent writers and readers, threads or processes, never see a partial entry.

An entry is only data: a name that is not a regular file (a FIFO, a device, a folder) is never
opened, one larger than ``MAX_ENTRY_BYTES`` is not read, and the parse is bounded
(:func:`ci_evals._util.bounds.loads`: finite numbers, 100 levels): anything odd is a miss.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import random
import stat
import threading
from pathlib import Path
from typing import Any

from ci_evals._util.bounds import loads
from ci_evals._util.redact import scrub_tree

CACHE_VERSION = "ci-evals-llm-cache/1"
MAX_ENTRY_BYTES = 16 * 2**20 + 2**20
"""A response is at most 16 MiB (``transport.MAX_RESPONSE_BYTES``): a larger entry is a miss."""
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)


def cache_key(endpoint: str, body: dict[str, Any], repeat: int = 0) -> str:
    """sha256 of the canonical JSON of (endpoint, full request body, repeat index)."""
    canon = json.dumps(
        {"v": CACHE_VERSION, "endpoint": endpoint, "request": body, "repeat": repeat},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(canon.encode("utf-8")).hexdigest()


class ResponseCache:
    """Response JSON stored at ``root/<key[:2]>/<key>.json``.

    Writes go to a unique temporary file renamed into place (``os.replace``), so concurrent
    writers and readers (threads or processes) never see a partial entry. A corrupt or
    unreadable entry is a miss; a failed write is ignored (the call already succeeded).
    From async code, :meth:`put_later` writes in a worker thread (the heavier half of the I/O)
    while the entry is served from memory; :meth:`flush` waits for pending writes.
    """

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self._made: set[Path] = set()
        self._pending: dict[str, dict[str, Any]] = {}
        self._tasks: set[asyncio.Task] = set()

    def put_later(self, key: str, data: dict[str, Any]) -> None:
        """Write ``data`` in a worker thread; this process sees it at once."""
        self._pending[key] = data
        task = asyncio.get_running_loop().create_task(self._write(key, data))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _write(self, key: str, data: dict[str, Any]) -> None:
        try:
            await asyncio.to_thread(self.put, key, data)
        finally:
            self._pending.pop(key, None)

    async def flush(self) -> None:
        """Wait until every write started by :meth:`put_later` is on disk."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        """The entry, or None. A small synchronous read (a miss is one failed open)."""
        pending = self._pending.get(key)
        if pending is not None:
            return pending
        try:
            fd = os.open(
                self.path(key), _READ_FLAGS
            )  # O_NONBLOCK: a FIFO planted there never holds the run
        except OSError:
            return None
        try:
            with os.fdopen(fd, "rb") as fh:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    return None
                raw = fh.read(MAX_ENTRY_BYTES + 1)
            data = loads(raw) if len(raw) <= MAX_ENTRY_BYTES else None
        except (OSError, ValueError, RecursionError):
            return None
        return data if isinstance(data, dict) else None

    def put(self, key: str, data: dict[str, Any]) -> None:
        try:
            data = scrub_tree(data)  # a server that echoes the key must not leave it on disk
        except RecursionError:  # nested past the interpreter's limit: never cached
            return
        target = self.path(key)
        tmp = target.with_name(
            f".{key}.{os.getpid()}.{threading.get_ident()}.{random.getrandbits(32):08x}.tmp"
        )
        try:
            text = json.dumps(data, ensure_ascii=False)
        except (ValueError, RecursionError):  # nothing a later read would take: not written
            return
        try:
            if target.parent not in self._made:
                target.parent.mkdir(parents=True, exist_ok=True)
                self._made.add(target.parent)
            with open(tmp, "wb") as fh:
                fh.write(text.encode("utf-8"))
            os.replace(tmp, target)
        except OSError:
            try:
                tmp.unlink()
            except OSError:
                pass
