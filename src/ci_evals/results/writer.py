"""The one way files are written into a results folder: never through a symlink, never half.

A results folder may come from elsewhere (``ci-evals report DIR`` on a downloaded artifact, a
merge output beside its shards), so any name in it may have been planted as a symlink to a file
outside (``summary.md -> ~/.bashrc``). Every report file is therefore written to a fresh temporary
file in the folder (``O_CREAT | O_EXCL``: a planted temp name cannot redirect it) and renamed over
its name at the end: a rename replaces a symlink itself, never its target, and a reader sees the
old file or the new one, never half. A name that is a symlink is refused with one line all the
same (exit 2): writing "around" a planted link would hide that the folder was tampered with.

The runner's results.jsonl is the one file appended record by record (``--resume`` needs what a
killed run wrote), so it cannot be renamed into place: :func:`open_append` opens it with
``O_NOFOLLOW`` instead, which refuses a symlink the same way.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from ci_evals._util.errors import ConfigError

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
WRITTEN = (
    "results.jsonl",
    "summary.json",
    "summary.md",
    "junit.xml",
    "report.html",
    ".ci-evals-run.json",
)
"""The files a run or a merge writes into its results folder."""


def refuse_link(path: Path) -> None:
    """ConfigError when ``path`` is a symlink (or anything but a regular file, when it exists)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):
        raise ConfigError(
            "refusing to write through a symlink in the results folder", file=str(path)
        )
    if not stat.S_ISREG(st.st_mode):
        raise ConfigError("refusing to write: not a regular file", file=str(path))


def refuse_links(folder: Path) -> None:
    """Before a run or merge spends any time: ConfigError when a file it will write is a symlink."""
    for name in WRITTEN:
        refuse_link(Path(folder) / name)


@contextmanager
def open_atomic(path: Path, *, encoding: str = "utf-8") -> Iterator[TextIO]:
    """A text file to write; it becomes ``path`` (by rename) only when the block ends without error."""
    path = Path(path)
    refuse_link(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding=encoding, newline="") as fh:
            yield fh
        os.chmod(tmp, 0o644)
        refuse_link(
            path
        )  # planted while we wrote: still refuse, rather than replace the link silently
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_text(path: Path, text: str) -> Path:
    """``text`` written to ``path`` atomically (see :func:`open_atomic`); returns ``path``."""
    with open_atomic(path) as fh:
        fh.write(text)
    return Path(path)


def open_append(path: Path, *, truncate: bool) -> TextIO:
    """results.jsonl opened to write record by record (``truncate``: a fresh run; else ``--resume``
    appends), refusing a symlink."""
    path = Path(path)
    refuse_link(path)
    flags = (
        os.O_CREAT | _NOFOLLOW | (os.O_WRONLY | os.O_TRUNC if truncate else os.O_RDWR | os.O_APPEND)
    )
    try:
        fd = os.open(path, flags, 0o644)
        if not truncate:
            _cut_torn_tail(fd)
    except OSError as exc:  # ELOOP: a symlink planted since the check above
        raise ConfigError(f"cannot write: {exc.strerror}", file=str(path)) from None
    return os.fdopen(fd, "w", encoding="utf-8")


def _cut_torn_tail(fd: int) -> None:
    """Cut off a last line that a hard kill left unfinished, so that lines appended after it stay
    whole (its job was not done: ``--resume`` runs it again)."""
    size = end = os.lseek(fd, 0, os.SEEK_END)
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return
    while end > 0:
        start = max(0, end - (1 << 16))
        cut = os.pread(fd, end - start, start).rfind(b"\n")
        if cut >= 0:
            os.ftruncate(fd, start + cut + 1)
            return
        end = start
    os.ftruncate(fd, 0)
