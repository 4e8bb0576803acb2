"""Letta Code target (``kind: letta_code``): the ``letta`` CLI run headless, the trace read back.

As letta-evals (``targets/letta_code_target.py``) runs it: for each sample and model handle,
``letta --output-format stream-json --model <handle> (--yolo | --permission-mode <mode>)
(--new-agent | --agent <id from agent_script>) [flags] -p`` with the prompt on stdin (a list
input joined with newlines, ``{pwd}`` replaced by the suite folder). The environment is ours plus
``LETTA_BASE_URL``, ``MEMORY_DIR`` / ``LETTA_MEMORY_DIR`` (``memory_workspace``) and the sample's
``extra_vars.env``. The run's agent id comes from the ``init`` event; its messages are then read
from the Letta server (the conversation the CLI reported, else the agent's). A non-zero exit, an
``error`` event, a failed ``result`` or a timeout fails the sample. Agents the run created are
deleted afterwards unless ``cleanup: false``.

The CLI needs a Letta server with Redis (background streaming) and a model endpoint that streams;
see docs/letta-code.md.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

from ci_evals._util.errors import ConfigError, SampleError
from ci_evals._util.retry import RETRY_BACKOFF_HELP, attempt_backoff
from ci_evals.config.specs import Context
from ci_evals.core.sample import Sample
from ci_evals.core.trajectory import Trajectory
from ci_evals.letta.agents import from_factory
from ci_evals.letta.client import base_url_of
from ci_evals.letta.messages import dump, listed, memory_blocks, to_turn
from ci_evals.targets.letta_base import LettaBase, LettaSpec
from ci_evals.usercode.load import load_object

STDERR_TAIL = 400
MAX_TRACE_MESSAGES = 10_000
"""Messages of one run read back at most (a Letta Code run with many tool calls has hundreds)."""


def extra_vars(sample: Sample) -> dict[str, Any]:
    """The row's letta-evals ``extra_vars`` (a loader that keeps the column nested is unwrapped)."""
    ev = sample.extra_vars or {}
    nested = ev.get("extra_vars")
    return nested if isinstance(nested, dict) else ev


class LettaCodeSpec(LettaSpec):
    kind: Literal["letta_code"] = "letta_code"
    model_handles: list[str] = Field(
        min_length=1, description="Letta model handles; every sample runs once per handle."
    )
    agent_script: str | None = Field(
        None, description="'file.py:factory', async (client, sample) -> agent id."
    )
    flags: str | None = Field(None, description="Extra CLI flags, split with shell rules.")
    permission_mode: str | None = Field(
        None, description="Passed as --permission-mode (default: --yolo)."
    )
    memory_workspace: bool = Field(
        False, description="Set MEMORY_DIR / LETTA_MEMORY_DIR and run from it."
    )
    memory_dir: str | None = Field(
        None, description="Memory workspace root, relative to the suite."
    )
    working_dir: str | None = Field(
        None, description="letta-evals 0.6-0.17: the CLI's folder, relative to the suite."
    )
    allowed_tools: list[str] | None = Field(
        None, description="letta-evals <= 0.21: --allowed-tools."
    )
    disallowed_tools: list[str] | None = Field(
        None, description="letta-evals <= 0.21: --disallowed-tools."
    )
    max_retries: int = Field(0, ge=0, description="Extra attempts of a failed sample run.")
    retry_backoff: float = Field(1.0, ge=0, description=RETRY_BACKOFF_HELP)
    command: str = Field(
        "letta", description="The Letta Code executable (PyPI package 'letta' >= 0.32.13)."
    )
    cleanup: bool = Field(True, description="Delete the agents the run created (false keeps them).")

    @field_validator("permission_mode")
    @classmethod
    def _no_memory_mode(cls, v: str | None) -> str | None:
        if v == "memory":
            raise ValueError(
                "permission_mode 'memory' was removed from Letta Code; use memory_workspace: true "
                "with a permission_mode such as 'unrestricted'"
            )
        return v


class LettaCodeTarget(LettaBase[LettaCodeSpec]):
    """Runs each sample through the Letta Code CLI and returns the server's trace.

    The Letta side (client, deleting agents, closing) is ``LettaBase``'s (targets.letta_base).
    """

    spec_model = LettaCodeSpec

    def __init__(self, spec: LettaCodeSpec, ctx: Context) -> None:
        super().__init__(spec, ctx)
        self.flags = shlex.split(spec.flags) if spec.flags else []
        for name, flag in (
            ("allowed_tools", "--allowed-tools"),
            ("disallowed_tools", "--disallowed-tools"),
        ):
            if getattr(spec, name):
                self.flags += [flag, *getattr(spec, name)]
        self.cwd = ctx.resolve(spec.working_dir) if spec.working_dir else ctx.base_dir
        self.factory: Callable[..., Any] | None = None
        if spec.agent_script:
            self.factory = load_object(spec.agent_script, ctx.base_dir, key="target.agent_script")

    def models(self) -> list[str | None]:
        return list(self.spec.model_handles)

    async def start(self) -> None:
        if shutil.which(self.spec.command) is None:
            raise ConfigError(
                f"the Letta Code CLI '{self.spec.command}' is not on PATH: pip install 'letta>=0.32.13'",
                key="target.command",
            )
        await super().start()

    async def run(
        self, sample: Sample, *, run: int = 0, model: str | None = None, need_memory: bool = False
    ) -> Trajectory:
        await self.start()
        policy = attempt_backoff(self.spec.retry_backoff, self.spec.max_retries)
        while True:
            created: list[str] = []
            try:
                traj = await self._attempt(
                    sample, model or self.spec.model_handles[0], need_memory, created
                )
            except SampleError as exc:
                await self.ledger.forget(self._client, created)
                wait = policy.next_wait()  # the project's one retry policy (ci_evals._util.retry)
                if wait is None:
                    error = exc
                    break
                await asyncio.sleep(wait)
                continue
            if self.spec.cleanup:
                await self.ledger.forget(self._client, created)
            else:
                self.ledger.keep(created)
            if policy.retries:
                traj.metadata["retries"] = policy.retries
            return traj
        where = f" after {policy.retries + 1} attempts" if policy.retries else ""
        raise SampleError(
            f"Letta Code run failed{where}: {error}", retries=policy.retries
        ) from error

    def _memory_dir(self, sample: Sample, agent_id: str | None) -> Path | None:
        if not self.spec.memory_workspace:
            return None
        env = extra_vars(sample).get("env") or {}
        given = (
            (env.get("MEMORY_DIR") or env.get("LETTA_MEMORY_DIR"))
            if isinstance(env, dict)
            else None
        )
        given = given or extra_vars(sample).get("memory_dir")
        if given:
            return Path(str(given)).expanduser()
        if self.spec.memory_dir:
            return self.ctx.resolve(self.spec.memory_dir)
        return Path.home() / ".letta" / "agents" / agent_id / "memory" if agent_id else None

    def _env(self, sample: Sample, memory: Path | None) -> dict[str, str]:
        env = dict(os.environ)
        env["LETTA_BASE_URL"] = base_url_of(self.spec)
        if self.spec.api_key is not None:
            env["LETTA_API_KEY"] = self.spec.api_key.get_secret_value()
        if memory is not None:
            memory.mkdir(parents=True, exist_ok=True)
            env["MEMORY_DIR"] = env["LETTA_MEMORY_DIR"] = str(memory)
        extra = extra_vars(sample).get("env")
        if extra is not None:
            if not isinstance(extra, dict) or not all(isinstance(k, str) for k in extra):
                raise SampleError(
                    f"sample {sample.id}: extra_vars.env must be an object of strings"
                )
            env.update({k: "" if v is None else str(v) for k, v in extra.items()})
        return env

    async def _attempt(
        self, sample: Sample, model: str, need_memory: bool, created: list[str]
    ) -> Trajectory:
        factory_agent = None
        if self.factory is not None:
            factory_agent = await from_factory(
                self.factory, self.client, sample, self.ledger, str(self.spec.agent_script)
            )
            created.append(factory_agent)
        cmd = [self.spec.command, "--output-format", "stream-json", "--model", model]
        if not self.spec.permission_mode:
            cmd.append("--yolo")
        cmd += ["--agent", factory_agent] if factory_agent else ["--new-agent"]
        cmd += self.flags
        if self.spec.permission_mode:
            cmd += ["--permission-mode", self.spec.permission_mode]
        cmd.append("-p")
        inputs = sample.input if isinstance(sample.input, list) else [sample.input]
        prompt = "\n".join(inputs).replace("{pwd}", self.ctx.base_dir.resolve().as_posix())
        memory = self._memory_dir(sample, factory_agent)
        events, stderr = await self._run_cli(
            cmd, prompt, self._env(sample, memory), str(memory or self.cwd)
        )
        init = next(
            (e for e in events if e.get("type") == "system" and e.get("subtype") == "init"), {}
        )
        agent_id = init.get("agent_id") or factory_agent
        if agent_id and agent_id not in created:
            created.append(agent_id)
            self.ledger.add([agent_id], None)
        return await self._trace(
            events, stderr, agent_id, init.get("conversation_id"), model, need_memory
        )

    async def _run_cli(
        self, cmd: list[str], prompt: str, env: dict[str, str], cwd: str
    ) -> tuple[list[dict[str, Any]], str]:
        proc = await asyncio.create_subprocess_exec(
            *cmd,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )
        try:
            out, err = await asyncio.wait_for(
                proc.communicate(prompt.encode("utf-8")), self.spec.timeout
            )
        except (TimeoutError, asyncio.CancelledError) as exc:
            import signal

            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            await proc.wait()
            if isinstance(exc, asyncio.CancelledError):
                raise
            raise SampleError(f"letta did not finish within {self.spec.timeout:g} s") from None
        events = []
        for line in out.decode("utf-8", "replace").splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict):
                events.append(event)
        tail = " ".join(err.decode("utf-8", "replace").split())[-STDERR_TAIL:]
        if proc.returncode != 0:
            failed = next((e for e in reversed(events) if e.get("type") == "error"), None)
            why = failed.get("message") if failed else tail or "no output"
            raise SampleError(
                f"letta exited with code {proc.returncode}: {' '.join(str(why).split())[:STDERR_TAIL]}"
            )
        return events, tail

    async def _trace(
        self,
        events: list[dict[str, Any]],
        stderr: str,
        agent_id: str | None,
        conversation: str | None,
        model: str,
        need_memory: bool,
    ) -> Trajectory:
        result = next((e for e in reversed(events) if e.get("type") == "result"), None)
        if result is None or result.get("subtype") != "success":
            why = (
                (result or {}).get("result")
                or (result or {}).get("subtype")
                or stderr
                or "no result event"
            )
            raise SampleError(f"letta reported no successful result: {why}")
        if not agent_id:
            raise SampleError("letta reported no agent id")
        traj = Trajectory()
        try:  # the server's answers in all, however they drip or page on
            async with asyncio.timeout(self.spec.timeout):
                messages = await self._messages(agent_id, conversation)
                if need_memory:
                    traj.memory_blocks.update(await memory_blocks(self.client, agent_id))
        except TimeoutError:
            raise SampleError(
                f"reading the run back from the Letta server took over {self.spec.timeout:g} s"
            ) from None
        traj.turns.append(to_turn(messages))
        usage = result.get("usage") or {}
        traj.usage.add(usage.get("prompt_tokens"), usage.get("completion_tokens"))
        traj.metadata.update(
            agent_id=agent_id,
            model=model,
            conversation_id=conversation,
            duration_ms=result.get("duration_ms"),
        )
        return traj

    async def _messages(self, agent_id: str, conversation: str | None) -> list[dict[str, Any]]:
        """The run's messages as the server lists them (system messages left out), at most
        :data:`MAX_TRACE_MESSAGES`: a server paging on for ever fails the sample, not the memory."""
        client = self.client
        if conversation:
            page = client.conversations.messages.list(conversation, limit=1000, order="asc")
        else:
            page = client.agents.messages.list(agent_id, limit=1000, order="asc")
        messages = await listed(page, MAX_TRACE_MESSAGES, "messages for one run")
        return [m for m in dump(messages) if m.get("message_type") != "system_message"]
