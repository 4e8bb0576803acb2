"""``ci-evals init``: a starter suite, dataset, custom grader and workflow in a repository.

The contract: it writes ``evals/suite.yaml``, ``evals/dataset.jsonl``, ``evals/custom_evaluators.py``
(plus what the target needs: ``evals/agent.py`` for ``command``, ``evals/agent_factory.py`` for
``letta``) and ``.github/workflows/evals.yml``, and appends the results and cache folders to
``.gitignore``. An existing file is never overwritten (it is listed as skipped) unless ``--force``
is given; ``.gitignore`` is only ever appended to, each entry once. It asks one question (the
target) only on a terminal and only when ``--target`` is not given; on a non-TTY it asks nothing.
The default target, ``command``, runs a stand-in agent, so ``ci-evals run evals/suite.yaml``
passes at once, offline. The templates are package data (``ci_evals/data/init``); the workflow
they make lints clean with actionlint and the GitHub workflow schema (tested).
"""

from __future__ import annotations

import re
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
EXTRA_FILES = {"command": ["agent.py"], "letta": ["agent_factory.py"]}
SECRETS = {"command": [], "model": ["OPENAI_API_KEY"], "letta": ["LETTA_API_KEY"], "http": ["AGENT_TOKEN"]}
ACTION_REF = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9_.-]+(/[A-Za-z0-9_./-]+)?@[A-Za-z0-9_.-]+"
                        r"|docker://[a-z0-9./_:-]+")


def _template(name: str) -> str:
    return files("ci_evals").joinpath("data", "init", name).read_text(encoding="utf-8")


def planned_files(target: str, action: str = DEFAULT_ACTION) -> dict[str, str]:
    """``{relative path: content}`` of what ``init`` writes for a target (``.gitignore`` aside)."""
    out = {
        "evals/suite.yaml": _template("suite.yaml.tmpl").replace("%%TARGET%%", TARGET_BLOCKS[target]),
        "evals/dataset.jsonl": _template("dataset.jsonl"),
        "evals/custom_evaluators.py": _template("custom_evaluators.py"),
    }
    for name in EXTRA_FILES.get(target, []):
        out[f"evals/{name}"] = _template(name)
    out[".github/workflows/evals.yml"] = (_template("evals.yml.tmpl").replace("%%ACTION%%", action)
                                          .replace("%%ENV%%", ENV_BLOCKS[target]))
    return out


def gitignore_additions(existing: str) -> list[str]:
    """The entries of GITIGNORE that ``existing`` lacks (``/x/``, ``x`` and ``x/`` count as present)."""
    have = {line.strip().strip("/") for line in existing.splitlines() if not line.lstrip().startswith("#")}
    return [entry for entry in GITIGNORE if entry.strip("/") not in have]


def _ask_target() -> str:
    while True:
        answer = input(f"Target ({'/'.join(TARGETS)}) [{DEFAULT_TARGET}]: ").strip().lower() or DEFAULT_TARGET
        if answer in TARGETS:
            return answer
        print(f"  one of: {', '.join(TARGETS)}")


def cmd_init(args: Namespace) -> int:
    root: Path = args.dir
    if root.exists() and not root.is_dir():
        raise ConfigError("not a folder", file=str(root))
    if not ACTION_REF.fullmatch(args.action):
        raise ConfigError(f"--action: expected ACCOUNT/REPO@REF or docker://IMAGE, got {args.action!r}")
    target = args.target or (_ask_target() if sys.stdin.isatty() and sys.stdout.isatty() else DEFAULT_TARGET)
    written, skipped = [], []
    for rel, content in planned_files(target, args.action).items():
        path = root / rel
        if path.is_symlink():
            skipped.append((rel, "a symbolic link: never written through"))
            continue
        if path.exists() and not args.force:
            skipped.append((rel, "already there; --force overwrites it"))
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
        written.append(rel)
    ignore = root / ".gitignore"
    if ignore.is_symlink():
        added: list[str] = []
        print(".gitignore is a symbolic link: left alone; add " + ", ".join(GITIGNORE) + " yourself")
    else:
        existing = ignore.read_text(encoding="utf-8") if ignore.exists() else ""
        added = gitignore_additions(existing)
        if added:
            sep = "" if not existing or existing.endswith("\n") else "\n"
            with ignore.open("a", encoding="utf-8") as fh:
                fh.write(sep + ("\n" if existing else "") + "# ci-evals: results (and --only-failed re-runs), LLM response cache\n"
                         + "".join(f"{entry}\n" for entry in added))
    _report(root, target, args.action, written, skipped, added)
    return 0


def _report(root: Path, target: str, action: str, written: list[str], skipped: list[tuple[str, str]],
            added: list[str]) -> None:
    where = "" if root.resolve() == Path.cwd().resolve() else f" in {root}"
    print(f"ci-evals init{where} (target: {target})")
    for rel in written:
        print(f"  wrote   {rel}")
    for rel, why in skipped:
        print(f"  skipped {rel} ({why})")
    print(f"  .gitignore: {'added ' + ', '.join(added) if added else 'already ignores ' + ', '.join(GITIGNORE)}")
    suite = "evals/suite.yaml" if not where else f"{root}/evals/suite.yaml"
    print("Next:")
    if target == "command":
        print(f"  ci-evals run {suite}          # runs offline now; then put your agent in evals/agent.py")
    else:
        print(f"  ci-evals validate {suite}     # checks it offline; `ci-evals run` calls the {target} target")
    for name in SECRETS[target]:
        print(f"  add the repository secret {name} (Settings > Secrets and variables > Actions)")
    if target == "letta":
        print("  add the repository variable LETTA_BASE_URL (your Letta server)")
    if action == DEFAULT_ACTION:
        print("  in .github/workflows/evals.yml, replace OWNER with the account that hosts ci-evals")
    print("  commit evals/, .github/workflows/evals.yml and .gitignore, push, open a pull request")
