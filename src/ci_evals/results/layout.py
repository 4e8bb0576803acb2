"""Where results go: the default folder, one subfolder per suite when a run has several, and the
suite files a run's paths and globs name. Shared by the CLI and the Action.
"""

from __future__ import annotations

import glob
import hashlib
import os
import re
from collections import Counter
from pathlib import Path

from ci_evals._util.errors import ConfigError

DEFAULT_OUTPUT = Path("ci-evals-results")


def expand_suites(patterns: list[str]) -> list[Path]:
    """Paths and globs -> suite files, in order, without duplicates. A glob matching nothing is an error."""
    out: list[Path] = []
    for pat in patterns:
        if any(ch in pat for ch in "*?["):
            found = sorted(glob.glob(pat, recursive=True))
            if not found:
                raise ConfigError(f"no suite file matches '{pat}'")
            out.extend(Path(f) for f in found)
        else:
            out.append(Path(pat))
    seen: set[Path] = set()
    unique = []
    for p in out:
        if p.resolve() not in seen:
            seen.add(p.resolve())
            unique.append(p)
    return unique


def suite_slug(suite_file: str | Path, base: str | Path | None = None) -> str:
    """A results subfolder name for a suite: its path (relative to ``base``) without the suffix,
    e.g. ``evals/a/suite.yaml`` -> ``evals-a-suite`` (see :func:`unique_slugs` for several)."""
    path = (
        os.path.relpath(str(suite_file), str(base))
        if base is not None
        else os.path.normpath(str(suite_file))
    )
    stem = os.path.splitext(path)[0]
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", stem).strip("-.") or "suite"


def unique_slugs(
    suite_files: list[str] | list[Path], base: str | Path | None = None
) -> dict[str, str]:
    """``{str(path): folder name}`` for the suites of one run, distinct for distinct paths.

    Names that would be shared (``evals/a-b/suite.yaml`` and ``evals/a/b/suite.yaml`` both read
    ``evals-a-b-suite``; ``A`` and ``a`` on a case-blind disk) get 8 hex digits of their path's
    sha256 each; the others keep the readable name.
    """
    slugs = {str(p): suite_slug(p, base) for p in suite_files}
    counts = Counter(s.lower() for s in slugs.values())
    for path, slug in slugs.items():
        if counts[slug.lower()] > 1:
            norm = os.path.normpath(os.path.relpath(path, str(base)) if base is not None else path)
            slugs[path] = (
                f"{slug}-{hashlib.sha256(norm.encode('utf-8', 'surrogatepass')).hexdigest()[:8]}"
            )
    return slugs
