"""The suite YAML as strict pydantic models, and loading a suite into runnable parts.

:func:`load_suite` does everything that can be checked without calling anything: YAML syntax,
unknown keys (with the closest valid key and the line), the dataset (every row), the target and
grader specs, extractor configs, custom code, prompt files, per-sample rubric variables, and gates
referring to real graders. ``validate`` and ``run`` share it, so a suite that validates runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from ci_evals._util import forks
from ci_evals._util.errors import ConfigError, did_you_mean
from ci_evals._util.registry import TARGETS
from ci_evals._util.text import shorten
from ci_evals.config.dataset import Dataset
from ci_evals.config.rates import DEFAULT_MAX_WAIT, MIN_MAX_WAIT, check_rates
from ci_evals.config.specs import Context, Strict, validate_model
from ci_evals.config.yamlio import load_yaml
from ci_evals.core.rule import rule_text
from ci_evals.gating.gates import GateSpec
from ci_evals.graders.base import Grader, build_grader
from ci_evals.graders.extractors import Extractor, make_extractor
from ci_evals.graders.reward import load_reward
from ci_evals.suite import letta_evals_shim
from ci_evals.suite.dialects import gates_from_flags, translate, typed_gates_of, with_cleanup
from ci_evals.targets.base import Target
from ci_evals.usercode.load import load_object

Reducer = Literal["mean", "median", "max", "pass_at_k", "pass_all_k", "majority"]


class Price(Strict):
    input_per_mtok: float = 0.0
    output_per_mtok: float = 0.0


class RateLimit(Strict):
    """A provider's limits as the user knows them (its tier): requests and tokens per minute."""

    rpm: float | None = Field(default=None, gt=0)
    tpm: float | None = Field(default=None, gt=0)


class SuiteSpec(Strict):
    """Top level of a suite file. ``target`` and ``graders.*`` are validated per kind."""

    name: str
    description: str | None = None
    dataset: str
    target: dict[str, Any]
    graders: dict[str, dict[str, Any]]
    gate: GateSpec | None = None
    gates: list[GateSpec] = Field(default_factory=list)
    max_samples: int | None = Field(default=None, ge=0)
    sample_tags: list[str] | None = None
    num_runs: int = Field(default=1, ge=1)
    reducer: Reducer = "mean"
    max_concurrent: int | None = Field(default=None, ge=1)
    setup_script: str | None = None
    output: str | None = None
    cache: bool | str = True
    pricing: dict[str, Price] = Field(default_factory=dict)
    max_errors: int | None = Field(default=None, ge=0)
    max_error_rate: float | None = Field(default=None, ge=0, le=1)
    rate_limits: dict[str, RateLimit] = Field(default_factory=dict)
    max_wait: float | None = Field(default=None, ge=MIN_MAX_WAIT)

    @field_validator("rate_limits")
    @classmethod
    def _rate_keys(cls, v: dict) -> dict:
        for key in v:
            if key not in ("*", "openai", "anthropic", "google") and not key.startswith(
                ("http://", "https://")
            ):
                raise ValueError(
                    f"rate_limits key {key!r} is not '*', a provider (openai, anthropic, google) "
                    "or a base URL (http://... or https://...)"
                )
        return v

    @field_validator("graders")
    @classmethod
    def _some(cls, v: dict) -> dict:
        if not v:
            raise ValueError("a suite needs at least one grader")
        return v

    @model_validator(mode="after")
    def _rates_fit_max_wait(self) -> SuiteSpec:
        rates = {key: (lim.rpm, lim.tpm) for key, lim in self.rate_limits.items()}
        if problem := check_rates(rates, self.max_wait or DEFAULT_MAX_WAIT, "rate_limits"):
            raise ValueError(problem)
        return self


@dataclass
class GraderSlot:
    """A grader with its extractor and its per-sample pass rule."""

    name: str
    grader: Grader
    extractor: Extractor
    rule: tuple[str, float]

    @property
    def rule_text(self) -> str:
        return rule_text(*self.rule)


@dataclass
class LoadedSuite:
    path: Path
    spec: SuiteSpec
    ctx: Context
    dataset: Dataset
    target: Target
    graders: dict[str, GraderSlot]
    gates: list[GateSpec]
    lines: dict[str, int] = field(default_factory=dict)
    setup: Any = None
    max_errors: int | None = 0  # the run's error budget when there is no gate
    max_error_rate: float | None = None
    typed_gates: list = field(default_factory=list)  # letta-evals weighted_average / logical gates
    reward: Any = (
        None  # a letta-evals 0.21+ reward (ci_evals.graders.reward.Reward), the metric `reward`
    )
    dialect: str = "ci-evals"

    @property
    def metric_names(self) -> list[str]:
        """Every metric a result record has: the graders', then ``reward`` when the suite has one."""
        return list(self.graders) + (["reward"] if self.reward is not None else [])

    @property
    def needs_memory(self) -> bool:
        return any(
            s.extractor.needs_memory or getattr(s.grader, "needs_memory", False)
            for s in self.graders.values()
        )


def _line(lines: dict[str, int], key: str) -> int | None:
    return lines.get(key)


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
    id_match=None,
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
    max_samples,
    sample_tags,
    num_runs,
    shard,
    cache_dir,
    max_errors=None,
    extra_gates=None,
    sample_ids=None,
    id_match=None,
    meanwhile=None,
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
    if num_runs is not None:
        spec.num_runs = num_runs
    selection = {
        "sample_tags": sample_tags if sample_tags is not None else spec.sample_tags,
        "max_samples": max_samples if max_samples is not None else spec.max_samples,
        "shard": shard,
        "sample_ids": sample_ids,
        "id_match": id_match,
        "needs_ids": any(
            g.max_drop is not None or g.max_regressions is not None
            for g in [*spec.gates, spec.gate]
            if g
        ),
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
    dialect,
    selection: dict[str, Any],
    early: forks.Beside | None,
    *,
    max_errors,
    extra_gates,
    meanwhile,
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
            line=_line(lines, "target"),
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
    gates = ([spec.gate] if spec.gate else []) + list(spec.gates)
    names = list(graders)
    reward = (
        load_reward(dialect.reward, names, ctx, file, lines) if dialect.reward is not None else None
    )
    metrics = names + (["reward"] if reward else [])
    typed = typed_gates_of(dialect, metrics, file, lines)
    for i, gate in enumerate(gates):
        gkey = (
            "gate"
            if (spec.gate is not None and i == 0)
            else f"gates[{i - (1 if spec.gate else 0)}]"
        )
        if gate.metric_key is None:
            gate.metric_key = names[0]
        elif gate.metric_key not in metrics:
            raise ConfigError(
                f"metric_key '{shorten(gate.metric_key, 60)}' names no grader{did_you_mean(gate.metric_key, metrics)}",
                file=file,
                key=f"{gkey}.metric_key",
                line=_line(lines, f"{gkey}.metric_key"),
            )
    gates += gates_from_flags(extra_gates, metrics, file)

    slots = {
        name: GraderSlot(name, g, x, metric_rule(name, g.spec, gates, file, lines))
        for name, (g, x) in graders.items()
    }
    for slot in slots.values():  # a judge asked K times marks each answer by the metric's own rule
        slot.grader.rule = slot.rule
    if reward is not None:
        reward.rule = metric_rule(
            "reward", SimpleNamespace(pass_threshold=None), gates, file, lines
        )
    budget = _apply_budgets(spec, gates + typed, max_errors)

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
            line=_line(lines, "dataset"),
        )
    if ds_path.is_dir():
        raise ConfigError(
            f"dataset is a folder, expected a .jsonl or .csv file: '{shorten(spec.dataset, 100)}', "
            f"relative to the suite ({shorten(str(ds_path), 200)})",
            file=file,
            key="dataset",
            line=_line(lines, "dataset"),
        )
    dataset = Dataset(ds_path, **selection)
    checkers = [g for g, _ in graders.values() if g.checks_samples()]
    if checkers:  # they see every selected sample, one at a time, in the file's order: scanned here
        if early is not None:
            early.cancel()  # its counts would come from the same scan: give its core back to this one

        def check(sample) -> None:
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
    suite.typed_gates, suite.reward, suite.dialect = typed, reward, dialect.dialect
    return suite


SCAN_BESIDE_BYTES = 2 << 20
"""A dataset file at least this large is scanned by a forked process while this one reads the
rest of the suite (100k rows: a 0.9 s scan, beside the replay target's 0.45 s for its outputs)."""


def _scan_beside(path: Path, selection: dict[str, Any]) -> forks.Beside | None:
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


def metric_rule(
    name: str, gspec, gates: list[GateSpec], file: str, lines: dict[str, int]
) -> tuple[str, float]:
    """A metric's own per-sample pass rule: its grader's (``pass_threshold`` or ``pass_op``/``pass_value``),
    else its own gates' (the first one's), else score >= 1.0. Never another metric's gate.

    Two rules stated for one metric that differ are a configuration error: the metric table, the
    accuracy gate and every report must use one rule.
    """
    own = [g for g in gates if g.metric_key == name]
    stated: list[tuple[tuple[str, float], str]] = []
    if gspec.pass_threshold is not None:
        stated.append((("gte", gspec.pass_threshold), f"graders.{name}.pass_threshold"))
    if (
        getattr(gspec, "pass_value", None) is not None
        or getattr(gspec, "pass_op", None) is not None
    ):
        stated.append(
            (
                (gspec.pass_op or "gte", 1.0 if gspec.pass_value is None else gspec.pass_value),
                f"graders.{name}.pass_value",
            )
        )
    for i, g in enumerate(own):
        if g.explicit_rule() is not None:
            stated.append((g.explicit_rule(), f"gates on '{name}' #{i + 1}"))
    for rule, where in stated[1:]:
        if rule != stated[0][0]:
            raise ConfigError(
                f"metric '{name}' has two per-sample pass rules: {rule_text(*stated[0][0])} "
                f"({stated[0][1]}) and {rule_text(*rule)} ({where}); keep one",
                file=file,
                key=f"graders.{name}",
                line=lines.get(f"graders.{name}"),
            )
    if stated:
        return stated[0][0]
    return own[0].sample_rule() if own else ("gte", 1.0)


def _apply_budgets(
    spec: SuiteSpec, gates: list[GateSpec], flag: int | None
) -> tuple[int | None, float | None]:
    """Give every gate its error budget: ``--max-errors``, else its own, else the suite's default, else 0.

    Returns the run's own budget (used when there is no gate).
    """
    for gate in gates:
        if gate.max_errors is None and gate.max_error_rate is None:
            gate.max_errors, gate.max_error_rate = spec.max_errors, spec.max_error_rate
            if gate.max_errors is None and gate.max_error_rate is None:
                gate.max_errors = 0
        if flag is not None:
            gate.max_errors = flag
    if flag is not None:
        return flag, spec.max_error_rate
    if spec.max_errors is None and spec.max_error_rate is None:
        return 0, None
    return spec.max_errors, spec.max_error_rate


def _construct(make, file: str, key: str, lines: dict[str, int]):
    try:
        return make()
    except ConfigError as exc:
        exc.key = exc.key or key
        _locate(exc, file, lines)
        raise
