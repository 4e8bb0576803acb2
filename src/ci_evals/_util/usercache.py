"""This user's cache folders: ``$XDG_CACHE_HOME/ci-evals/<name>``, else ``~/.cache/ci-evals/<name>``.

What is kept there is read back by later runs (report.html's compiled template, the price list's
flat prices), so a folder is used only when it is this user's alone: created 0700, never one that
others may write to (their file would be run as code, or decide a cost gate).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


def cache_dir(name: str) -> Path | None:
    """``$XDG_CACHE_HOME/ci-evals/<name>``, else ``~/.cache/ci-evals/<name>``; None without an
    absolute path for either (a relative one is ignored, as the XDG rules say: never a folder made
    in the current directory). The Action's image sets XDG_CACHE_HOME to a folder it fills when it
    is built."""
    for root in (
        os.environ.get("XDG_CACHE_HOME") or "",
        os.path.join(os.path.expanduser("~"), ".cache"),
    ):
        if os.path.isabs(root):
            return Path(root) / "ci-evals" / name
    return None


def own_cache_dir(name: str) -> Path | None:
    """:func:`cache_dir`, made 0700 when missing, or None unless it is a folder this user owns and
    no one else may write to (or there is no home, or no owner to check: not POSIX)."""
    folder, uid = cache_dir(name), getattr(os, "getuid", lambda: None)()
    if folder is None or uid is None:
        return None
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = os.lstat(folder)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != uid or st.st_mode & 0o022:
        return None
    return folder
