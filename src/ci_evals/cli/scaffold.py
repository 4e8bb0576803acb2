"""``ci-evals init``: a starter suite, dataset, custom grader and workflow in a repository.

The contract: it writes ``evals/suite.yaml``, ``evals/dataset.jsonl``, ``evals/custom_evaluators.py``
(plus what the target needs: ``evals/agent.py`` for ``command``, ``evals/agent_factory.py`` for
``letta``) and ``.github/workflows/evals.yml``, and appends the results and cache folders to
``.gitignore``. An existing file is never overwritten (it is listed as skipped) unless ``--force``
is given; ``.gitignore`` is only ever appended to, each entry once. Every target is checked
before anything is written: a folder, FIFO or device where a file goes, a file where a folder
goes, a folder that cannot be written, a symbolic link to a folder outside ``DIR`` are each one
line naming it, exit 2, and nothing written (a FIFO is never opened). It asks one question (the
target) only on a terminal and only when ``--target`` is not given; on a non-TTY it asks nothing.
The default target, ``command``, runs a stand-in agent, so ``ci-evals run evals/suite.yaml``
passes at once, offline. The templates are package data (``ci_evals/data/init``); the workflow
they make lints clean with actionlint and the GitHub workflow schema (tested).
"""

from __future__ import annotations

import os
import re
import stat
import sys
from argparse import Namespace
from importlib.resources import files
from pathlib import Path

from ci_evals._util.errors import ConfigError

TARGETS = ("command", "model", "letta", "http")
DEFAULT_TARGET = "command"
DEFAULT_ACTION = "OWNER/ci-evals@v1"
GITIGNORE = (".ci-evals-cache/", "ci-evals-results/", "ci-evals-results-rerun/")

TARGET_BLOCKS = {
    "command": """\
  kind: command                   # your agent: gets each sample as JSON on stdin, answers on stdout
  command: [python3, agent.py]    # run in this folder; a list, or a string split like a shell line
  timeout: 60""",
    "model": """\
  kind: model                     # any OpenAI-compatible chat API; the key comes from OPENAI_API_KEY
  model: gpt-4o-mini
  system_prompt: Answer the question in one short sentence.
  temperature: 0.0""",
    "letta": """\
  kind: agent                     # a Letta agent; server and key from LETTA_BASE_URL, LETTA_API_KEY
  agent_script: agent_factory.py:create_agent   # one fresh agent per sample""",
    "http": """\
  kind: http                      # your service: each sample is POSTed as JSON; it answers with text
  url: http://127.0.0.1:8000/answer   # or JSON {"output": ...} / {"messages": [...]}
  headers:
    Authorization: {env: AGENT_TOKEN, prefix: "Bearer "}""",
}

# The workflow step's env: the secrets each target reads (command: none, so a commented example).
ENV_BLOCKS = {
    "command": "          # OPENAI_API_KEY: ${{ secrets.OPENAI_API_KEY }}  # if your agent or a judge calls a model",
    "model": "          OPENAI_API_KEY: ${{ secrets.OPENAI_API_KEY }}",
    "letta": "          LETTA_API_KEY: ${{ secrets.LETTA_API_KEY }}\n"
    "          LETTA_BASE_URL: ${{ vars.LETTA_BASE_URL }}",
    "http": "          AGENT_TOKEN: ${{ secrets.AGENT_TOKEN }}",
}
# letta: a `gate:` on a Letta target reads as letta-evals' (whose accuracy was 0-100): say which scale.
BEFORE_GATE = {
    "letta": "accuracy_scale: fraction          # gate values are fractions (0.8: 80 % of samples), "
    "not letta-evals' percentages\n"
}
EXTRA_FILES = {"command": ["agent.py"], "letta": ["agent_factory.py"]}
SECRETS = {
    "command": [],
    "model": ["OPENAI_API_KEY"],
    "letta": ["LETTA_API_KEY"],
    "http": ["AGENT_TOKEN"],
}
ACTION_REF = re.compile(
    r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9_.-]+(/[A-Za-z0-9_./-]+)?@[A-Za-z0-9_.-]+"
    r"|docker://[a-z0-9./_:-]+"
)


def _template(name: str) -> str:
    return files("ci_evals").joinpath("data", "init", name).read_text(encoding="utf-8")


def planned_files(target: str, action: str = DEFAULT_ACTION) -> dict[str, str]:
    """``{relative path: content}`` of what ``init`` writes for a target (``.gitignore`` aside)."""
    out = {
        "evals/suite.yaml": _template("suite.yaml.tmpl")
        .replace("%%TARGET%%", TARGET_BLOCKS[target])
        .replace("%%BEFORE_GATE%%", BEFORE_GATE.get(target, "")),
        "evals/dataset.jsonl": _template("dataset.jsonl"),
        "evals/custom_evaluators.py": _template("custom_evaluators.py"),
    }
    for name in EXTRA_FILES.get(target, []):
        out[f"evals/{name}"] = _template(name)
    out[".github/workflows/evals.yml"] = (
        _template("evals.yml.tmpl")
        .replace("%%ACTION%%", action)
        .replace("%%ENV%%", ENV_BLOCKS[target])
    )
    return out


def gitignore_additions(existing: str) -> list[str]:
    """The entries of GITIGNORE that ``existing`` lacks (``/x/``, ``x`` and ``x/`` count as present)."""
    have = {
        line.strip().strip("/")
        for line in existing.splitlines()
        if not line.lstrip().startswith("#")
    }
    return [entry for entry in GITIGNORE if entry.strip("/") not in have]


def _ask_target() -> str:
    while True:
        answer = (
            input(f"Target ({'/'.join(TARGETS)}) [{DEFAULT_TARGET}]: ").strip().lower()
            or DEFAULT_TARGET
        )
        if answer in TARGETS:
            return answer
        print(f"  one of: {', '.join(TARGETS)}")


def cmd_init(args: Namespace) -> int:
    root: Path = args.dir
    if _lstat(root) is not None and not root.is_dir():
        raise ConfigError("not a folder", file=str(root))
    if not ACTION_REF.fullmatch(args.action):
        raise ConfigError(
            f"--action: expected ACCOUNT/REPO@REF or docker://IMAGE, got {args.action!r}"
        )
    target = args.target or (
        _ask_target() if sys.stdin.isatty() and sys.stdout.isatty() else DEFAULT_TARGET
    )
    # Every target is checked before anything is written: a bad one is one line, and nothing written.
    write, skipped = [], []
    for rel, content in planned_files(target, args.action).items():
        kind = _target(root, rel, write_file=args.force)
        if kind == "link":
            skipped.append((rel, "a symbolic link: never written through"))
        elif kind == "file" and not args.force:
            skipped.append((rel, "already there; --force overwrites it"))
        else:
            write.append((rel, content))
    ignore = root / ".gitignore"
    kind = _target(root, ".gitignore", write_file=False)
    existing = _read_regular(ignore) if kind == "file" else ""
    added = gitignore_additions(existing) if kind != "link" else []
    if added and kind == "file":
        _writable(ignore, kind)
    for rel, content in write:
        _write(root / rel, content)
    if kind == "link":
        print(
            ".gitignore is a symbolic link: left alone; add " + ", ".join(GITIGNORE) + " yourself"
        )
    elif added:
        sep = "" if not existing or existing.endswith("\n") else "\n"
        _write(
            ignore,
            sep
            + ("\n" if existing else "")
            + "# ci-evals: results (and --only-failed re-runs), LLM "
            "response cache\n" + "".join(f"{entry}\n" for entry in added),
            append=True,
        )
    _report(root, target, args.action, [rel for rel, _ in write], skipped, added)
    return 0


def _target(root: Path, rel: str, *, write_file: bool) -> str:
    """What ``root/rel`` is: ``"absent"``, ``"file"`` (regular) or ``"link"``, once its folders are
    checked (each absent, or a folder inside ``root``, through no symbolic link out of it) and the
    folder it would be made in, or the file itself when ``write_file``, is writable. Anything else (a
    folder, a FIFO, a device where a file goes; a file where a folder goes) is a ConfigError naming
    it: init has written nothing yet. A FIFO or device is never opened."""
    home = root.resolve()
    path, parts = root, Path(rel).parts
    for name in parts[:-1]:
        path = path / name
        if (st := _lstat(path)) is None:
            return _writable(path.parent, "absent")
        if stat.S_ISLNK(st.st_mode):
            real = path.resolve()
            if real != home and home not in real.parents:
                raise ConfigError(
                    f"is a symbolic link out of {root} (to {real}): init never writes through "
                    "it; nothing written",
                    file=str(path),
                )
            st = os.stat(path) if real.exists() else st
        if not stat.S_ISDIR(st.st_mode):
            raise ConfigError(
                f"is not a folder ({_what(st.st_mode)}), and init writes {rel} in it; nothing "
                "written",
                file=str(path),
            )
    path = path / parts[-1]
    if (st := _lstat(path)) is None:
        return _writable(path.parent, "absent")
    if stat.S_ISLNK(st.st_mode):
        return "link"
    if not stat.S_ISREG(st.st_mode):
        raise ConfigError(
            f"is not a regular file ({_what(st.st_mode)}); init writes a file there: nothing "
            "written",
            file=str(path),
        )
    return _writable(path, "file") if write_file else "file"


def _lstat(path: Path) -> os.stat_result | None:
    """``os.lstat(path)``, None when it does not exist; ConfigError when it cannot be looked at."""
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:  # no permission to look in its folder, a name too long
        raise ConfigError(
            f"cannot be checked: {exc.strerror}; nothing written", file=str(path)
        ) from None


def _writable(path: Path, kind: str) -> str:
    """``kind`` when this process may write ``path`` (a file, or a folder to make files in; a folder
    not made yet: the nearest one that is), else a ConfigError."""
    while not os.path.lexists(path) and path.parent != path:
        path = path.parent
    if not os.access(path, os.W_OK | (os.X_OK if path.is_dir() else 0)):
        raise ConfigError("cannot be written (permission denied); nothing written", file=str(path))
    return kind


def _what(mode: int) -> str:
    return (
        "a folder"
        if stat.S_ISDIR(mode)
        else "a FIFO"
        if stat.S_ISFIFO(mode)
        else "a socket"
        if stat.S_ISSOCK(mode)
        else "a device"
        if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
        else "a file"
        if stat.S_ISREG(mode)
        else "a symbolic link to nothing"
    )


_FLAGS = (
    os.O_NOFOLLOW | os.O_NONBLOCK
)  # a link or FIFO planted since the check is refused, never waited on


def _read_regular(path: Path) -> str:
    """A regular file's text (opened without following a link or waiting on a FIFO)."""
    try:
        fd = os.open(path, os.O_RDONLY | _FLAGS)
    except OSError as exc:
        raise ConfigError(
            f"cannot be read: {exc.strerror}; nothing written", file=str(path)
        ) from None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ConfigError("is not a regular file; nothing written", file=str(path))
        return fh.read().decode("utf-8", "replace")


def _write(path: Path, text: str, *, append: bool = False) -> None:
    """``text`` written to (or appended to) the regular file ``path``, its folders made as needed."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(
            path, os.O_WRONLY | os.O_CREAT | _FLAGS | (os.O_APPEND if append else os.O_TRUNC), 0o644
        )
        with os.fdopen(fd, "wb") as fh:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise ConfigError("is not a regular file: not written", file=str(path))
            fh.write(text.encode("utf-8"))
    except OSError as exc:  # a change since the checks (a race, a full disk)
        raise ConfigError(f"cannot write: {exc.strerror}", file=str(path)) from None


def _report(
    root: Path,
    target: str,
    action: str,
    written: list[str],
    skipped: list[tuple[str, str]],
    added: list[str],
) -> None:
    where = "" if root.resolve() == Path.cwd().resolve() else f" in {root}"
    print(f"ci-evals init{where} (target: {target})")
    for rel in written:
        print(f"  wrote   {rel}")
    for rel, why in skipped:
        print(f"  skipped {rel} ({why})")
    print(
        f"  .gitignore: {'added ' + ', '.join(added) if added else 'already ignores ' + ', '.join(GITIGNORE)}"
    )
    suite = "evals/suite.yaml" if not where else f"{root}/evals/suite.yaml"
    print("Next:")
    if target == "command":
        print(
            f"  ci-evals run {suite}          # runs offline now; then put your agent in evals/agent.py"
        )
    else:
        print(
            f"  ci-evals validate {suite}     # checks it offline; `ci-evals run` calls the {target} target"
        )
    for name in SECRETS[target]:
        print(f"  add the repository secret {name} (Settings > Secrets and variables > Actions)")
    if target == "letta":
        print("  add the repository variable LETTA_BASE_URL (your Letta server)")
    if action == DEFAULT_ACTION:
        print(
            "  in .github/workflows/evals.yml, replace OWNER with the account that hosts ci-evals"
        )
    print("  commit evals/, .github/workflows/evals.yml and .gitignore, push, open a pull request")
