"""The package's shape (docs/architecture.md): measured from the source's own imports by
scripts/arch_check.py, which CI also runs; these tests check the checker and the tree."""

from __future__ import annotations

import gc
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _arch():
    spec = importlib.util.spec_from_file_location("arch_check", ROOT / "scripts" / "arch_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "src"
    for name, text in {"ci_evals/__init__.py": "", **files}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


@pytest.fixture(autouse=True)
def no_garbage_left():
    """Collect earlier tests' garbage first: Python 3.11.2 (Debian 12) fails ``ast.parse`` with
    "AST constructor recursion depth mismatch" when a finalizer run during it formats a traceback
    (CPython gh-106905, fixed in 3.11.5)."""
    gc.collect()


def test_the_tree_keeps_every_rule():
    assert _arch().problems_of() == []


def test_a_cycle_closed_inside_a_function_is_still_a_cycle(tmp_path):
    root = _package(
        tmp_path,
        {
            "ci_evals/a.py": "from ci_evals import b\n",
            "ci_evals/b.py": "def f():\n    from ci_evals import a  # start time\n    return a\n",
        },
    )
    assert _arch().problems_of(root) == [
        "file cycle: ci_evals.a <-> ci_evals.b",
        "unit cycle: a <-> b",
    ]


def test_a_function_level_import_needs_a_reason_and_a_type_checking_import_is_free(tmp_path):
    root = _package(
        tmp_path,
        {
            "ci_evals/low.py": "X = 1\n",
            "ci_evals/high.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ci_evals import low\n"
                "def f():\n    from ci_evals.low import X\n    return X\n"
                "def g():\n    # start time: loaded when g runs\n    from ci_evals import low\n"
                "    return low\n"
            ),
        },
    )
    assert _arch().problems_of(root) == [
        "src/ci_evals/high.py:5: lazy import of ci_evals.low without a reason"
    ]


def test_a_long_module_and_too_many_units_are_named(tmp_path):
    files = {f"ci_evals/m{i}.py": "" for i in range(17)}
    files["ci_evals/m0.py"] = "x = 1\n" * 401
    problems = _arch().problems_of(_package(tmp_path, files))
    assert problems == [
        "17 top-level units (at most 16)",
        "ci_evals.m0 has 401 lines (at most 400)",
    ]


def _check(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "arch_check.py"), "--check", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )


def test_the_check_exits_0_on_this_tree_and_1_on_a_broken_one(tmp_path):
    proc = _check()
    assert (proc.returncode, [ln for ln in proc.stdout.splitlines() if ln.startswith("FAIL")]) == (
        0,
        [],
    )
    assert "cycles: 0 between files, 0 between units" in proc.stdout
    root = _package(
        tmp_path,
        {"ci_evals/a.py": "from ci_evals import b\n", "ci_evals/b.py": "from ci_evals import a\n"},
    )
    proc = _check("--root", str(root))
    assert (proc.returncode, proc.stdout.splitlines()[-2:]) == (
        1,
        ["FAIL file cycle: ci_evals.a <-> ci_evals.b", "FAIL unit cycle: a <-> b"],
    )
