"""Letta agent target (``kind: agent`` / ``letta_agent``) over letta-client's ``AsyncLetta``.

Each sample talks to one agent: imported fresh from ``agent_file`` (so no state leaks between
samples), made by the ``agent_script`` factory, or the existing ``agent_id`` (shared, so its samples
run one at a time). Each turn of the input is one ``POST /v1/agents/{id}/messages``; the response's
Letta messages become one normalized turn. Agents the run created are deleted when the sample is
done (``cleanup: false`` keeps them; an agent from a failed attempt is always deleted).

The helpers here (client settings, .af reading, import, message mapping) are shared with the
agent-as-judge grader. ``letta_client`` is imported only inside functions.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SecretStr

from ci_evals._util.breaker import Breaker
from ci_evals.errors import ConfigError, SampleError
from ci_evals.models import Sample
from ci_evals.specs import MAX_TIMEOUT, Context, Strict, TargetSpec
from ci_evals.targets.base import Target
from ci_evals.targets.letta_agents import (  # noqa: F401
    AgentLedger,
    describe,
    import_file,
    shown_url,
    systematic_kind,
)
from ci_evals.trajectory import Message, ToolCall, Trajectory, Usage, content_text

DEFAULT_BASE_URL = "http://localhost:8283"
# Stop reasons that mean the server or its model failed, not that the agent chose to stop.
FAILED_STOPS = {
    "error", "llm_api_error", "invalid_llm_response", "insufficient_credits", "cancelled",
    "context_window_overflow_in_system_prompt",
}


# -- connection settings shared by the target and the judge ----------------------------------------


class LettaServer(Strict):
    """Where the Letta server is; unset values come from the environment, never from a YAML default."""

    base_url: str | None = Field(None, description="Default: $LETTA_BASE_URL, else http://localhost:8283.")
    api_key: SecretStr | None = Field(None, description="Default: $LETTA_API_KEY.")
    project_id: str | None = Field(None, description="Default: $LETTA_PROJECT_ID.")
    timeout: float = Field(300.0, gt=0, le=MAX_TIMEOUT,
                           description="Seconds each Letta call may take in all (not per read: a server "
                                       "dripping bytes cannot stretch it).")


class AgentFileImport(Strict):
    """How an .af is imported: like letta-evals, without replacing the server's tools by default."""

    override_existing_tools: bool = Field(
        False, description="Replace the server's tools of the same name with the .af's source (Letta's "
                           "default; letta-evals never does). Off: the agent runs the tool the server has.")


def base_url_of(spec: LettaServer) -> str:
    """The server URL: the spec, else $LETTA_BASE_URL, else localhost; a trailing /v1 is dropped."""
    url = (spec.base_url or os.environ.get("LETTA_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


def project_of(spec: LettaServer) -> str | None:
    return spec.project_id or os.environ.get("LETTA_PROJECT_ID") or None


def make_client(spec: LettaServer) -> Any:
    """An AsyncLetta for this spec. HTTP-level retries are off: retries are whole-sample attempts."""
    from letta_client import AsyncLetta

    from ci_evals.redact import register

    key = spec.api_key.get_secret_value() if spec.api_key else os.environ.get("LETTA_API_KEY")
    register(key)
    return AsyncLetta(base_url=base_url_of(spec), api_key=key or None, project_id=project_of(spec),
                      timeout=spec.timeout, max_retries=0)


def retryable(exc: BaseException) -> bool:
    """Worth another attempt: anything but a client error (4xx other than 408, 409, 429 and a
    deadlocked import)."""
    import letta_client

    from ci_evals.targets.letta_agents import transient

    if isinstance(exc, letta_client.APIStatusError):
        return transient(exc)
    return True


def backoff(exc: BaseException | None, seconds: float) -> float:
    """The wait before a retry: ``seconds``, or longer when the server sent Retry-After."""
    import letta_client

    from ci_evals._util.retry import retry_after

    if isinstance(exc, letta_client.APIStatusError):
        asked = retry_after(exc.response.headers)
        if asked is not None:
            return max(seconds, min(asked, MAX_RETRY_AFTER))
    return seconds


MAX_RETRY_AFTER = 60.0
"""A Letta server's ``Retry-After`` is honoured up to this many seconds."""


def stop_line(breaker: Any, exc: BaseException, base_url: str, what: str) -> SampleError:
    """Count a final failure in the breaker; the SampleError to raise (printing the stop line once)."""
    import sys

    from ci_evals.targets.letta_agents import systematic_kind

    kind = systematic_kind(exc, base_url)
    hint = {"dns": "check the host in base_url / LETTA_BASE_URL",
            "refused": "is the Letta server running? check base_url / LETTA_BASE_URL",
            "tls": "check the scheme (http/https) and the server's certificate",
            "http_401": "check LETTA_API_KEY (or the target's api_key)",
            "http_403": "check that the key may use this project and agent",
            "http_404": "check agent_id / the server's URL"}.get(kind or "", "")
    line = f"stopped calling the Letta server at {shown_url(base_url)}: {describe(exc, base_url)} ({hint})"
    if breaker.failure(kind, line):
        print(f"error: {line}", file=sys.stderr)
    return SampleError(f"{what}: {describe(exc, base_url)}")


# -- agent files ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class AgentFile:
    """An .af file read and checked once: its bytes are uploaded for every import."""

    ref: str  # as written in the suite (used in messages)
    path: Path
    data: bytes
    doc: dict[str, Any]

    @property
    def agent(self) -> dict[str, Any]:
        return self.doc["agents"][0]

    @property
    def tools(self) -> list[dict[str, Any]]:
        return [t for t in self.doc.get("tools") or [] if isinstance(t, dict)]


def read_agent_file(ref: str, ctx: Context, key: str) -> AgentFile:
    """Read an .af offline: the extension, existence, JSON, exactly one agent; else ConfigError."""
    path = ctx.resolve(ref)
    if path.suffix != ".af":
        raise ConfigError(f"agent file must have the .af extension: {ref}", key=key)
    if not path.is_file():
        raise ConfigError(f"agent file not found: {path}", key=key)
    data = path.read_bytes()
    ctx.files_read.add(path.resolve())  # the agent decides the grades: part of the --resume fingerprint
    try:
        doc = json.loads(data)
    except ValueError as exc:
        raise ConfigError(f"agent file {ref} is not valid JSON: {exc}", key=key) from None
    except RecursionError:  # 100,000 nested brackets: not an agent export
        raise ConfigError(f"agent file {ref} is nested too deeply to be an agent export", key=key) from None
    agents = doc.get("agents") if isinstance(doc, dict) else None
    if not isinstance(agents, list) or not all(isinstance(a, dict) for a in agents):
        raise ConfigError(f"agent file {ref} has no 'agents' list; export it with Letta's agent export", key=key)
    if len(agents) != 1:
        raise ConfigError(f"agent file {ref} must hold exactly one agent, found {len(agents)}", key=key)
    return AgentFile(ref=ref, path=path, data=data, doc=doc)


async def import_agent(client: Any, af: AgentFile, project_id: str | None, ledger: AgentLedger,
                       created: list[str], model: str | None = None,
                       override_tools: bool = False) -> tuple[str, int]:
    """Import a fresh copy of the agent (named as in the .af, on ``model`` when given), retrying
    the server's transient failures. Returns (agent id, retries); the id is in ``created`` and
    the ledger as soon as it exists.

    A tool the server already has (same name) is kept unless ``override_tools``: Letta's default
    would replace the organisation's shared tool with the .af's source, which letta-evals never
    does (``override_existing_tools=False`` in every release that imports .af files)."""
    name = str(af.agent.get("name") or af.path.stem)
    extra: dict[str, Any] = {"override_name": name, "override_existing_tools": override_tools}
    if model is not None:
        extra["override_model_handle"] = model
    ids, retries = await import_file(client, af.path.name, af.data, project_id, **extra)
    created.extend(ids)
    ledger.add(ids, name)
    if len(ids) != 1:
        raise SampleError(f"importing {af.ref} created {len(ids)} agents, expected 1")
    return ids[0], retries


# -- Letta messages -> normalized messages -----------------------------------------------------


def calls_of(msg: dict[str, Any]) -> list[ToolCall]:
    """The tool calls of a tool_call/approval_request message (``tool_calls`` list, else ``tool_call``)."""
    raw = msg.get("tool_calls")
    if isinstance(raw, dict):
        raw = [raw]
    if not raw:
        raw = [msg["tool_call"]] if isinstance(msg.get("tool_call"), dict) else []
    out = []
    for i, c in enumerate(raw):
        if not isinstance(c, dict) or not c.get("name"):
            continue
        args = c.get("arguments")
        args = args if isinstance(args, str) else json.dumps(args or {})
        out.append(ToolCall(id=str(c.get("tool_call_id") or f"{msg.get('id', 'call')}_{i}"),
                            name=str(c["name"]), arguments=args))
    return out


def to_turn(messages: list[dict[str, Any]], sent: str | None = None) -> list[Message]:
    """Map one response's Letta messages to a turn.

    ``sent`` (the user text) opens the turn; the server's echo of it is skipped. A tool call joins
    the assistant message of the same step, else starts an assistant message with empty content;
    a tool return becomes ``role=tool`` with the call's id and name.
    """
    turn: list[Message] = [Message(role="user", content=sent)] if sent is not None else []
    names: dict[str, str] = {}
    holder: tuple[Message, Any] | None = None  # the assistant message tool calls may attach to
    echo_pending = sent is not None
    for msg in messages:
        kind = msg.get("message_type")
        if kind == "user_message":
            text = content_text(msg.get("content"))
            if echo_pending and text == sent:
                echo_pending = False
                continue
            turn.append(Message(role="user", content=text))
            holder = None
        elif kind == "system_message":
            turn.append(Message(role="system", content=content_text(msg.get("content"))))
            holder = None
        elif kind in ("reasoning_message", "hidden_reasoning_message"):
            text = msg.get("reasoning") if kind == "reasoning_message" else msg.get("hidden_reasoning")
            turn.append(Message(role="reasoning", content=text or ""))
        elif kind == "assistant_message":
            m = Message(role="assistant", content=content_text(msg.get("content")))
            turn.append(m)
            holder = (m, msg.get("step_id"))
        elif kind in ("tool_call_message", "approval_request_message"):
            calls = calls_of(msg)
            for c in calls:
                names[c.id] = c.name
            step = msg.get("step_id")
            if holder is not None and step is not None and holder[1] == step:
                holder[0].tool_calls.extend(calls)
            elif calls:
                m = Message(role="assistant", content="", tool_calls=calls)
                turn.append(m)
                holder = (m, step)
        elif kind == "tool_return_message":
            returns = msg.get("tool_returns") or []
            if len(returns) <= 1:
                returns = [msg]
            for r in returns:
                cid = r.get("tool_call_id")
                turn.append(Message(role="tool", content=content_text(r.get("tool_return")),
                                    tool_call_id=cid, name=names.get(cid)))
            holder = None
        # approval responses, summaries and events carry nothing to grade
    return turn


def dump(messages: list[Any]) -> list[dict[str, Any]]:
    """letta-client message models as plain dicts."""
    return [m if isinstance(m, dict) else m.model_dump(mode="json") for m in messages]


def add_usage(total: Usage, usage: Any) -> None:
    """Add a LettaResponse's usage (None-safe) to ``total``."""
    if usage is not None:
        total.add(getattr(usage, "prompt_tokens", None), getattr(usage, "completion_tokens", None))


# -- the target ----------------------------------------------------------------------------------


class LettaTargetSpec(TargetSpec, LettaServer, AgentFileImport):
    kind: Literal["agent", "letta_agent"] = "agent"
    agent_file: str | None = Field(None, description="An .af file imported fresh for every sample.")
    agent_id: str | None = Field(None, description="An existing agent, shared by all samples.")
    agent_script: str | None = Field(None, description="'file.py:factory', (client, sample) -> agent id.")
    max_retries: int = Field(0, ge=0, description="Extra attempts of a failed sample run.")
    retry_backoff: float = Field(1.0, ge=0, description="Seconds before the first retry; doubles each time.")
    model_handles: list[str] | None = Field(None, description="Run every sample once per Letta model handle.")
    model_configs: list[str] | None = Field(None, description="letta-evals 0.5 only; use model_handles.")
    cleanup: bool = Field(True, description="Delete the agents the run created (false keeps them).")


class LettaTarget(Target):
    """Runs each sample against a Letta agent and returns the normalized trajectory."""

    spec_model = LettaTargetSpec

    def __init__(self, spec: LettaTargetSpec, ctx: Context) -> None:
        super().__init__(spec, ctx)
        self.spec: LettaTargetSpec = spec
        chosen = [k for k in ("agent_file", "agent_id", "agent_script") if getattr(spec, k)]
        if not chosen:
            raise ConfigError("an agent target needs one of agent_file, agent_id or agent_script", key="target")
        if len(chosen) > 1:
            raise ConfigError(f"an agent target takes only one of agent_file, agent_id, agent_script; "
                              f"got {' and '.join(chosen)}", key="target")
        if spec.model_configs is not None:
            raise ConfigError("model_configs (letta-evals' bundled LLM config files) is not supported; "
                              "list Letta model handles in model_handles, e.g. [openai/gpt-4o-mini]",
                              key="target.model_configs")
        handles = spec.model_handles
        if handles is not None:
            if not handles or len(set(handles)) != len(handles) or not all(h.strip() for h in handles):
                raise ConfigError("model_handles must be a non-empty list of distinct handles",
                                  key="target.model_handles")
            if spec.agent_id:
                raise ConfigError("model_handles cannot be used with agent_id: it would change the model of "
                                  "an agent shared by all samples; use agent_file or agent_script so each "
                                  "sample gets its own agent", key="target.model_handles")
        self.agent_file = read_agent_file(spec.agent_file, ctx, "target.agent_file") if spec.agent_file else None
        self.factory = self._load_factory(spec.agent_script, ctx) if spec.agent_script else None
        self.base_url = base_url_of(spec)
        self.ledger = AgentLedger(self.base_url)  # live, kept (cleanup: false) and left-over agents
        self.breaker = Breaker()  # stops calling a server that never answered (ci_evals._util.breaker)
        self._client: Any = None
        self._lock: asyncio.Lock | None = None

    @staticmethod
    def _load_factory(ref: str, ctx: Context) -> Any:
        from ci_evals.customcode import load_object

        fn = load_object(ref, ctx.base_dir, key="target.agent_script")
        if not callable(fn):
            raise ConfigError(f"'{ref}' is not a function", key="target.agent_script")
        try:
            n = len(inspect.signature(fn).parameters)
        except (TypeError, ValueError):
            n = 2
        if n != 2:
            raise ConfigError(f"agent factory '{ref}' must take (client, sample), it takes {n} parameters",
                              key="target.agent_script")
        return fn

    def models(self) -> list[str | None]:
        return list(self.spec.model_handles) if self.spec.model_handles else [None]

    @property
    def client(self) -> Any:
        """The AsyncLetta client (made on first use; a ``setup_script`` may receive it)."""
        if self._client is None:
            self._client = make_client(self.spec)
        return self._client

    async def start(self) -> None:
        self.client  # noqa: B018 - create it now
        if self._lock is None:
            self._lock = asyncio.Lock()

    async def run(
        self, sample: Sample, *, run: int = 0, model: str | None = None, need_memory: bool = False
    ) -> Trajectory:
        await self.start()
        if self.spec.agent_id:
            if sample.agent_args:
                raise SampleError("agent_args cannot be applied to an existing agent (agent_id); "
                                  "use agent_file or agent_script")
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
        tries = self.spec.max_retries + 1
        error: BaseException | None = None
        retried = [0]  # the server's transient failures retried inside attempts (imports)
        for attempt in range(tries):
            if attempt:
                await asyncio.sleep(backoff(error, self.spec.retry_backoff * 2 ** (attempt - 1)))
            created: list[str] = []
            try:
                traj = await self._attempt(sample, model, need_memory, created, retried)
            except Exception as exc:
                error = exc
                retried[0] += getattr(exc, "retries", 0)
                await self.ledger.forget(self._client, created)
                if not retryable(exc) or getattr(exc, "exhausted", False) or (
                        self.breaker.first_contact and systematic_kind(exc, self.base_url)):
                    break
                continue
            self.breaker.success()
            if attempt + retried[0]:
                traj.metadata["retries"] = attempt + retried[0]
            if self.spec.cleanup:
                await self.ledger.forget(self._client, created)
            else:
                self.ledger.keep(created)
            return traj
        where = f" after {attempt + 1} attempts" if attempt else ""
        failed = stop_line(self.breaker, error, self.base_url, f"Letta agent run failed{where}")
        failed.retries = attempt + retried[0]
        raise failed from error

    async def _within(self, call, path: str):
        """``await call`` with ``timeout`` as a total deadline (httpx's is per read); past it, the
        SDK's timeout error, which the retries and messages already treat as one."""
        try:
            async with asyncio.timeout(self.spec.timeout):
                return await call
        except TimeoutError:
            import httpx
            import letta_client

            raise letta_client.APITimeoutError(request=httpx.Request("POST", self.base_url + path)) from None

    async def _attempt(self, sample: Sample, model: str | None, need_memory: bool,
                       created: list[str], retried: list[int]) -> Trajectory:
        client = self._client
        agent_id = await self._agent_for(sample, model, created, retried)
        traj = Trajectory()
        stops = []
        turns = sample.input if isinstance(sample.input, list) else [sample.input]
        for text in turns:
            resp = await self._within(client.agents.messages.create(
                agent_id, messages=[{"role": "user", "content": text}]), f"/v1/agents/{agent_id}/messages")
            traj.turns.append(to_turn(dump(resp.messages), text))
            add_usage(traj.usage, resp.usage)
            stop = resp.stop_reason.stop_reason if resp.stop_reason else None
            stops.append(stop)
            if stop in FAILED_STOPS:
                raise SampleError(f"the Letta run stopped with '{stop}'")
        if need_memory:
            async def blocks() -> None:
                async for block in client.agents.blocks.list(agent_id):
                    if block.label is not None:
                        traj.memory_blocks[block.label] = block.value

            await self._within(blocks(), f"/v1/agents/{agent_id}/core-memory/blocks")
        if model is None:
            state = await client.agents.retrieve(agent_id)
            cfg = state.llm_config
            model_used = state.model or (cfg.handle if cfg else None) or (cfg.model if cfg else None)
        else:
            model_used = model
        traj.metadata.update(agent_id=agent_id, model=model_used, stop_reasons=stops)
        return traj

    async def _agent_for(self, sample: Sample, model: str | None, created: list[str], retried: list[int]) -> str:
        """The agent this attempt talks to, set up with the sample's agent_args and the model handle."""
        client = self._client
        if self.spec.agent_id:
            return self.spec.agent_id
        args = dict(sample.agent_args or {})
        if self.agent_file is not None:  # the model handle is applied by the import itself
            agent_id, retries = await import_agent(client, self.agent_file, project_of(self.spec), self.ledger,
                                                   created, model, self.spec.override_existing_tools)
            retried[0] += retries
            model = None
        else:
            from ci_evals.usercode import contained

            with contained():  # SystemExit and the like from the factory: that sample's error
                if inspect.iscoroutinefunction(self.factory):
                    result = await self.factory(client, sample)
                else:  # a sync factory may block (its own sync client): keep the event loop free
                    result = await asyncio.to_thread(self.factory, client, sample)
                    if inspect.isawaitable(result):
                        result = await result
            agent_id = getattr(result, "id", result)
            if not isinstance(agent_id, str) or not agent_id:
                raise SampleError(f"agent factory {self.spec.agent_script} returned {result!r}, not an agent id")
            created.append(agent_id)
            self.ledger.add([agent_id], getattr(result, "name", None))
            args = {}  # the factory got the sample and applied its agent_args itself
        blocks = args.pop("memory_blocks", None)
        if model is not None:
            args["model"] = model
        if args:
            await client.agents.update(agent_id, extra_body=args)
        for label, value in _block_values(blocks):
            await client.agents.blocks.update(label, agent_id=agent_id, value=value)
        return agent_id

    async def aclose(self) -> None:
        if self._client is None:
            return
        await self.ledger.close(self._client)  # agents of failed deletes: tried once more, else reported
        await self._client.close()
        self._client = None


def _block_values(blocks: Any) -> list[tuple[str, str]]:
    """agent_args ``memory_blocks``: ``{label: value}`` or ``[{label, value}]``."""
    if not blocks:
        return []
    if isinstance(blocks, dict):
        return [(str(k), str(v)) for k, v in blocks.items()]
    if isinstance(blocks, list) and all(isinstance(b, dict) and "label" in b for b in blocks):
        return [(str(b["label"]), str(b.get("value", ""))) for b in blocks]
    raise SampleError("agent_args.memory_blocks must be {label: value} or a list of {label, value}")
