"""Agent-as-judge: a Letta agent from an .af file grades each submission through a tool call.

Used for ``kind: rubric`` with ``agent_file`` (the seeds' form) and for letta-evals 0.5's
``kind: letta_judge`` (without ``agent_file`` it uses the judge bundled in ``ci_evals/data``).

Before anything runs, the .af is read offline and must hold a judge tool (``judge_tool_name``,
default ``submit_grade``) attached to its agent, taking ``score: float`` and ``rationale: str``
(checked, and read at run time, in :mod:`ci_evals.graders.letta_judge_tool`).
For each sample a fresh judge agent is imported, sent the LLM judge's prompt (the rubric with
``{input}``, ``{submission}``, ``{ground_truth}`` and rubric variables filled in, then the input,
ground truth and submission, asking for a call of the judge tool; see
:func:`ci_evals.graders.judge_prompt.build_judge_prompt`), and deleted afterwards, also on failure. The
first call of the judge tool gives the grade, its score clamped to [0, 1]; a judge that never
calls it gives score 0 with an error. With ``judge_repeats: K`` that is done K times, a fresh judge
each time, and the scores averaged (:mod:`ci_evals.graders.repeats`).

A grade's metadata has the judges' ``usage`` and, at the judge's model's price (``model``, else
the .af's), ``cost_usd`` (else ``unpriced``: [model]), which is charged to the run's budget; once
the run's ``max_cost_usd`` is spent no judge is sent (the grade errors with the reason).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from ci_evals._util.breaker import Breaker
from ci_evals._util.errors import ConfigError
from ci_evals._util.retry import RETRY_BACKOFF_HELP, attempt_backoff
from ci_evals.config.budget import BudgetExceeded
from ci_evals.config.specs import Context
from ci_evals.config.templating import TemplateError
from ci_evals.core.sample import GradeResult, Sample
from ci_evals.core.trajectory import Trajectory, Usage
from ci_evals.graders.base import Grader
from ci_evals.graders.judge_prompt import (
    STANDARD_PLACEHOLDERS,
    build_judge_prompt,
    check_rubric_vars,
    fill_rubric,
)
from ci_evals.graders.letta_judge_tool import DEFAULT_TOOL, check_judge_tool, read_verdict
from ci_evals.graders.repeats import JudgeRepeatsSpec, reduce_repeats
from ci_evals.letta.agents import AgentLedger, systematic_kind
from ci_evals.letta.client import (
    AgentFileImport,
    LettaServer,
    base_url_of,
    import_agent,
    make_client,
    project_of,
    read_agent_file,
    stop_line,
)
from ci_evals.letta.messages import add_usage, dump, tokens_of
from ci_evals.letta.retries import attempt_wait
from ci_evals.llm.prices import price

DEFAULT_JUDGE = Path(__file__).resolve().parent.parent / "data" / "letta_judge.af"


class LettaJudgeSpec(JudgeRepeatsSpec, LettaServer, AgentFileImport):
    kind: Literal["rubric", "letta_judge"]
    prompt: str | None = Field(None, description="The rubric text (or use prompt_path).")
    prompt_path: str | None = Field(
        None, description="A file holding the rubric, relative to the suite."
    )
    agent_file: str | None = Field(
        None, description="The judge agent's .af (letta_judge: default built-in)."
    )
    judge_tool_name: str = Field(
        DEFAULT_TOOL, description="The tool the judge calls with score and rationale."
    )
    model: str | None = Field(
        None, description="A Letta model handle for the judge agent, e.g. openai/gpt-4o-mini."
    )
    rubric_vars: list[str] | None = Field(
        None, description="Variables every sample's rubric_vars must provide."
    )
    max_retries: int = Field(
        2, ge=0, description="Extra attempts (a fresh judge) after a transient failure."
    )
    retry_backoff: float = Field(1.0, ge=0, description=RETRY_BACKOFF_HELP)

    @model_validator(mode="after")
    def _one_prompt(self) -> LettaJudgeSpec:
        if (self.prompt is None) == (self.prompt_path is None):
            which = "both" if self.prompt is not None else "neither"
            raise ValueError(f"give exactly one of 'prompt' or 'prompt_path' ({which} given)")
        return self


# -- the grader -----------------------------------------------------------------------------------


class LettaJudgeGrader(Grader[LettaJudgeSpec]):
    """Grades with a Letta judge agent imported fresh for every submission."""

    spec_model = LettaJudgeSpec

    def __init__(self, name: str, spec: LettaJudgeSpec, ctx: Context) -> None:
        super().__init__(name, spec, ctx)
        if spec.prompt_path is not None:
            self.rubric = ctx.read_text(spec.prompt_path, "rubric", f"graders.{name}.prompt_path")
        else:
            self.rubric = spec.prompt or ""
        if not self.rubric.strip():
            raise ConfigError("the rubric is empty")
        clash = [v for v in spec.rubric_vars or [] if v in STANDARD_PLACEHOLDERS]
        if clash:
            raise ConfigError(
                f"rubric variable '{clash[0]}' clashes with a built-in placeholder "
                f"({', '.join(STANDARD_PLACEHOLDERS)})",
                key=f"graders.{name}.rubric_vars",
            )
        self.rubric_vars = list(spec.rubric_vars or [])
        if spec.model is not None and "/" not in spec.model:
            raise ConfigError(
                f"model on an agent judge is a Letta model handle like 'openai/{spec.model}', "
                f"got '{spec.model}'"
            )
        if spec.agent_file is None:
            if spec.kind == "rubric":
                raise ConfigError(
                    "an agent judge needs agent_file (kind: rubric without it is the LLM judge)"
                )
            if spec.judge_tool_name != DEFAULT_TOOL:
                raise ConfigError(
                    f"judge_tool_name can only be changed together with agent_file: the built-in "
                    f"judge's tool is {DEFAULT_TOOL}"
                )
            builtin = read_agent_file(str(DEFAULT_JUDGE), ctx, f"graders.{name}.agent_file")
            self.agent_file = dataclasses.replace(builtin, ref="built-in letta_judge.af")
        else:
            self.agent_file = read_agent_file(spec.agent_file, ctx, f"graders.{name}.agent_file")
        check_judge_tool(self.agent_file, spec.judge_tool_name)
        cfg = self.agent_file.agent.get("llm_config")
        cfg = cfg if isinstance(cfg, dict) else {}
        self.judge_model: str = str(
            spec.model or cfg.get("handle") or cfg.get("model") or "the judge's model"
        )
        """The model the judge's tokens are priced at."""
        self.base_url = base_url_of(spec)
        self._client: Any = None
        self.ledger = AgentLedger(self.base_url, spec.timeout)
        self.breaker = (
            Breaker()
        )  # stops calling a server that never answered (ci_evals._util.breaker)

    def checks_samples(self) -> bool:
        return bool(self.rubric_vars)

    def check_samples(self, samples: Iterable[Sample]) -> None:
        """Every sample gives every declared rubric variable (the LLM rubric grader's rule and message)."""
        for sample in samples:
            check_rubric_vars(sample, self.rubric_vars, self.name)

    def build_prompt(self, sample: Sample, submission: str) -> str:
        """The message to the judge: the LLM judge's prompt, asking for a call of the judge tool."""
        rubric = fill_rubric(self.rubric, sample, submission, self.rubric_vars)
        return build_judge_prompt(rubric, sample, submission, tool_name=self.spec.judge_tool_name)

    async def start(self) -> None:
        if self._client is None:
            self._client = make_client(self.spec)

    async def grade(self, sample: Sample, submission: str, trajectory: Trajectory) -> GradeResult:
        """The judge's grade; with ``judge_repeats: K`` a fresh judge is asked K times, one after
        another, and the scores averaged (the first failure is the grade: ci_evals.graders.repeats)."""
        await self.start()
        try:
            prompt = self.build_prompt(sample, submission)
        except TemplateError as exc:
            return GradeResult(score=0.0, error=str(exc), metadata=self._meta())
        grades: list[GradeResult] = []
        for _ in range(self.spec.judge_repeats):
            grades.append(await self._judge(prompt))
            if grades[-1].error:
                break
        if self.spec.judge_repeats == 1:
            return grades[0]
        first, last = grades[0], grades[-1]
        meta = {
            **first.metadata,
            "usage": _sum(g.metadata["usage"] for g in grades),
            "retries": sum(g.metadata["retries"] for g in grades),
            **_cost(grades),
        }
        if last.error:
            return GradeResult(score=0.0, rationale=last.rationale, error=last.error, metadata=meta)
        score, rationale, meta["judge_repeats"] = reduce_repeats(
            [g.score for g in grades], first.rationale, self.rule
        )
        return GradeResult(score=score, rationale=rationale, metadata=meta)

    def _meta(self) -> dict[str, Any]:
        return {
            "agent_file": self.agent_file.ref,
            "usage": Usage().to_dict(),
            "cache_hits": 0,
            "retries": 0,
        }

    async def _judge(self, prompt: str) -> GradeResult:
        """One judge's grade: import a fresh judge, send it the prompt, read its grade; a transient
        failure (deadlocked import, 409, 5xx, dropped connection) is retried like the target's, and counted."""
        usage = Usage()
        meta = self._meta()
        if self.breaker.stopped:  # the server never answered: the rest of the samples are not sent
            return GradeResult(score=0.0, error=f"not sent: {self.breaker.stopped}", metadata=meta)
        policy = attempt_backoff(self.spec.retry_backoff, self.spec.max_retries)
        while True:
            created: list[str] = []
            try:
                async with asyncio.timeout(
                    self.spec.timeout
                ):  # the whole judge call, not each read
                    result = await self._attempt(prompt, usage, meta, created)
                self.breaker.success()
                return result
            except TimeoutError:
                return GradeResult(
                    score=0.0,
                    error=f"Letta judge timed out after {self.spec.timeout:g} s",
                    metadata=meta,
                )
            except BudgetExceeded as exc:  # the run's budget is spent: a stop, never retried
                return GradeResult(score=0.0, error=str(exc), metadata=meta)
            except Exception as exc:
                error = exc
                meta["retries"] += getattr(exc, "retries", 0)
                systematic = self.breaker.first_contact and systematic_kind(exc, self.base_url)
                wait = attempt_wait(policy, exc, give_up=bool(systematic))
            finally:
                await self.ledger.forget(self._client, created)
            if wait is None:
                break
            meta["retries"] += 1
            await asyncio.sleep(wait)
        failed = stop_line(self.breaker, error, self.base_url, "Letta judge failed")
        return GradeResult(score=0.0, error=str(failed), metadata=meta)

    async def _attempt(
        self, prompt: str, usage: Usage, meta: dict[str, Any], created: list[str]
    ) -> GradeResult:
        client = self._client
        judge_id, retries = await import_agent(
            client,
            self.agent_file,
            project_of(self.spec),
            self.ledger,
            created,
            self.spec.model,
            self.spec.override_existing_tools,
        )
        meta["retries"] += retries
        meta["judge_agent_id"] = judge_id
        self.ctx.budget.check()
        resp = await client.agents.messages.create(
            judge_id, messages=[{"role": "user", "content": prompt}]
        )
        add_usage(usage, resp.usage)
        meta["usage"] = usage.to_dict()
        spent = tokens_of(resp.usage)
        cost = price(self.judge_model, spent, self.ctx.pricing) if self.judge_model else None
        self.ctx.budget.charge(
            cost, (self.judge_model or "unknown") if any(spent.values()) else None
        )
        if cost is not None:
            meta["cost_usd"] = meta.get("cost_usd", 0.0) + cost
        elif any(spent.values()):
            meta["unpriced"] = [self.judge_model]
        stop = resp.stop_reason.stop_reason if resp.stop_reason else None
        return read_verdict(dump(resp.messages), stop, self.spec.judge_tool_name, meta)

    async def aclose(self) -> None:
        if self._client is None:
            return
        await self.ledger.close(
            self._client
        )  # judges whose delete failed: once more, else reported
        await self._client.close()
        self._client = None


def _sum(usages: Iterable[dict[str, int]]) -> dict[str, int]:
    total = Usage()
    for u in usages:
        total.add(u.get("prompt_tokens"), u.get("completion_tokens"))
    return total.to_dict()


def _cost(grades: list[GradeResult]) -> dict[str, Any]:
    """The repeated judges' ``cost_usd`` summed (when some were priced) and ``unpriced``."""
    out: dict[str, Any] = {}
    costs = [g.metadata["cost_usd"] for g in grades if "cost_usd" in g.metadata]
    if costs:
        out["cost_usd"] = sum(costs)
    unpriced = sorted({m for g in grades for m in g.metadata.get("unpriced", [])})
    if unpriced:
        out["unpriced"] = unpriced
    return out
