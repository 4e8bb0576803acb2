"""Check the package's shape from its own imports (docs/architecture.md, issue 22).

Prints, and with --check fails on: more than 16 top-level units under src/ci_evals/, a module
over 400 lines, an import cycle between files or between top-level units, more than 10 pairs of
our own modules joined by a function-level import, or a function-level import of our own module
without a one-line reason (a comment on the line above or at the end of the line).
import-linter checks the layers; this checks what it does not.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "src"
PKG = "ci_evals"
MAX_LINES = 400
MAX_UNITS = 16
MAX_LAZY_PAIRS = 10


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def resolve(mod: str, is_pkg: bool, node: ast.ImportFrom | ast.Import) -> list[str]:
    """The names of our own modules an import statement reaches."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.split(".")[0] == PKG]
    base = node.module or ""
    if node.level:
        parts = mod.split(".")
        if not is_pkg:
            parts = parts[:-1]
        parts = parts[: len(parts) - (node.level - 1)]
        base = ".".join(parts + ([base] if base else []))
    if base.split(".")[0] != PKG:
        return []
    return [base] + [f"{base}.{a.name}" for a in node.names]


def narrow(targets: list[str], files: dict) -> list[str]:
    """``from pkg import mod`` reaches ``pkg.mod``; its ``pkg/__init__`` only when it names more."""
    subs = [t for t in targets[1:] if t in files]
    return subs if subs and len(subs) == len(targets) - 1 else targets


def collect(
    root: Path = ROOT,
) -> tuple[dict[str, Path], dict[str, set[str]], list[tuple[str, str, int, bool]]]:
    """(module -> file, module -> the modules it imports at its top, the function-level imports)."""
    files = {
        module_name(p, root): p
        for p in (root / PKG).rglob("*.py")
        if all((d / "__init__.py").exists() for d in p.parents if d.is_relative_to(root / PKG))
    }
    top: dict[str, set[str]] = {m: set() for m in files}
    lazy: list[tuple[str, str, int, bool]] = []  # (importer, imported, line, has_reason)
    for mod, path in files.items():
        src = path.read_text()
        lines = src.splitlines()
        tree = ast.parse(src)
        is_pkg = path.name == "__init__.py"
        in_func: set[int] = set()
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for n in ast.walk(fn):
                    if isinstance(n, (ast.Import, ast.ImportFrom)):
                        in_func.add(id(n))
        for n in ast.walk(tree):
            if not isinstance(n, (ast.Import, ast.ImportFrom)):
                continue
            if _type_checking(tree, n):
                continue
            targets = {t for t in narrow(resolve(mod, is_pkg, n), files) if t in files and t != mod}
            if not targets:
                continue
            if id(n) in in_func:
                above = lines[n.lineno - 2].strip() if n.lineno > 1 else ""
                reason = any(
                    "#" in ln for ln in lines[n.lineno - 1 : n.end_lineno]
                ) or above.startswith("#")
                for t in targets:
                    lazy.append((mod, t, n.lineno, reason))
            else:
                top[mod] |= targets
    return files, top, lazy


def _type_checking(tree: ast.Module, node: ast.AST) -> bool:
    for n in ast.walk(tree):
        if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test):
            if any(c is node for b in n.body for c in ast.walk(b)):
                return True
    return False


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one member (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def unit(mod: str) -> str:
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def problems_of(root: Path = ROOT, verbose: bool = False) -> list[str]:
    """Every broken rule, one line each (and the measurements printed)."""
    files, top, lazy = collect(root)
    problems: list[str] = []

    units = sorted({unit(m) for m in files if unit(m) not in ("__init__", "__main__")})
    print(f"top-level units: {len(units)} ({', '.join(units)})")
    if len(units) > MAX_UNITS:
        problems.append(f"{len(units)} top-level units (at most {MAX_UNITS})")

    big = sorted((len(p.read_text().splitlines()), m) for m, p in files.items())
    over = [(n, m) for n, m in big if n > MAX_LINES]
    print(f"modules: {len(files)}; largest: " + ", ".join(f"{m} {n}" for n, m in big[-3:][::-1]))
    for n, m in over:
        problems.append(f"{m} has {n} lines (at most {MAX_LINES})")

    # Cycles count every import, the ones inside functions too: hiding an import in a function
    # does not remove the dependency, it only defers it.
    every: dict[str, set[str]] = {m: set(ts) for m, ts in top.items()}
    for a, b, _, _ in lazy:
        every[a].add(b)
    file_cycles = cycles(every)
    for c in file_cycles:
        problems.append("file cycle: " + " <-> ".join(c))
    unit_graph: dict[str, set[str]] = {}
    for m, ts in every.items():
        for t in ts:
            if unit(m) != unit(t):
                unit_graph.setdefault(unit(m), set()).add(unit(t))
    for c in cycles(unit_graph):
        problems.append("unit cycle: " + " <-> ".join(c))
    print(f"cycles: {len(file_cycles)} between files, {len(cycles(unit_graph))} between units")

    pairs = sorted({(a, b) for a, b, _, _ in lazy})
    print(f"function-level imports of our own modules: {len(lazy)} in {len(pairs)} pairs")
    if len(pairs) > MAX_LAZY_PAIRS:
        problems.append(
            f"{len(pairs)} pairs joined by a function-level import (at most {MAX_LAZY_PAIRS})"
        )
    for a, b, line, reason in lazy:
        where = f"{files[a].relative_to(root.parent)}:{line}"
        if verbose:
            print(f"  {where} {a} -> {b}{'' if reason else '  (no reason)'}")
        if not reason:
            problems.append(f"{where}: lazy import of {b} without a reason")
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when a rule is broken")
    ap.add_argument("-v", "--verbose", action="store_true", help="list every lazy import")
    ap.add_argument(
        "--root", type=Path, default=ROOT, help="the folder holding ci_evals/ (default: src)"
    )
    args = ap.parse_args(argv)
    problems = problems_of(args.root, verbose=args.verbose)
    for p in problems:
        print("FAIL " + p)
    return 1 if (args.check and problems) else 0


if __name__ == "__main__":
    sys.exit(main())
