"""Write the bytecode of every module a run of any built-in kind imports, and no other (the image's
last build step; see the Dockerfile).

The image runs with ``PYTHONDONTWRITEBYTECODE=1`` on a fresh container each time, so a module
without its ``.pyc`` in the image is compiled again on every run of the Action (measured in the
image): aiohttp for a model or a judge (0.09 s a run), letta-client for a Letta target (0.13 s),
anthropic for a Claude judge (0.48 s), google-genai for Gemini (0.25 s), nltk and rouge-score for
``text_similarity`` (0.40 s). Compiling every package instead makes the image 90 MB larger. This
script imports

1. every module of ci_evals;
2. every third-party module ci_evals' source names, each ``import`` statement as it is written,
   wherever it stands (most of them inside the function that needs them, for start-up time); a
   ``from X import name`` reads the name too, so a package's lazy attributes load as they do in
   a run (openai's ``DefaultAioHttpClient``).

Scoring each ``text_similarity`` metric once imports no module beyond those (``import nltk``
loads its WordNet reader's code; the corpus itself is data), so the build does not (METEOR's
first call reads WordNet: 3.7 s).

    python scripts/warm-bytecode.py            # import all of that (writes the bytecode)
    python scripts/warm-bytecode.py --check    # and exit 1 naming each imported module without it

``--check`` runs in the smoke test (scripts/container-smoke.sh) under ``PYTHONDONTWRITEBYTECODE=1``:
a dependency that starts importing a new module, or a new import in ci_evals, shows there.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import pkgutil
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path


def ci_evals_modules() -> Iterator[str]:
    import ci_evals

    yield "ci_evals"
    for info in pkgutil.walk_packages(ci_evals.__path__, "ci_evals."):
        if not info.name.endswith(".__main__"):  # `python -m ci_evals`: importing it runs the CLI
            yield info.name


def third_party_imports(root: Path) -> set[tuple[str, tuple[str, ...]]]:
    """Every absolute import statement under ``root`` naming a module outside ci_evals and the
    standard library: (module, names) where ``names`` are what ``from module import ...`` reads."""
    stdlib = set(sys.stdlib_module_names)
    found: set[tuple[str, tuple[str, ...]]] = set()
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                found.update((alias.name, ()) for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add((node.module, tuple(a.name for a in node.names if a.name != "*")))
    return {
        (module, names)
        for module, names in found
        if module.split(".")[0] not in stdlib and module.split(".")[0] != "ci_evals"
    }


def run_import(module: str, names: tuple[str, ...]) -> None:
    """What ``import module`` or ``from module import names`` does."""
    mod = importlib.import_module(module)
    for name in names:
        try:
            getattr(mod, name)
        except AttributeError:
            importlib.import_module(f"{module}.{name}")


def missing_bytecode() -> list[str]:
    """Modules imported from a ``.py`` file whose cached bytecode is absent."""
    missing = []
    for name, mod in sorted(sys.modules.items()):
        origin = getattr(getattr(mod, "__spec__", None), "origin", None)
        if origin and origin.endswith(".py"):
            cached = importlib.util.cache_from_source(origin)
            if not Path(cached).exists():
                missing.append(name)
    return missing


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--check", action="store_true", help="exit 1 if a module has no bytecode")
    args = p.parse_args()
    for name in ci_evals_modules():
        importlib.import_module(name)
    import ci_evals

    for module, names in sorted(third_party_imports(Path(ci_evals.__file__).parent)):
        run_import(module, names)
    if args.check:
        missing = missing_bytecode()
        if missing:
            print(
                f"{len(missing)} imported modules have no bytecode (compiled again on every run): "
                + " ".join(missing),
                file=sys.stderr,
            )
            return 1
        purelib = sysconfig.get_paths()["purelib"]
        print(f"{len(sys.modules)} modules imported, each with its bytecode ({purelib})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
