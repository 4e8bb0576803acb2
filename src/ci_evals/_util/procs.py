"""Killing a user program with everything it started (command targets, python-grader workers).

Each such program runs in its own session (so its process group is its pid) and gets a unique
marker in its environment, ``CI_EVALS_PROCESS_TREE``, which every child inherits. Killing the
tree kills, in rounds until none is left: the process group, every descendant (found through
``/proc`` parent links, so children that called ``setsid`` are included) and every process still
carrying the marker (so children orphaned before the kill, daemonised ones included, are found).
A child that both leaves the session and clears its environment after its parent exited is out
of reach; the docs say so. Without ``/proc`` (not Linux) only the process group is killed.
"""

from __future__ import annotations

import os
import signal
import uuid

MARKER = "CI_EVALS_PROCESS_TREE"
_ROUNDS = 5


def new_marker() -> str:
    """A fresh value for the marker variable of one program's environment."""
    return uuid.uuid4().hex


def _table() -> dict[int, tuple[int, int]]:
    """{pid: (parent pid, process group)} of every process visible in /proc."""
    table: dict[int, tuple[int, int]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return table
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        # "pid (comm) state ppid pgrp ...": comm may hold spaces or parentheses, so split after it.
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) >= 3 and fields[0] != b"Z":
            table[int(name)] = (int(fields[1]), int(fields[2]))
    return table


def _has_marker(pid: int, needle: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            return needle in fh.read()
    except OSError:
        return False


def _members(root: int, needle: bytes | None) -> set[int]:
    """Live processes of the tree: root's group, root's descendants, marked processes and theirs."""
    table = _table()
    me = os.getpid()
    found = {pid for pid, (_, group) in table.items() if group == root}
    if root in table:
        found.add(root)
    if needle is not None:
        found |= {pid for pid in table if pid != me and _has_marker(pid, needle)}
    children: dict[int, list[int]] = {}
    for pid, (parent, _) in table.items():
        children.setdefault(parent, []).append(pid)
    stack = list(found)
    while stack:
        for child in children.get(stack.pop(), ()):
            if child not in found:
                found.add(child)
                stack.append(child)
    found.discard(me)
    return found


def kill_tree(root: int, marker: str | None = None) -> None:
    """SIGKILL the session leader ``root`` and everything it started (see the module docstring)."""
    needle = f"{MARKER}={marker}\0".encode() if marker else None
    for _ in range(_ROUNDS):
        members = _members(root, needle)  # found before the kill, while parent links still hold
        try:
            os.killpg(root, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if not members:
            return
        for pid in members:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def kill_descendants(wait: float = 2.0) -> None:
    """SIGKILL every live descendant of this process (found through /proc parent links) and reap
    its children, waiting at most ``wait`` seconds for them: what a run left behind (a subreaper
    inherits the orphans of the processes under it)."""
    import time  # only at the guard's end

    me = os.getpid()
    for _ in range(_ROUNDS):
        table = _table()
        children: dict[int, list[int]] = {}
        for pid, (parent, _) in table.items():
            children.setdefault(parent, []).append(pid)
        found, stack = set(), [me]
        while stack:
            for child in children.get(stack.pop(), ()):
                if child not in found:
                    found.add(child)
                    stack.append(child)
        if not found:
            break
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    deadline = time.monotonic() + wait
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            if time.monotonic() > deadline:
                return
            time.sleep(0.01)
