"""Loading user code: ``file.py:function`` references, ``custom_evaluators.py``, setup scripts.

Grader files written for letta-evals import ``letta_evals.decorators`` and ``letta_evals.models``:
the suite loader installs :mod:`ci_evals.suite.letta_evals_shim` before any of them is loaded.
User files (and the neighbours they import while loading) are imported without writing bytecode: a
run must leave nothing in the user's repository but its results folder (no ``__pycache__/``).
"""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path
from typing import Any

from ci_evals._util.errors import ConfigError
from ci_evals.config.yamlio import regular_file
from ci_evals.usercode.contain import refill_stdio

_loaded: dict[Path, types.ModuleType] = {}
_ran = False  # a user file's top level was executed here, even one that then failed to import


def load_module(path: Path, *, key: str | None = None) -> types.ModuleType:
    """Import a user file once (by resolved path); its decorators register as a side effect."""
    path = path.resolve()
    if path in _loaded:
        return _loaded[path]
    if not path.exists():
        raise ConfigError("file not found", file=str(path), key=key)
    if path.suffix != ".py":
        raise ConfigError("expected a .py file", file=str(path), key=key)
    regular_file(path, "file", key=key)  # importing a FIFO would wait forever
    name = f"_ci_evals_user_{path.stem}_{abs(hash(path)) % 10**8}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:  # a .py path always has one (SourceFileLoader)
        raise ConfigError("cannot be imported", file=str(path), key=key)
    loader = spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    parent = str(path.parent)
    added = parent not in sys.path
    if added:
        sys.path.insert(0, parent)  # lets the file import its neighbours
    writes_bytecode, sys.dont_write_bytecode = (
        sys.dont_write_bytecode,
        True,
    )  # no __pycache__/ in the user's repo
    global _ran
    _ran = True
    try:
        loader.exec_module(module)
    except SyntaxError as exc:
        sys.modules.pop(name, None)
        raise ConfigError(
            f"syntax error: {exc.msg}", file=str(path), line=exc.lineno, key=key
        ) from None
    except (
        BaseException
    ) as exc:  # an escape (SystemExit, CancelledError, any BaseException) is the file's error
        sys.modules.pop(name, None)
        hint = ""
        if isinstance(exc, ImportError) and "letta_client" in str(exc):
            from importlib.metadata import version

            hint = (
                f" (the installed letta-client {version('letta-client')} has no such name: this file was "
                "written for another letta-client version, such as 0.x before letta-evals 0.8)"
            )
        raise ConfigError(
            f"importing it failed: {type(exc).__name__}: {exc}{hint}", file=str(path), key=key
        ) from None
    finally:
        sys.dont_write_bytecode = writes_bytecode
        refill_stdio()  # the file's top level may have closed them
    _loaded[path] = module
    return module


def ran_user_code() -> bool:
    """Whether this process executed a user file (its import failing or not): its objects may
    hold what only the interpreter's teardown finishes, such as a file's buffered writes."""
    return _ran


def loaded_paths() -> list[Path]:
    """Every user file imported so far (resolved): the code a ``--resume`` fingerprint covers."""
    return list(_loaded)


def split_ref(ref: str) -> tuple[str, str] | None:
    """``"dir/file.py:func"`` -> (``"dir/file.py"``, ``"func"``); None for a bare name."""
    path, sep, attr = ref.rpartition(":")
    if not sep or not path.endswith(".py"):
        return None
    return path, attr


def load_object(ref: str, base_dir: Path, *, key: str | None = None) -> Any:
    """Load ``file.py:name`` (path relative to ``base_dir``) and return the named object."""
    parts = split_ref(ref)
    if parts is None:
        raise ConfigError(f"'{ref}' is not a 'file.py:function' reference", key=key)
    path, attr = parts
    file = Path(path) if Path(path).is_absolute() else base_dir / path
    module = load_module(file, key=key)
    if not hasattr(module, attr):
        names = [n for n in vars(module) if not n.startswith("_")][:10]
        raise ConfigError(
            f"'{attr}' not found in {file.name} (defined: {', '.join(names) or 'nothing'})",
            file=str(file),
            key=key,
        )
    return getattr(module, attr)
