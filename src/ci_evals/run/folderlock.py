"""One run per results folder, and ``--resume`` only of the same suite and configuration.

A run holds an exclusive ``flock`` on ``<folder>/.ci-evals-run.json`` from start to the last
report; a second run into the folder stops at once (exit 2) and names the holder (pid, host,
start time). The lock dies with its process, so a crash or ``kill -9`` never leaves the folder
locked. The same file keeps the sha256 of the suite (its YAML and dataset bytes), of its code
(every Python file loaded from the suite's folder tree: custom graders, extractors, reward
composers, setup and agent scripts and the modules they import; and every rubric, prompt and .af
file it read) and of the configuration (the parsed suite and the sample selection); ``--resume``
refuses a folder whose hashes differ, because the grades in it would answer a different
question (grades by the old code kept beside new ones once turned a FAIL into a PASS). A folder
written before the code was fingerprinted cannot prove its code unchanged: refused too.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ci_evals._util.errors import ConfigError
from ci_evals.results.contract import record_problem
from ci_evals.results.records import ResultRecord
from ci_evals.results.writer import refuse_link
from ci_evals.suite.loader import LoadedSuite
from ci_evals.usercode.load import loaded_paths

LOCK_NAME = ".ci-evals-run.json"


def _sha256_files(paths: list[Path]) -> str:
    digest = hashlib.sha256()
    for path in paths:
        digest.update(str(path.name).encode() + b"\0")
        with path.open("rb") as fh:
            while chunk := fh.read(1 << 20):
                digest.update(chunk)
        digest.update(b"\0")
    return digest.hexdigest()


def code_files(suite: LoadedSuite) -> list[Path]:
    """The files besides the suite and dataset that decide its grades (see the module docstring)."""
    import sys

    base = Path(suite.path).resolve().parent
    found = set(suite.ctx.files_read) | set(suite.dataset.rubric_files)
    # Python files count when they sit in the suite's folder tree (loaded by this suite, or helpers
    # its graders import): an interpreter that ran other suites before does not blur the print.
    found.update(p for p in loaded_paths() if p.is_relative_to(base) and p.is_file())
    modules = [
        file
        for m in list(sys.modules.values())
        if isinstance(file := getattr(m, "__file__", None), str) and file.endswith(".py")
    ]
    inside = os.path.join(base, "")
    found.update(
        Path(p) for p in _real_paths(modules) if p.startswith(inside) and os.path.isfile(p)
    )
    return sorted(found)


def _real_paths(files: Iterable[str]) -> Iterator[str]:
    """Each file as ``os.path.realpath`` gives it, with one ``realpath`` per folder and one
    ``lstat`` per file: resolving each of a run's 600 modules on its own walked every folder of
    its path again (25-50 ms of a run's start; 0.3-0.5 s in a process with thousands of modules)."""
    folders: dict[str, str] = {}
    for file in files:
        folder, name = os.path.split(file)
        real = folders.get(folder)
        if real is None:
            real = folders[folder] = os.path.realpath(folder)
        path = os.path.join(real, name)
        yield os.path.realpath(path) if os.path.islink(path) else path


def _sha256_code(paths: list[Path]) -> str:
    digest = hashlib.sha256()
    for path in paths:  # the full path: a file moved or renamed is a change
        digest.update(str(path).encode("utf-8", "surrogatepass") + b"\0")
        try:
            digest.update(path.read_bytes())
        except OSError:
            digest.update(b"<unreadable>")
        digest.update(b"\0")
    return digest.hexdigest()


def fingerprint(suite: LoadedSuite, selection: dict[str, Any]) -> dict[str, str]:
    """``{"suite_sha256", "code_sha256", "config_sha256"}`` of a loaded suite and the options that
    pick its samples."""
    files = [Path(suite.path), Path(suite.dataset.path)]
    config = {"spec": suite.spec.model_dump(mode="json"), "selection": selection}
    canon = json.dumps(config, sort_keys=True, default=str, ensure_ascii=False).encode("utf-8")
    return {
        "suite_sha256": _sha256_files(files),
        "code_sha256": _sha256_code(code_files(suite)),
        "config_sha256": hashlib.sha256(canon).hexdigest(),
    }


@dataclass
class FolderLock:
    """A held lock on a results folder; :meth:`release` when the run's reports are written."""

    path: Path
    fd: int

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # closing drops the flock; the file stays, with the fingerprints
            self.fd = -1


def _holder(text: str) -> str:
    try:
        info = json.loads(text).get("holder") or {}
        return f"pid {info.get('pid')} on host {info.get('host')}, since {info.get('started_at')}"
    except (ValueError, AttributeError):
        return "another process"


def hold(folder: Path, prints: dict[str, str], *, resume: bool) -> FolderLock:
    """Lock ``folder`` for this run (ConfigError naming the holder when it is taken), check a
    resume's fingerprints, then record this run as the holder."""
    import fcntl

    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(
            f"cannot create the results folder: {exc.strerror}", file=str(folder)
        ) from None
    path = folder / LOCK_NAME
    refuse_link(path)  # a lock file planted as a symlink would have us truncate its target
    try:  # O_NOFOLLOW as well: a symlink planted between the check and the open is refused too
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    except OSError as exc:  # a folder, a dangling or planted symlink, no permission
        raise ConfigError(
            f"cannot open the run lock {LOCK_NAME}: {exc.strerror}; remove it or use another "
            "--output",
            file=str(folder),
        ) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        held_by = _holder(path.read_text(encoding="utf-8", errors="replace"))
        os.close(fd)
        raise ConfigError(
            f"the results folder is in use by another ci-evals run ({held_by}); "
            "use another --output or wait for it to finish",
            file=str(folder),
        ) from None
    previous = os.read(fd, 1 << 16).decode("utf-8", "replace")
    if resume:
        try:
            _check_resume(previous, prints, folder)
        except ConfigError:
            os.close(fd)
            raise
    record = {
        "holder": {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        },
        **prints,
    }
    os.ftruncate(fd, 0)
    os.pwrite(fd, (json.dumps(record, indent=2) + "\n").encode("utf-8"), 0)
    return FolderLock(path, fd)


def _written_by_us(results: Path) -> bool:
    try:
        if not stat.S_ISREG(
            os.lstat(results).st_mode
        ):  # a FIFO would hang: the runner's reader names it
            return False
        with results.open(encoding="utf-8") as fh:
            first = next((line for line in fh if line.strip()), "")
        rec = json.loads(first)
        return record_problem(rec) is None
    except (OSError, ValueError, UnicodeDecodeError):
        return False


def _check_resume(previous: str, prints: dict[str, str], folder: Path) -> None:
    try:
        old = json.loads(previous) if previous.strip() else None
    except ValueError:
        old = None
    if not isinstance(old, dict) or not all(
        isinstance(old.get(k), str) for k in prints if k != "code_sha256"
    ):
        if not _written_by_us(folder / "results.jsonl"):
            return  # the runner names the first line that is not ours
        raise ConfigError(
            f"cannot resume: no record of the suite that wrote this folder ({LOCK_NAME} is "
            "missing or unreadable); run again without --resume",
            file=str(folder),
        )
    changed = [
        what
        for key, what in (
            ("suite_sha256", "the suite file or its dataset"),
            (
                "code_sha256",
                "the suite's code (graders, extractors, reward "
                "composer, setup script, rubric or prompt files)",
            ),
            ("config_sha256", "the configuration or sample selection"),
        )
        if old.get(key) != prints[key]
    ]
    if changed:
        raise ConfigError(
            f"cannot resume: {' and '.join(changed)} changed since this folder was written "
            "(its grades would not match); run again without --resume",
            file=str(folder),
        )


JobKey = tuple[str | None, str, int]
"""A job: (model, sample id as a string, run)."""


def job_key(rec: ResultRecord) -> JobKey:
    """A record's (model, sample id, run): its job, as the runner's ``done_keys`` holds it."""
    return rec.get("model"), str(rec["sample_id"]), rec.get("run", 0)


class ResumedJobs:
    """The (model, sample, run) jobs of a suite as loaded (its dataset's selection, its models,
    ``num_runs``): ``--resume`` takes no record of another job as done. The folder's fingerprints
    match, so such a record was put there by hand; counted, it gave 7 of 7 graded for 6 samples."""

    def __init__(self, suite: LoadedSuite) -> None:
        self.models = set(suite.target.models())
        self.runs = suite.spec.num_runs
        self.dataset = suite.dataset
        self.ids: set[str] | None = None  # the dataset read once, when first needed

    def check(self, key: JobKey, file: Path, line: int | None = None) -> None:
        """ConfigError (naming ``file`` and ``line``) unless ``key`` is one of the jobs."""
        model, sid, run = key
        if self.ids is None:
            self.ids = {str(sample.id) for sample in self.dataset}
        if (
            sid in self.ids
            and model in self.models
            and isinstance(run, int)
            and 0 <= run < self.runs
        ):
            return
        what = (
            "sample"
            if sid not in self.ids
            else "model"
            if model not in self.models
            else "run number"
        )
        raise ConfigError(
            f"cannot resume: a record of sample {sid[:80]!r} (model {str(model)[:80]!r}, run "
            f"{str(run)[:20]}), whose {what} this run does not have (dataset and selection, models, "
            "num_runs); run again without --resume",
            file=str(file),
            line=line,
        )
