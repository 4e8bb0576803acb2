"""Choosing samples by id: ``--sample-id``, ``--sample-pattern`` and ``--only-failed FROM_RESULTS``.

A run narrowed this way is a *partial run*: summary.json carries a ``selection`` block
(``{"by", "selected", "total"}``) and the verdict's reason ends with ``partial run: 2 of 6 samples
(...)``, so the console, summary.md and the PR comment all say the gate was checked on a subset.

``--sample-pattern`` is a glob over the whole id (``capital-*``; ``fnmatchcase``), or a regular
expression searched in the id when it starts with ``re:`` (``re:^cap|jp$``; under the time limit of
ci_evals._util.rx). An id or a pattern that selects nothing is a one-line error (exit 2).

``--only-failed DIR`` reads an earlier results folder as untrusted input through the checked
readers (summary.json via ``read_summary``, each results.jsonl record via ``record_problem``): it
must belong to the same suite; the samples it re-runs are those with a failing or errored grade,
or a target error, in any run or model.
"""

from __future__ import annotations

from collections.abc import Callable
from fnmatch import fnmatchcase
from pathlib import Path
from typing import TYPE_CHECKING

from ci_evals._util import rx
from ci_evals._util.errors import ConfigError
from ci_evals._util.text import some_ids
from ci_evals.results.files import RESULTS, Trust, foreign_shape, iter_records, read_summary

if TYPE_CHECKING:
    from ci_evals.run.options import SuiteOptions

IDS_SHOWN = 5


def id_matcher(pattern: str) -> Callable[[str], bool]:
    """A predicate on sample ids for ``--sample-pattern`` (a glob, or ``re:REGEX``)."""
    if not pattern.startswith("re:"):

        def glob(sid: str) -> bool:
            return fnmatchcase(sid, pattern)

        glob.pattern = pattern  # type: ignore[attr-defined]  # named in "matches nothing"
        return glob
    try:
        compiled = rx.compile_pattern(pattern[3:])
    except ValueError as exc:
        raise ConfigError(f"--sample-pattern: invalid regular expression: {exc}") from None

    def match(sid: str) -> bool:
        try:
            return rx.search(compiled, sid) is not None
        except rx.RegexTimeout as exc:
            raise ConfigError(f"--sample-pattern: {exc}") from None

    match.pattern = pattern  # type: ignore[attr-defined]
    return match


def failed_sample_ids(folder: Path) -> tuple[str, set[str]]:
    """(suite name, ids of the failing and errored samples) of an earlier results folder, read as
    another run's (:mod:`ci_evals.results.files`: bounded, checked, one line naming file:line)."""
    summary = read_summary(folder, Trust.OTHER)
    path = folder / RESULTS
    if not path.is_file():
        raise ConfigError(f"no {RESULTS} in this folder", file=str(folder))
    failed: set[str] = set()
    for n, rec in iter_records(path, Trust.OTHER):
        with foreign_shape(f"{path}:{n + 1}", RESULTS):
            if rec.get("error") or any(
                not g.get("passed") or g.get("error") for g in rec["grades"].values()
            ):
                failed.add(str(rec["sample_id"]))
    return str(summary.get("suite")), failed


def plan(
    args: SuiteOptions,
) -> tuple[set[str] | None, Callable[[str], bool] | None, list[str], str | None]:
    """From the run's options: (ids to keep or None, id predicate or None, what chose them, FROM's suite)."""
    ids = {str(i) for i in args.sample_id} if args.sample_id else None
    by: list[str] = []
    if ids is not None:
        by.append(
            "--sample-id " + ", ".join(sorted(ids))
            if len(ids) <= IDS_SHOWN
            else f"--sample-id ×{len(ids)}"
        )
    pattern = args.sample_pattern
    matcher = id_matcher(pattern) if pattern is not None else None
    if pattern is not None:
        by.append(f"--sample-pattern {pattern}")
    from_suite = None
    only = args.only_failed
    if only is not None:
        from_suite, failed = failed_sample_ids(only)
        if not failed:
            raise ConfigError(
                "nothing to re-run: no sample failed or errored in this folder", file=str(only)
            )
        if ids is not None and not ids & failed:
            raise ConfigError(
                f"none of the --sample-id ids failed in this folder ({some_ids(ids, IDS_SHOWN)})",
                file=str(only),
            )
        ids = failed if ids is None else ids & failed
        by.append(f"--only-failed {only}")
    return ids, matcher, by, from_suite
