"""The suite YAML as strict pydantic models: the top level (``target`` and ``graders.*`` are
validated per kind, by the registry's spec models, when the suite is loaded).

:mod:`ci_evals.suite.schema` generates docs/suite.schema.json from these models.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from ci_evals.config.rates import DEFAULT_MAX_WAIT, MIN_MAX_WAIT, check_rates
from ci_evals.config.specs import Strict
from ci_evals.gating.gates import GateSpec

Reducer = Literal["mean", "median", "max", "pass_at_k", "pass_all_k", "majority"]


class Price(Strict):
    """A model's price in US dollars per million tokens (overrides the maintained price list)."""

    input_per_mtok: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    output_per_mtok: float = Field(default=0.0, ge=0, allow_inf_nan=False)


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
    max_steps: int | None = Field(
        default=None, ge=1, description="Per sample: stop an agent past this many steps."
    )
    max_tokens: int | None = Field(
        default=None, ge=1, description="Per sample: stop a target past this many tokens."
    )
    max_cost_usd: float | None = Field(
        default=None,
        gt=0,
        allow_inf_nan=False,
        description="Per run: stop calling once the run's priced calls cost this many dollars.",
    )

    @field_validator("rate_limits")
    @classmethod
    def _rate_keys(cls, v: dict[str, RateLimit]) -> dict[str, RateLimit]:
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
    def _some(cls, v: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        if not v:
            raise ValueError("a suite needs at least one grader")
        return v

    @model_validator(mode="after")
    def _rates_fit_max_wait(self) -> SuiteSpec:
        rates = {key: (lim.rpm, lim.tpm) for key, lim in self.rate_limits.items()}
        if problem := check_rates(rates, self.max_wait or DEFAULT_MAX_WAIT, "rate_limits"):
            raise ValueError(problem)
        return self
