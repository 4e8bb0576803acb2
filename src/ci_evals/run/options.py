"""The options of one run: the ``run`` command's flags, and the typed :class:`SuiteOptions` they set.

The CLI adds these flags to its ``run`` command; the Action builds a :class:`SuiteOptions` from its
inputs and parses only its free-form ``args`` input with the same flags, so both run a suite
through :func:`ci_evals.run.session.run_suite` with the same options. Only the standard library,
the leaf :mod:`ci_evals.config.rates` (the defaults) and the exit codes (as light) are imported
here: ``ci-evals --version`` and ``--help`` stay instant.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import NoReturn

from ci_evals.config.rates import DEFAULT_MAX_CONCURRENT
from ci_evals.run.exits import ExitCode


def _positive(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {n}")
    return n


def _non_negative(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {n}")
    return n


def _shard(text: str) -> tuple[int, int]:
    k, sep, n = text.partition("/")
    if (
        not sep
        or not (k + n).isascii()
        or not k.isdigit()
        or not n.isdigit()
        or not 1 <= int(k) <= int(n)
    ):
        raise argparse.ArgumentTypeError(f"expected K/N with 1 <= K <= N, got {text!r}")
    return int(k), int(n)


def _finite_positive(text: str) -> float | None:
    """``text`` as a finite number above 0, else None."""
    try:
        value = float(text)
    except ValueError:
        return None
    return value if 0 < value < float("inf") else None


def _positive_float(text: str) -> float:
    value = _finite_positive(text)
    if value is None:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def _max_wait(text: str) -> float:
    value = _finite_positive(text)
    if (
        value is None or value < 1
    ):  # llm.limits.MIN_MAX_WAIT: no throttling answer is waited out in less
        raise argparse.ArgumentTypeError(
            f"expected a number of seconds of at least 1, got {text!r}"
        )
    return value


def _rate(text: str) -> tuple[str, float]:
    """``N`` (every endpoint) or ``PROVIDER=N`` / ``URL=N``."""
    key, sep, number = text.rpartition("=")
    key = key.strip() if sep else "*"
    value = _finite_positive(number)
    if value is None:
        raise argparse.ArgumentTypeError(
            f"expected a positive number, optionally after PROVIDER= or URL=, got {text!r}"
        )
    if key not in ("*", "openai", "anthropic", "google") and not key.startswith(
        ("http://", "https://")
    ):
        raise argparse.ArgumentTypeError(
            f"{key!r} is not a provider (openai, anthropic, google) or a base URL"
        )
    return key, value


class OneLineParser(argparse.ArgumentParser):
    """argparse whose usage errors are one line (exit 2), like every other configuration error."""

    def error(
        self, message: str
    ) -> NoReturn:  # argparse's hook; the usage block is one --help away
        self.exit(ExitCode.CONFIG, f"error: {self.prog}: {message} (see '{self.prog} --help')\n")


def add_gate_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--gate",
        action="append",
        default=None,
        metavar="GATE",
        help='add a gate, "METRIC [AGGREGATION] OP VALUE", e.g. "reward avg_score gte 0.75" '
        "(repeatable)",
    )


def add_run_flags(parser: argparse.ArgumentParser) -> None:
    """The ``run`` command's flags (every field of :class:`SuiteOptions`)."""
    parser.add_argument(
        "--output", "-o", type=Path, default=None, help="results folder (default ci-evals-results/)"
    )
    parser.add_argument(
        "--max-concurrent",
        type=_positive,
        default=None,
        help=f"samples in flight (default: YAML, else {DEFAULT_MAX_CONCURRENT})",
    )
    parser.add_argument(
        "--max-samples", type=_non_negative, default=None, help="run only the first N samples"
    )
    parser.add_argument(
        "--sample-tags", default=None, help="comma-separated tags; run samples having any of them"
    )
    parser.add_argument(
        "--sample-id",
        action="append",
        default=None,
        metavar="ID",
        help="run only the sample with this id (repeatable): a partial run",
    )
    parser.add_argument(
        "--sample-pattern",
        default=None,
        metavar="GLOB_OR_REGEX",
        help="run only samples whose id matches this glob (capital-*), or this regex with "
        "re: (re:^cap): a partial run",
    )
    parser.add_argument(
        "--only-failed",
        type=Path,
        default=None,
        metavar="FROM_RESULTS",
        help="re-run only the failing and errored samples of an earlier results folder "
        "(results go to FROM_RESULTS-rerun/ unless --output): a partial run",
    )
    parser.add_argument(
        "--num-runs", type=_positive, default=None, help="repeat each sample N times"
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="run everything but post nothing; print the PR comment",
    )
    parser.add_argument(
        "--no-cache", action="store_true", help="do not read or write the LLM response cache"
    )
    parser.add_argument(
        "--baseline", type=Path, default=None, help="an earlier results folder to compare with"
    )
    parser.add_argument(
        "--shard", type=_shard, default=None, help="run shard K of N (stable hash of the sample id)"
    )
    parser.add_argument(
        "--resume",
        type=Path,
        default=None,
        metavar="DIR",
        help="finish an interrupted run in DIR (only missing samples run)",
    )
    parser.add_argument(
        "--max-errors",
        type=_non_negative,
        default=None,
        metavar="N",
        help="errored samples each gate (and a run without gates) tolerates (default: YAML, else 0)",
    )
    parser.add_argument(
        "--quiet", "-q", action="store_true", help="no progress and no table; just the verdict"
    )
    parser.add_argument(
        "--rpm",
        type=_rate,
        action="append",
        default=None,
        metavar="[PROVIDER|URL=]N",
        help="requests per minute an LLM endpoint allows (your tier); e.g. 500 or anthropic=50",
    )
    parser.add_argument(
        "--tpm",
        type=_rate,
        action="append",
        default=None,
        metavar="[PROVIDER|URL=]N",
        help="tokens per minute an LLM endpoint allows; e.g. 200000 or openai=30000",
    )
    parser.add_argument(
        "--max-wait",
        type=_max_wait,
        default=None,
        metavar="SECONDS",
        help="how long one LLM call may stay throttled (429) before it errors (default 600)",
    )
    parser.add_argument(
        "--model-handle",
        default=None,
        metavar="HANDLE",
        help="run only this one of the target's model_handles",
    )
    add_gate_flag(parser)


class SuiteOptions(argparse.Namespace):
    """What one run of one suite is asked to do beyond its YAML (each field is a ``run`` flag).

    A typed namespace rather than a dataclass: ``dataclasses`` would cost the CLI's start time.
    Unset fields keep the class defaults below.
    """

    output: Path | None = None
    max_concurrent: int | None = None
    max_samples: int | None = None
    sample_tags: str | None = None
    sample_id: list[str] | None = None
    sample_pattern: str | None = None
    only_failed: Path | None = None
    num_runs: int | None = None
    dry_run: bool = False
    no_cache: bool = False
    baseline: Path | None = None
    shard: tuple[int, int] | None = None
    resume: Path | None = None
    max_errors: int | None = None
    quiet: bool = False
    rpm: list[tuple[str, float]] | None = None
    tpm: list[tuple[str, float]] | None = None
    max_wait: float | None = None
    gate: list[str] | None = None
    model_handle: str | None = None
    suites: list[str] | None = None

    @classmethod
    def from_namespace(cls, ns: argparse.Namespace) -> SuiteOptions:
        return cls(**{k: v for k, v in vars(ns).items() if k in cls.__annotations__})

    def absolute(self) -> SuiteOptions:
        """These options with every folder made absolute, once, before any user code runs: a grader
        calling ``os.chdir`` must not send the reports (or the resume, baseline) elsewhere."""
        for name in ("output", "only_failed", "baseline", "resume"):
            value = getattr(self, name)
            if value is not None:
                setattr(self, name, absolute(value))
        return self


def absolute(path: Path) -> Path:
    """``path`` against the current folder, without following links (``os.path.abspath``)."""
    return Path(os.path.abspath(path))


def parse_run_flags(argv: list[str], prog: str = "ci-evals run") -> SuiteOptions:
    """``run`` flags (no suite paths) as options; a bad flag exits 2 with one line, like the CLI."""
    parser = OneLineParser(prog=prog, add_help=False)
    add_run_flags(parser)
    return parser.parse_args(argv, namespace=SuiteOptions())
