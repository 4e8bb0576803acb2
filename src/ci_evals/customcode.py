"""Loading user code: ``file.py:function`` references, ``custom_evaluators.py``, setup scripts.

Grader files written for letta-evals import ``letta_evals.decorators`` and ``letta_evals.models``;
when letta-evals is not installed, :func:`install_letta_evals_shim` maps those modules onto ours so
such files load unchanged.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path
from typing import Any

from ci_evals.errors import ConfigError

_loaded: dict[Path, types.ModuleType] = {}


def install_letta_evals_shim() -> None:
    """Make ``letta_evals.decorators``/``letta_evals.models`` importable when letta-evals is absent."""
    if "letta_evals" in sys.modules:
        return
    if importlib.util.find_spec("letta_evals") is not None:
        return
    import ci_evals.decorators as decorators
    import ci_evals.models as models
    import ci_evals.rewards as rewards

    pkg = types.ModuleType("letta_evals")
    pkg.__path__ = []  # a package, so submodule imports resolve from sys.modules
    shim_models = types.ModuleType("letta_evals.models")
    shim_models.GradeResult = models.GradeResult
    shim_models.Sample = models.Sample
    shim_models.SuiteSpec = dict  # setup scripts only annotate with it
    pkg.decorators = decorators
    pkg.models = shim_models
    for name, value in vars(decorators).items():
        if not name.startswith("_"):
            setattr(pkg, name, value)
    for name in ("GradeResult", "Sample"):
        setattr(pkg, name, getattr(models, name))
    for name in ("RewardOutput", "RewardContext"):  # letta-evals 0.21+ reward composers import these
        setattr(pkg, name, getattr(rewards, name))
        setattr(shim_models, name, getattr(rewards, name))
    from ci_evals.trajectory import Message

    shim_models.LettaMessageUnion = Message  # custom extractors get ci-evals messages, turn by turn
    extractors = _extractors_shim()
    pkg.extractors = extractors
    sys.modules.update(
        {"letta_evals": pkg, "letta_evals.decorators": decorators, "letta_evals.models": shim_models,
         "letta_evals.extractors": extractors, "letta_evals.extractors.builtin": extractors}
    )


def _extractors_shim() -> types.ModuleType:
    """``letta_evals.extractors(.builtin)``: the built-in extractors, callable as letta-evals calls them,
    ``fn(trajectory_turns, config_dict)``, so a custom extractor can build on one."""
    from ci_evals.extractors import BUILTINS
    from ci_evals.trajectory import Trajectory

    mod = types.ModuleType("letta_evals.extractors")
    mod.__path__ = []

    def wrap(fn, cfg_model):
        def builtin(trajectory, config=None, *_):
            return fn(Trajectory(turns=list(trajectory)), cfg_model.model_validate(config or {}))

        builtin.__name__ = fn.__name__
        return builtin

    for name, (fn, cfg_model, _) in BUILTINS.items():
        if name != "memory_block":  # it reads the agent's memory, not the turns
            setattr(mod, name, wrap(fn, cfg_model))
    import ci_evals.decorators as decorators

    mod.extractor = decorators.extractor
    mod.builtin = mod
    return mod


def load_module(path: Path, *, key: str | None = None) -> types.ModuleType:
    """Import a user file once (by resolved path); its decorators register as a side effect."""
    path = path.resolve()
    if path in _loaded:
        return _loaded[path]
    if not path.exists():
        raise ConfigError("file not found", file=str(path), key=key)
    if path.suffix != ".py":
        raise ConfigError("expected a .py file", file=str(path), key=key)
    from ci_evals.yamlio import regular_file

    regular_file(path, "file", key=key)  # importing a FIFO would wait forever
    install_letta_evals_shim()
    name = f"_ci_evals_user_{path.stem}_{abs(hash(path)) % 10**8}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    parent = str(path.parent)
    added = parent not in sys.path
    if added:
        sys.path.insert(0, parent)  # lets the file import its neighbours
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        sys.modules.pop(name, None)
        raise ConfigError(f"syntax error: {exc.msg}", file=str(path), line=exc.lineno, key=key) from None
    except (Exception, SystemExit, KeyboardInterrupt, GeneratorExit) as exc:  # an escape is the file's error
        sys.modules.pop(name, None)
        hint = ""
        if isinstance(exc, ImportError) and "letta_client" in str(exc):
            from importlib.metadata import version

            hint = (f" (the installed letta-client {version('letta-client')} has no such name: this file was "
                    "written for another letta-client version, such as 0.x before letta-evals 0.8)")
        raise ConfigError(
            f"importing it failed: {type(exc).__name__}: {exc}{hint}", file=str(path), key=key
        ) from None
    _loaded[path] = module
    return module


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
