"""The Action's inputs: the ``INPUT_*`` variables GitHub sets (hyphens kept, ``INPUT_GITHUB-TOKEN``),
parsed and checked into one :class:`Inputs`; a bad one is an :class:`InputError` (exit 2, shown in
the step summary).
"""

from __future__ import annotations

import glob
import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path


class InputError(Exception):
    """An action input that cannot be used (exit 2, shown in the step summary)."""


@dataclass
class Inputs:
    """The action's inputs, parsed and checked."""

    suites: list[str]
    output_dir: Path
    max_concurrent: int | None = None
    token: str | None = None
    comment: str = "auto"
    fail_on_gate: bool = True
    baseline: str | None = None
    args: list[str] = field(default_factory=list)
    gates: list[str] = field(default_factory=list)  # the `gate` input: one `--gate` per line
    comment_key: str | None = None
    results: list[str] = field(default_factory=list)
    pr_number: int | None = None


def get_input(env: Mapping[str, str], name: str, default: str = "") -> str:
    """``INPUT_<NAME>`` as GitHub sets it (hyphens kept), falling back to underscores for local shells."""
    key = "INPUT_" + name.upper().replace(" ", "_")
    value = env.get(key)
    if value is None:
        value = env.get(key.replace("-", "_"))
    return default if value is None or value.strip() == "" else value.strip()


def _bool(name: str, raw: str) -> bool:
    low = raw.lower()
    if low in ("true", "yes", "1", "on"):
        return True
    if low in ("false", "no", "0", "off"):
        return False
    raise InputError(f"input '{name}' must be true or false, got {raw!r}")


def resolve_suites(spec: str) -> list[str]:
    """The suite files named by the ``suite`` input: paths or globs, one per line."""
    if not spec:
        raise InputError(
            "input 'suite' is required: a suite YAML path or a glob such as evals/**/suite.yaml"
        )
    found: list[str] = []
    for pattern in (p.strip() for p in spec.splitlines()):
        if not pattern:
            continue
        if glob.has_magic(pattern):
            matches = sorted(m for m in glob.glob(pattern, recursive=True) if os.path.isfile(m))
            if not matches:
                raise InputError(f"input 'suite': the glob {pattern!r} matches no file")
            found += [m for m in matches if m not in found]
        elif pattern not in found:
            found.append(pattern)
    return found


def resolve_results(spec: str) -> list[str]:
    """Finished results folders named by the ``results`` input (paths or globs, one per line)."""
    found: list[str] = []
    for pattern in (p.strip() for p in spec.splitlines()):
        if not pattern:
            continue
        matches = (
            sorted(glob.glob(pattern, recursive=True)) if glob.has_magic(pattern) else [pattern]
        )
        folders = [m for m in matches if (Path(m) / "summary.json").is_file()]
        if not folders:
            raise InputError(f"input 'results': no summary.json in {pattern!r}")
        found += [f for f in folders if f not in found]
    return found


def parse_inputs(env: Mapping[str, str]) -> Inputs:
    """Read and check every input; raise InputError naming the input at fault."""
    comment = get_input(env, "comment", "auto").lower()
    if comment not in ("auto", "always", "never"):
        raise InputError(f"input 'comment' must be auto, always or never, got {comment!r}")
    raw_max = get_input(env, "max-concurrent")
    max_concurrent = None
    if raw_max:
        if not (raw_max.isascii() and raw_max.isdigit()) or int(raw_max) < 1:
            raise InputError(f"input 'max-concurrent' must be a positive integer, got {raw_max!r}")
        max_concurrent = int(raw_max)
    results = resolve_results(get_input(env, "results"))
    raw_pr = get_input(env, "pr-number")
    if raw_pr and not (raw_pr.isascii() and raw_pr.isdigit()):
        raise InputError(f"input 'pr-number' must be a pull request number, got {raw_pr!r}")
    try:
        args = shlex.split(get_input(env, "args"))
    except ValueError as exc:
        raise InputError(f"input 'args' cannot be split like a shell line: {exc}") from None
    return Inputs(
        suites=[] if results else resolve_suites(get_input(env, "suite")),
        output_dir=Path(get_input(env, "output-dir", "ci-evals-results")),
        max_concurrent=max_concurrent,
        token=get_input(env, "github-token") or None,
        comment=comment,
        fail_on_gate=_bool("fail-on-gate", get_input(env, "fail-on-gate", "true")),
        baseline=get_input(env, "baseline") or None,
        args=args,
        gates=[g.strip() for g in get_input(env, "gate").splitlines() if g.strip()],
        comment_key=get_input(env, "comment-key") or None,
        results=results,
        pr_number=int(raw_pr) if raw_pr else None,
    )
