"""Loading a suite into runnable parts: :func:`load_suite`.

It does everything that can be checked without calling anything: YAML syntax, unknown keys (with
the closest valid key and the line), the dataset (every row), the target and grader specs,
extractor configs, custom code, prompt files, per-sample rubric variables, and gates referring to
real graders. ``validate`` and ``run`` share it, so a suite that validates runs. The YAML's models
are in :mod:`ci_evals.suite.spec`, what loading gives in :mod:`ci_evals.suite.loaded`, the metrics'
rules and the gates' budgets in :mod:`ci_evals.suite.rules`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, TypeVar

from ci_evals._util import forks
from ci_evals._util.errors import ConfigError, did_you_mean
from ci_evals._util.registry import TARGETS
from ci_evals._util.text import shorten
from ci_evals.config.budget import Budget
from ci_evals.config.dataset import Dataset, Selection
from ci_evals.config.specs import Context, validate_model
from ci_evals.config.yamlio import load_yaml
from ci_evals.core.sample import Sample
from ci_evals.graders.base import Grader, build_grader
from ci_evals.graders.extractors import Extractor, make_extractor
from ci_evals.graders.reward import load_reward
from ci_evals.results.measures import BUILTINS
from ci_evals.suite import letta_evals_shim
from ci_evals.suite.dialects import (
    Translated,
    gates_from_flags,
    translate,
    typed_gates_of,
    with_cleanup,
)
from ci_evals.suite.loaded import GraderSlot, LoadedSuite
from ci_evals.suite.rules import (
    apply_budgets,
    builtin_rules,
    check_max_increase,
    gate_key,
    metric_rule,
    suite_gates,
)
from ci_evals.suite.spec import SuiteSpec
from ci_evals.usercode.load import load_object

T = TypeVar("T")


def load_suite(
    path: str | Path,
    *,
    offline: bool = False,
    max_samples: int | None = None,
    sample_tags: list[str] | None = None,
    num_runs: int | None = None,
    shard: tuple[int, int] | None = None,
    cache_dir: Path | None | Literal[False] = None,
    max_errors: int | None = None,
    extra_gates: list[str] | None = None,
    sample_ids: set[str] | None = None,
    id_match: Callable[[str], bool] | None = None,
    meanwhile: Callable[[], None] | None = None,
) -> LoadedSuite:
    """Load and fully validate a suite; raise ConfigError naming file, line and key on any problem.

    CLI overrides (``max_samples``, ``sample_tags``, ``num_runs``) win over the YAML.
    ``cache_dir=False`` turns the LLM cache off; None uses the YAML's ``cache`` setting.
    ``max_errors`` (``--max-errors``) sets the error budget of every gate and of the run.
    ``extra_gates`` (``--gate "reward avg_score gte 0.75"``) adds gates to the suite's own.
    ``sample_ids`` / ``id_match`` keep only those samples (``--sample-id``, ``--sample-pattern``).
    ``meanwhile()``: work to do while another process scans a large dataset, if one does
    (:data:`SCAN_BESIDE_BYTES`); a failure there is the caller's, raised as usual.
    """
    path = Path(path)
    file = str(path)
    raw, lines = load_yaml(path)
    letta_evals_shim.install()  # before any user file is imported
    try:
        return _load(
            path,
            file,
            raw,
            lines,
            offline=offline,
            max_samples=max_samples,
            sample_tags=sample_tags,
            num_runs=num_runs,
            shard=shard,
            cache_dir=cache_dir,
            max_errors=max_errors,
            extra_gates=extra_gates,
            sample_ids=sample_ids,
            id_match=id_match,
            meanwhile=meanwhile,
        )
    except ConfigError as exc:
        _locate(exc, file, lines)
        raise
    except (
        OSError
    ) as exc:  # a path the suite names that the system refuses (too long, no permission)
        name = shorten(str(exc.filename or ""), 80)
        raise ConfigError(f"cannot open '{name}': {exc.strerror or exc}", file=file) from None


def _locate(exc: ConfigError, file: str, lines: dict[str, int]) -> None:
    """Name the suite file, and the line of the key (or of its nearest parent), when an error lacks them."""
    if exc.file is None:
        exc.file = file
    exc.file = shorten(exc.file, 200)
    if exc.key:
        exc.key = shorten(exc.key, 80)  # a key may be a user's 100 KB string
    if exc.line is not None or not exc.key or exc.file != file:
        return
    key = exc.key
    while key and key not in lines:
        key = key[: key.rfind("[")] if key.endswith("]") else key.rpartition(".")[0]
    exc.line = lines.get(key)


def _load(
    path: Path,
    file: str,
    raw: Any,
    lines: dict[str, int],
    *,
    offline: bool,
    max_samples: int | None,
    sample_tags: list[str] | None,
    num_runs: int | None,
    shard: tuple[int, int] | None,
    cache_dir: Path | None | Literal[False],
    max_errors: int | None = None,
    extra_gates: list[str] | None = None,
    sample_ids: set[str] | None = None,
    id_match: Callable[[str], bool] | None = None,
    meanwhile: Callable[[], None] | None = None,
) -> LoadedSuite:
    if not isinstance(raw, dict):
        raise ConfigError(
            "a suite file must be a YAML mapping (name, dataset, target, graders, gate)", file=file
        )
    translated, dialect = translate(
        raw, file, lines, offline=offline
    )  # `raw` stays as the user wrote it
    spec: SuiteSpec = validate_model(SuiteSpec, translated, "", file, lines)
    base = path.resolve().parent

    if cache_dir is None:
        cache_dir = (
            None
            if spec.cache is False
            else (
                base / spec.cache if isinstance(spec.cache, str) else Path.cwd() / ".ci-evals-cache"
            )
        )  # resolved now: user code may chdir
    ctx = Context(
        base,
        path,
        cache_dir=cache_dir or None,
        offline=offline,
        pricing={k: v.model_dump() for k, v in spec.pricing.items()},
    )
    ctx.suite_raw = raw
    ctx.budget = Budget(  # a shard of a matrix spends its share of the run's max_cost_usd
        max_steps=spec.max_steps,
        max_tokens=spec.max_tokens,
        max_cost_usd=spec.max_cost_usd / shard[1]
        if spec.max_cost_usd is not None and shard
        else spec.max_cost_usd,
        shards=shard[1] if shard else 1,
    )
    if num_runs is not None:
        spec.num_runs = num_runs
    selection: Selection = {
        "sample_tags": sample_tags if sample_tags is not None else spec.sample_tags,
        "max_samples": max_samples if max_samples is not None else spec.max_samples,
        "shard": shard,
        "sample_ids": sample_ids,
        "id_match": id_match,
        "needs_ids": any(g.is_regression for g in [*spec.gates, spec.gate] if g),
    }
    early = _scan_beside(ctx.resolve(spec.dataset), selection)
    try:
        return _load_parts(
            path,
            file,
            lines,
            spec,
            ctx,
            dialect,
            selection,
            early,
            max_errors=max_errors,
            extra_gates=extra_gates,
            meanwhile=meanwhile,
        )
    finally:
        if early is not None:
            early.cancel()  # joined already, unless something failed first


def _load_parts(
    path: Path,
    file: str,
    lines: dict[str, int],
    spec: SuiteSpec,
    ctx: Context,
    dialect: Translated,
    selection: Selection,
    early: forks.Beside | None,
    *,
    max_errors: int | None,
    extra_gates: list[str] | None,
    meanwhile: Callable[[], None] | None,
) -> LoadedSuite:
    """The rest of :func:`_load`, in the order its errors are reported: setup script, target,
    graders, gates, then the dataset (scanned here, or adopted from ``early``)."""
    base = ctx.base_dir
    setup = None
    if spec.setup_script:
        setup = load_object(spec.setup_script, base, key="setup_script")
        if not callable(setup):
            raise ConfigError(
                f"'{spec.setup_script}' is not a function", file=file, key="setup_script"
            )

    # Target
    traw = spec.target
    if "kind" not in traw:
        raise ConfigError(
            "missing 'kind'" + did_you_mean("", TARGETS.names()),
            file=file,
            key="target",
            line=lines.get("target"),
        )
    tcls = TARGETS.get(str(traw["kind"]), key="target.kind")
    tspec = validate_model(
        tcls.spec_model,
        with_cleanup(traw, dialect.cleanup, tcls, file, lines),
        "target",
        file,
        lines,
    )
    target = _construct(lambda: tcls(tspec, ctx), file, "target", lines)

    # Graders and their extractors
    graders: dict[str, tuple[Grader, Extractor]] = {}
    for name, graw in spec.graders.items():
        key = f"graders.{name}"
        grader = build_grader(name, graw, ctx, key=key, file=file, lines=lines)
        extractor = make_extractor(
            grader.spec.extractor,
            grader.spec.extractor_config,
            base,
            key=key,
            file=file,
            lines=lines,
        )
        graders[name] = (grader, extractor)

    # Gates
    names = list(graders)
    reward = (
        load_reward(dialect.reward, names, ctx, file, lines) if dialect.reward is not None else None
    )
    metrics = names + (["reward"] if reward else [])
    typed = typed_gates_of(dialect, metrics, file, lines)
    gates = suite_gates(spec, metrics, file, lines)
    own = len(gates)
    gates += gates_from_flags(extra_gates, [*metrics, *BUILTINS], file)

    def where(i: int) -> str:
        return gate_key(spec, i) if i < own else "--gate"

    builtins = builtin_rules(gates, metrics, file, lines, where)
    slots = {
        name: GraderSlot(name, g, x, metric_rule(name, g.spec, gates, file, lines))
        for name, (g, x) in graders.items()
    }
    check_max_increase(gates, {n: s.rule for n, s in slots.items()} | builtins, file, lines, where)
    for slot in slots.values():  # a judge asked K times marks each answer by the metric's own rule
        slot.grader.rule = slot.rule
    if reward is not None:
        reward.rule = metric_rule("reward", None, gates, file, lines)
    budget = apply_budgets(spec, [*gates, *typed], max_errors)

    # Dataset, scanned once: every row parsed, ids unique, per-sample grader checks.
    ds_path = ctx.resolve(spec.dataset)
    if (
        not ds_path.exists()
    ):  # say where it was looked for: paths in a suite are relative to the suite
        what = "dataset file not found"
        raise ConfigError(
            f"{what}: '{shorten(spec.dataset, 100)}', relative to the suite "
            f"({shorten(str(ds_path), 200)})",
            file=file,
            key="dataset",
            line=lines.get("dataset"),
        )
    if ds_path.is_dir():
        raise ConfigError(
            f"dataset is a folder, expected a .jsonl or .csv file: '{shorten(spec.dataset, 100)}', "
            f"relative to the suite ({shorten(str(ds_path), 200)})",
            file=file,
            key="dataset",
            line=lines.get("dataset"),
        )
    dataset = Dataset(ds_path, **selection)
    checkers = [g for g, _ in graders.values() if g.checks_samples()]
    if checkers:  # they see every selected sample, one at a time, in the file's order: scanned here
        if early is not None:
            early.cancel()  # its counts would come from the same scan: give its core back to this one

        def check(sample: Sample) -> None:
            for g in checkers:
                g.check_samples((sample,))

        dataset.scan(check)
    elif early is not None:
        if meanwhile is not None:
            meanwhile()
        dataset.total, dataset.count, dataset.unsharded = early.join()
    else:
        dataset.scan()

    suite = LoadedSuite(path, spec, ctx, dataset, target, slots, gates, lines, setup, *budget)
    suite.builtins = builtins
    suite.typed_gates, suite.reward, suite.dialect = typed, reward, dialect.dialect
    return suite


SCAN_BESIDE_BYTES = 2 << 20
"""A dataset file at least this large is scanned by a forked process while this one reads the
rest of the suite (100k rows: a 0.9 s scan, beside the replay target's 0.45 s for its outputs)."""


def _scan_beside(path: Path, selection: Selection) -> forks.Beside | None:
    """The dataset at ``path`` being scanned in another process, to give (rows, selected, selected
    before the shard), when it is large and a second core is free; else None (scanned in order).
    Any failure there (a bad row) is found again here, by the scan in order, and reported as usual."""
    try:
        if (
            path.suffix.lower() not in (".jsonl", ".csv")
            or not path.is_file()
            or path.stat().st_size < SCAN_BESIDE_BYTES
        ):
            return None
    except (OSError, ValueError):  # reported in order, where the dataset is checked
        return None

    def counts() -> tuple[int, int, int]:
        dataset = Dataset(path, **selection)
        dataset.scan()
        return dataset.total, dataset.count, dataset.unsharded

    side = forks.Beside(counts)
    return side if side.pid is not None else None


def _construct(make: Callable[[], T], file: str, key: str, lines: dict[str, int]) -> T:
    try:
        return make()
    except ConfigError as exc:
        exc.key = exc.key or key
        _locate(exc, file, lines)
        raise
