"""The Action's inputs and outputs tables in the docs, generated from action.yml.

action.yml is the one place the Action's inputs, defaults and outputs are declared; every doc
that lists them carries a generated copy between two markers, so the docs cannot drift from it:

    <!-- action-inputs:start -->   ... the inputs table ...   <!-- action-inputs:end -->
    <!-- action-outputs:start -->  ... the outputs table ...  <!-- action-outputs:end -->
    <!-- action-env:start -->      ... the inputs as INPUT_* variables (docker:// and docker run) ...

``python scripts/action_docs.py`` rewrites those regions in README.md and docs/*.md;
``python scripts/action_docs.py --check`` changes nothing and exits 1 naming each stale region
(tests/test_action_docs.py runs the check). Text outside the markers is never touched. A marker
without its end, or an unknown kind, is an error (exit 2) naming the file and line.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
KINDS = ("action-inputs", "action-outputs", "action-env")
MARKER = re.compile(r"^<!-- (action-[a-z]+):(start|end) -->$", re.M)


class DocError(ValueError):
    """A marker region that cannot be rewritten (file:line: why)."""


def _cell(text: object) -> str:
    """One table cell: whitespace folded to single spaces, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _default(spec: dict) -> str:
    default = str(spec.get("default", ""))
    if default:
        return f"`{default}`"
    return "required" if spec.get("required") else "—"


def render(kind: str, action: dict) -> str:
    """The markdown table of one kind, from the parsed action.yml."""
    inputs, outputs = action.get("inputs") or {}, action.get("outputs") or {}
    if kind == "action-inputs":
        rows = ["| input | default | meaning |", "|---|---|---|"]
        rows += [
            f"| `{name}` | {_default(spec)} | {_cell(spec.get('description', ''))} |"
            for name, spec in inputs.items()
        ]
    elif kind == "action-outputs":
        rows = ["| output | meaning |", "|---|---|"]
        rows += [
            f"| `{name}` | {_cell(spec.get('description', ''))} |" for name, spec in outputs.items()
        ]
    elif kind == "action-env":
        rows = ["| variable | input | action.yml default |", "|---|---|---|"]
        rows += [
            f"| `INPUT_{name.upper()}` | `{name}` | {_default(spec)} |"
            for name, spec in inputs.items()
        ]
    else:
        raise DocError(f"unknown table {kind!r} (known: {', '.join(KINDS)})")
    return "\n".join(rows)


def rewrite(text: str, action: dict, name: str = "<doc>") -> str:
    """``text`` with every marked region replaced by its generated table."""
    out, pos, open_ = [], 0, None
    for m in MARKER.finditer(text):
        kind, edge = m.group(1), m.group(2)
        line = text.count("\n", 0, m.start()) + 1
        if kind not in KINDS:
            raise DocError(f"{name}:{line}: unknown table {kind!r} (known: {', '.join(KINDS)})")
        if edge == "start":
            if open_:
                raise DocError(
                    f"{name}:{line}: {kind}:start inside {open_[0]} (no {open_[0]}:end before it)"
                )
            out.append(text[pos : m.end()])
            open_ = (kind, line)
        else:
            if not open_ or open_[0] != kind:
                raise DocError(f"{name}:{line}: {kind}:end without its {kind}:start")
            out.append("\n" + render(kind, action) + "\n")
            pos, open_ = m.start(), None
    if open_:
        raise DocError(f"{name}:{open_[1]}: {open_[0]}:start without its {open_[0]}:end")
    out.append(text[pos:])
    return "".join(out)


def documents(root: Path = ROOT) -> list[Path]:
    """The docs that may hold tables: README.md and docs/*.md."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    check = args == ["--check"]
    if args and not check:
        print("usage: python scripts/action_docs.py [--check]", file=sys.stderr)
        return 2
    action = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
    stale = []
    for path in documents():
        text = path.read_text(encoding="utf-8")
        name = path.relative_to(ROOT).as_posix()
        try:
            new = rewrite(text, action, name)
        except DocError as e:
            print(f"action_docs: {e}", file=sys.stderr)
            return 2
        if new != text:
            stale.append(name)
            if not check:
                path.write_text(new, encoding="utf-8")
    verb = (
        "differs from action.yml (run: python scripts/action_docs.py)"
        if check
        else "rewritten from action.yml"
    )
    for name in stale:
        print(f"action_docs: {name}: {verb}")
    return 1 if check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
