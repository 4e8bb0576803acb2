"""``kind: model``: a chat model over any OpenAI-compatible API is the system under test.

Each user turn of the sample's ``input`` (a string is one turn) gets one assistant reply; the
history is kept across turns. With ``tools`` (OpenAI tools format, or the short
``{name, description, parameters}`` form) the model may answer with tool calls: they are recorded
in the trajectory and the turn ends (nothing is executed). If another turn follows, the history
carries a placeholder result per call, because the API requires one.

The repeat index ``run`` enters the response cache key, so repeated runs are independent calls.
Token usage goes to ``trajectory.usage``; ``cache_hits``, ``retries``, ``run``, ``steps`` (the
chat calls made), ``cost_usd`` (priced) or ``unpriced`` ([model]), ``cached`` (every call answered
from the LLM cache) and ``queued_s`` (waits in ci-evals' queue and rate-limit pauses) to
``trajectory.metadata``.

Budgets (:mod:`ci_evals.config.budget`): the run's is asked before each call (spent: the sample
stops, not sent), the sample's ``max_steps``/``max_tokens`` after each; a stopped sample errors
with category ``budget``, its error carrying what its calls spent.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import Field, field_validator, model_validator

from ci_evals._util.errors import SampleError
from ci_evals.config.budget import BudgetExceeded
from ci_evals.config.specs import MAX_TIMEOUT, Context, TargetSpec
from ci_evals.core.sample import Sample
from ci_evals.core.trajectory import Message, ToolCall, Trajectory
from ci_evals.llm.client import LLM
from ci_evals.llm.cost import LLMResult, Tally
from ci_evals.llm.errors import LLMError
from ci_evals.llm.openai_api import effective_temperature, is_reasoning_model
from ci_evals.targets.base import Spend, Target

TOOL_NOT_RUN = "Tool execution is not available in this evaluation."


class ModelTargetSpec(TargetSpec):
    model: str = Field(description="Model name sent to the endpoint.")
    system_prompt: str | None = Field(
        default=None, description="System message (or use system_prompt_path)."
    )
    system_prompt_path: str | None = Field(
        default=None, description="File holding the system message."
    )
    tools: list[dict[str, Any]] | None = Field(
        default=None, description="Tool JSON schemas the model may call."
    )
    temperature: float | None = Field(
        default=None, ge=0.0, le=2.0, description="Default: the server's."
    )
    max_tokens: int | None = Field(default=None, gt=0, description="Reply length cap.")
    base_url: str | None = Field(
        default=None, description="OpenAI-compatible endpoint; default OPENAI_BASE_URL."
    )
    api_key_env: str | None = Field(
        default=None, description="Environment variable with the key; default OPENAI_API_KEY."
    )
    timeout: float = Field(
        default=120.0, gt=0, le=MAX_TIMEOUT, description="Seconds per HTTP attempt."
    )
    max_retries: int = Field(
        default=5, ge=0, description="Retries on 429, 5xx, timeouts and dropped connections."
    )

    @model_validator(mode="after")
    def _one_system_prompt(self) -> ModelTargetSpec:
        if self.system_prompt is not None and self.system_prompt_path is not None:
            raise ValueError("give at most one of 'system_prompt' or 'system_prompt_path'")
        return self

    @field_validator("tools")
    @classmethod
    def _tools(cls, tools: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
        if tools is None:
            return None
        out = []
        for i, tool in enumerate(tools):
            fn = tool.get("function") if tool.get("type", "function") == "function" else None
            if fn is None and "name" in tool and "type" not in tool:
                fn = tool  # the short form {name, description, parameters}
            if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
                raise ValueError(
                    f"tools[{i}] must be {{type: function, function: {{name, parameters}}}}"
                )
            out.append({"type": "function", "function": fn})
        return out


class ModelTarget(Target[ModelTargetSpec]):
    """Runs each sample through a chat model."""

    spec_model = ModelTargetSpec

    def __init__(self, spec: ModelTargetSpec, ctx: Context) -> None:
        super().__init__(spec, ctx)
        self.system_prompt = spec.system_prompt
        if spec.system_prompt_path is not None:
            self.system_prompt = ctx.read_text(
                spec.system_prompt_path, "system prompt", "target.system_prompt_path"
            )
        self.llm = LLM(
            base_url=spec.base_url,
            api_key_env=spec.api_key_env,
            timeout=spec.timeout,
            max_retries=spec.max_retries,
            cache_dir=ctx.cache_dir,
            owner="target",
            budget=ctx.budget,
            pricing=ctx.pricing,
        )

    def prepare(self) -> None:
        self.llm.prepare()

    async def start(self) -> None:
        await self.llm.start()

    async def aclose(self) -> None:
        await self.llm.aclose()

    def params(self, model: str) -> dict[str, Any]:
        """Sampling parameters; reasoning models get temperature 1 and max_completion_tokens."""
        cap = "max_completion_tokens" if is_reasoning_model(model) else "max_tokens"
        return {
            "temperature": effective_temperature(model, self.spec.temperature),
            cap: self.spec.max_tokens,
        }

    async def run(
        self, sample: Sample, *, run: int = 0, model: str | None = None, need_memory: bool = False
    ) -> Trajectory:
        model = model or self.spec.model
        params = self.params(model)
        turns = [sample.input] if isinstance(sample.input, str) else list(sample.input)
        history: list[dict[str, Any]] = []
        if self.system_prompt:
            history.append({"role": "system", "content": self.system_prompt})
        traj = Trajectory()
        tally = Tally()
        try:
            for n, text in enumerate(turns):
                history.append({"role": "user", "content": text})
                result = await self._call(tally, n, model, history, params, run)
                if not result.data.get("choices"):
                    raise SampleError(f"the model returned no choices on turn {n + 1}")
                calls = [_tool_call(c, i) for i, c in enumerate(result.tool_calls)]
                reply = Message(role="assistant", content=result.content, tool_calls=calls)
                traj.turns.append([Message(role="user", content=text), reply])
                history.append(_history_message(reply))
                if calls and n + 1 < len(turns):
                    history += [
                        {"role": "tool", "tool_call_id": c.id, "content": TOOL_NOT_RUN}
                        for c in calls
                    ]
        except SampleError as exc:  # what the calls before it spent and waited stays known
            _spend(tally, model).tell(exc)
            exc.retries = max(exc.retries, tally.retries)
            exc.queued_s = _waited(tally)  # type: ignore[attr-defined]
            raise
        traj.usage.add(tally.prompt_tokens, tally.completion_tokens)
        traj.metadata.update(
            {"model": model, "run": run, "cache_hits": tally.cache_hits, "retries": tally.retries}
        )
        if tally.throttled:
            traj.metadata["throttled"] = tally.throttled
        traj.metadata.update(_spend(tally, model).metadata())
        if tally.calls and tally.cache_hits == tally.calls:
            traj.metadata["cached"] = True
        if queued := _waited(tally):
            traj.metadata["queued_s"] = queued
        return traj

    async def _call(
        self,
        tally: Tally,
        n: int,
        model: str,
        history: list[dict[str, Any]],
        params: dict[str, Any],
        run: int,
    ) -> LLMResult:
        """Turn ``n``'s call: not sent once the run's budget or the sample's ``max_steps`` is spent;
        the sample's ``max_steps`` and ``max_tokens`` asked again after it."""
        budget = self.ctx.budget
        budget.check()
        if budget.max_steps is not None and tally.calls >= budget.max_steps:
            raise BudgetExceeded(
                f"stopped after {tally.calls} steps: max_steps {budget.max_steps} spent "
                f"before turn {n + 1}"
            )
        try:
            result = await self.llm.chat(
                model=model, messages=history, params=params, tools=self.spec.tools, repeat=run
            )
        except LLMError as exc:
            retries = tally.retries + exc.retries
            if getattr(exc, "category", None) == "budget":  # the client would not send it
                raise BudgetExceeded(exc.message, retries=retries) from None
            raise SampleError(
                f"model call failed on turn {n + 1}: {exc.message}", retries=retries
            ) from None
        tally.add(result, model, self.ctx.pricing)
        budget.check_sample(tally.calls, tally.prompt_tokens + tally.completion_tokens)
        return result


def _spend(tally: Tally, model: str) -> Spend:
    """A sample's spend as the targets report it: one step per call; the model unpriced when its
    tokens have no known price."""
    spend = Spend(steps=tally.calls, steps_known=True)
    spend.add(model, tally.usage, tally.cost_usd, None)
    return spend


def _waited(tally: Tally) -> float:
    """Seconds the calls waited in ci-evals' queue and rate-limit pauses (the LLM client's)."""
    return round(tally.waited_s, 3)  # (a free slot is taken in microseconds: no wait)


def _tool_call(raw: dict[str, Any], index: int) -> ToolCall:
    fn = raw.get("function") or {}
    args = fn.get("arguments")
    return ToolCall(
        id=str(raw.get("id") or f"call_{index}"),
        name=str(fn.get("name") or ""),
        arguments=args if isinstance(args, str) else json.dumps(args if args is not None else {}),
    )


def _history_message(reply: Message) -> dict[str, Any]:
    """An assistant message as the API expects it back in the history."""
    msg: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.tool_calls:
        msg["tool_calls"] = [tc.to_openai() for tc in reply.tool_calls]
    return msg
