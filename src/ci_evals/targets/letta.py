"""Letta agent target (``kind: agent`` / ``letta_agent``) over letta-client's ``AsyncLetta``.

Each sample talks to one agent: imported fresh from ``agent_file`` (so no state leaks between
samples), made by the ``agent_script`` factory, or the existing ``agent_id`` (shared, so its samples
run one at a time). Each turn of the input is one ``POST /v1/agents/{id}/messages``; the response's
Letta messages become one normalized turn. Agents the run created are deleted when the sample is
done (``cleanup: false`` keeps them; an agent from a failed attempt is always deleted).

What the agent spent goes to the trajectory: the server's ``usage`` (tokens) and ``step_count``
summed over the sample's messages (metadata ``steps``, left out when the server gives none), and
their cost at the agent's model's price (``cost_usd``, else ``unpriced``), charged to the run's
budget. The run's budget is asked before each message; with ``max_steps`` each message carries the
steps the sample has left (the server ends the agent loop there, stop reason ``max_steps``) and
a loop so ended, or past ``max_tokens``, stops the sample (category ``budget``, never retried).

The Letta plumbing (client settings, .af reading, import, message mapping) lives in
:mod:`ci_evals.letta`, shared with the agent-as-judge grader; the client, the agents' ledger and
closing, shared with the ``letta_code`` target, in :mod:`ci_evals.targets.letta_base`.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, Literal, TypeVar

from pydantic import Field

from ci_evals._util.breaker import Breaker
from ci_evals._util.errors import ConfigError, SampleError
from ci_evals._util.retry import RETRY_BACKOFF_HELP, attempt_backoff
from ci_evals.config.budget import BudgetExceeded
from ci_evals.config.specs import Context
from ci_evals.core.sample import Sample
from ci_evals.core.trajectory import Trajectory
from ci_evals.letta.agents import (  # noqa: F401
    describe,
    from_factory,
    import_file,
    shown_url,
    systematic_kind,
)
from ci_evals.letta.client import (
    AgentFileImport,
    import_agent,
    project_of,
    read_agent_file,
    stop_line,
)
from ci_evals.letta.messages import (
    FAILED_STOPS,
    MAX_STEPS_STOP,
    dump,
    memory_blocks,
    step_count,
    to_turn,
    tokens_of,
)
from ci_evals.letta.retries import attempt_wait
from ci_evals.llm.prices import price
from ci_evals.targets.base import Spend
from ci_evals.targets.letta_base import LettaBase, LettaSpec
from ci_evals.usercode.load import load_object

T = TypeVar("T")


class LettaTargetSpec(LettaSpec, AgentFileImport):
    kind: Literal["agent", "letta_agent"] = "agent"
    agent_file: str | None = Field(None, description="An .af file imported fresh for every sample.")
    agent_id: str | None = Field(None, description="An existing agent, shared by all samples.")
    agent_script: str | None = Field(
        None, description="'file.py:factory', (client, sample) -> agent id."
    )
    max_retries: int = Field(0, ge=0, description="Extra attempts of a failed sample run.")
    retry_backoff: float = Field(1.0, ge=0, description=RETRY_BACKOFF_HELP)
    model_handles: list[str] | None = Field(
        None, description="Run every sample once per Letta model handle."
    )
    model_configs: list[str] | None = Field(
        None, description="letta-evals 0.5 only; use model_handles."
    )
    cleanup: bool = Field(True, description="Delete the agents the run created (false keeps them).")


class LettaTarget(LettaBase[LettaTargetSpec]):
    """Runs each sample against a Letta agent and returns the normalized trajectory."""

    spec_model = LettaTargetSpec

    def __init__(self, spec: LettaTargetSpec, ctx: Context) -> None:
        super().__init__(spec, ctx)
        chosen = [k for k in ("agent_file", "agent_id", "agent_script") if getattr(spec, k)]
        if not chosen:
            raise ConfigError(
                "an agent target needs one of agent_file, agent_id or agent_script", key="target"
            )
        if len(chosen) > 1:
            raise ConfigError(
                f"an agent target takes only one of agent_file, agent_id, agent_script; "
                f"got {' and '.join(chosen)}",
                key="target",
            )
        if spec.model_configs is not None:
            raise ConfigError(
                "model_configs (letta-evals' bundled LLM config files) is not supported; "
                "list Letta model handles in model_handles, e.g. [openai/gpt-4o-mini]",
                key="target.model_configs",
            )
        handles = spec.model_handles
        if handles is not None:
            if (
                not handles
                or len(set(handles)) != len(handles)
                or not all(h.strip() for h in handles)
            ):
                raise ConfigError(
                    "model_handles must be a non-empty list of distinct handles",
                    key="target.model_handles",
                )
            if spec.agent_id:
                raise ConfigError(
                    "model_handles cannot be used with agent_id: it would change the model of "
                    "an agent shared by all samples; use agent_file or agent_script so each "
                    "sample gets its own agent",
                    key="target.model_handles",
                )
        self.agent_file = (
            read_agent_file(spec.agent_file, ctx, "target.agent_file") if spec.agent_file else None
        )
        self.factory = self._load_factory(spec.agent_script, ctx) if spec.agent_script else None
        # Stops calling a server that never answered (ci_evals._util.breaker).
        self.breaker = Breaker()
        self._lock = asyncio.Lock()  # one conversation at a time on a shared agent (agent_id)

    @staticmethod
    def _load_factory(ref: str, ctx: Context) -> Callable[..., Any]:
        fn = load_object(ref, ctx.base_dir, key="target.agent_script")
        if not callable(fn):
            raise ConfigError(f"'{ref}' is not a function", key="target.agent_script")
        try:
            n = len(inspect.signature(fn).parameters)
        except (TypeError, ValueError):
            n = 2
        if n != 2:
            raise ConfigError(
                f"agent factory '{ref}' must take (client, sample), it takes {n} parameters",
                key="target.agent_script",
            )
        return fn

    def models(self) -> list[str | None]:
        return list(self.spec.model_handles) if self.spec.model_handles else [None]

    async def run(
        self, sample: Sample, *, run: int = 0, model: str | None = None, need_memory: bool = False
    ) -> Trajectory:
        await self.start()
        if self.spec.agent_id:
            if sample.agent_args:
                raise SampleError(
                    "agent_args cannot be applied to an existing agent (agent_id); "
                    "use agent_file or agent_script"
                )
            waited = time.perf_counter() if self._lock.locked() else None
            async with self._lock:  # one conversation at a time on a shared agent
                queued = 0.0 if waited is None else time.perf_counter() - waited
                try:
                    traj = await self._attempts(sample, model, need_memory)
                except SampleError as exc:
                    exc.queued_s = queued  # type: ignore[attr-defined]
                    raise
                if queued:
                    traj.metadata["queued_s"] = round(queued, 6)
                return traj
        return await self._attempts(sample, model, need_memory)

    async def _attempts(self, sample: Sample, model: str | None, need_memory: bool) -> Trajectory:
        if self.breaker.stopped:
            raise SampleError(f"not sent: {self.breaker.stopped}")
        policy = attempt_backoff(self.spec.retry_backoff, self.spec.max_retries)
        retried = [0]  # the server's transient failures retried inside attempts (imports)
        spent = Spend()  # what the failed attempts spent: told on the sample's error
        while True:
            created: list[str] = []
            spend = Spend()
            try:
                traj = await self._attempt(sample, model, need_memory, created, retried, spend)
            except Exception as exc:
                retried[0] += getattr(exc, "retries", 0)
                spent.merge(spend)
                await self.ledger.forget(self._client, created)
                if isinstance(exc, BudgetExceeded):  # a stop, not a failure: never retried
                    exc.retries = policy.retries + retried[0]
                    spent.tell(exc)
                    raise
                systematic = self.breaker.first_contact and systematic_kind(exc, self.base_url)
                wait = attempt_wait(policy, exc, give_up=bool(systematic))
                if wait is None:
                    error = exc
                    break
                await asyncio.sleep(wait)
                continue
            self.breaker.success()
            if policy.retries + retried[0]:
                traj.metadata["retries"] = policy.retries + retried[0]
            if self.spec.cleanup:
                await self.ledger.forget(self._client, created)
            else:
                self.ledger.keep(created)
            return traj
        where = f" after {policy.retries + 1} attempts" if policy.retries else ""
        failed = stop_line(self.breaker, error, self.base_url, f"Letta agent run failed{where}")
        failed.retries = policy.retries + retried[0]
        spent.tell(failed)
        raise failed from error

    async def _within(self, call: Awaitable[T], path: str) -> T:
        """``await call`` with ``timeout`` as a total deadline (httpx's is per read); past it, the
        SDK's timeout error, which the retries and messages already treat as one."""
        try:
            async with asyncio.timeout(self.spec.timeout):
                return await call
        except TimeoutError:
            import httpx
            import letta_client

            raise letta_client.APITimeoutError(
                request=httpx.Request("POST", self.base_url + path)
            ) from None

    async def _attempt(
        self,
        sample: Sample,
        model: str | None,
        need_memory: bool,
        created: list[str],
        retried: list[int],
        spend: Spend,
    ) -> Trajectory:
        client = self._client
        agent_id = await self._agent_for(sample, model, created, retried)
        model_used = model or await self._model_of(agent_id)
        traj = Trajectory()
        stops = []
        turns = sample.input if isinstance(sample.input, list) else [sample.input]
        for n, text in enumerate(turns):
            resp = await self._within(
                client.agents.messages.create(
                    agent_id,
                    messages=[{"role": "user", "content": text}],
                    **self._step_limit(spend, n),
                ),
                f"/v1/agents/{agent_id}/messages",
            )
            traj.turns.append(to_turn(dump(resp.messages), text))
            usage = tokens_of(resp.usage)
            traj.usage.add(usage["prompt_tokens"], usage["completion_tokens"])
            cost = price(model_used, usage, self.ctx.pricing) if model_used else None
            self.ctx.budget.charge(cost, (model_used or "unknown") if any(usage.values()) else None)
            spend.add(model_used, usage, cost, step_count(resp.usage))
            stop = resp.stop_reason.stop_reason if resp.stop_reason else None
            stops.append(stop)
            if stop in FAILED_STOPS:
                raise SampleError(f"the Letta run stopped with '{stop}'")
            self._check_steps(spend, stop)
        if need_memory:
            traj.memory_blocks.update(
                await self._within(
                    memory_blocks(client, agent_id), f"/v1/agents/{agent_id}/core-memory/blocks"
                )
            )
        traj.metadata.update(agent_id=agent_id, model=model_used, stop_reasons=stops)
        traj.metadata.update(spend.metadata())
        return traj

    async def _model_of(self, agent_id: str) -> str | None:
        """The agent's model handle (``openai/gpt-4o-mini``), as the server has it."""
        state = await self._within(self._client.agents.retrieve(agent_id), f"/v1/agents/{agent_id}")
        cfg = state.llm_config
        return state.model or (cfg.handle if cfg else None) or (cfg.model if cfg else None)

    def _step_limit(self, spend: Spend, turn: int) -> dict[str, Any]:
        """The run's budget asked before the agent thinks; the steps the sample has left, as the
        request's ``max_steps`` (the server ends the agent loop there)."""
        budget = self.ctx.budget
        budget.check()
        if budget.max_steps is None:
            return {}
        left = budget.max_steps - spend.steps
        if left <= 0:
            raise BudgetExceeded(
                f"stopped after {spend.steps} steps: max_steps {budget.max_steps} spent "
                f"before turn {turn + 1}"
            )
        return {"max_steps": left}

    def _check_steps(self, spend: Spend, stop: str | None) -> None:
        """The sample's ``max_steps`` and ``max_tokens`` after a message: a loop the server ended
        at ``max_steps`` stops the sample."""
        budget = self.ctx.budget
        limit = budget.max_steps
        if limit is not None and (stop == MAX_STEPS_STOP or spend.steps > limit):
            steps = spend.steps if spend.steps_known else limit
            raise BudgetExceeded(f"stopped after {steps} steps: past max_steps {limit}")
        budget.check_sample(spend.steps, spend.tokens)

    async def _agent_for(
        self, sample: Sample, model: str | None, created: list[str], retried: list[int]
    ) -> str:
        """The agent this attempt talks to, set up with the sample's agent_args and the model handle."""
        client = self._client
        if self.spec.agent_id:
            return self.spec.agent_id
        args = dict(sample.agent_args or {})
        if self.agent_file is not None:  # the model handle is applied by the import itself
            agent_id, retries = await self._within(
                import_agent(
                    client,
                    self.agent_file,
                    project_of(self.spec),
                    self.ledger,
                    created,
                    model,
                    self.spec.override_existing_tools,
                ),
                "/v1/agents/import",
            )
            retried[0] += retries
            model = None
        else:
            factory = self.factory
            assert factory is not None  # agent_file, agent_id or agent_script: checked at load
            agent_id = await from_factory(
                factory, client, sample, self.ledger, str(self.spec.agent_script)
            )
            created.append(agent_id)
            args = {}  # the factory got the sample and applied its agent_args itself
        blocks = args.pop("memory_blocks", None)
        if model is not None:
            args["model"] = model
        if args:
            await self._within(
                client.agents.update(agent_id, extra_body=args), f"/v1/agents/{agent_id}"
            )
        for label, value in _block_values(blocks):
            await self._within(
                client.agents.blocks.update(label, agent_id=agent_id, value=value),
                f"/v1/agents/{agent_id}/core-memory/blocks/{label}",
            )
        return agent_id


def _block_values(blocks: Any) -> list[tuple[str, str]]:
    """agent_args ``memory_blocks``: ``{label: value}`` or ``[{label, value}]``."""
    if not blocks:
        return []
    if isinstance(blocks, dict):
        return [(str(k), str(v)) for k, v in blocks.items()]
    if isinstance(blocks, list) and all(isinstance(b, dict) and "label" in b for b in blocks):
        return [(str(b["label"]), str(b.get("value", ""))) for b in blocks]
    raise SampleError("agent_args.memory_blocks must be {label: value} or a list of {label, value}")
