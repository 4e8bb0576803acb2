"""One way to talk to a Letta server, shared by the Letta target and the agent-as-judge grader.

The server's settings (``base_url``, ``api_key``, ``project_id``) and the client made from them
(which calls are worth another try, and how long to wait, is :mod:`ci_evals.letta.retries`),
the one-line stop when the server is systematically unreachable, and reading and
importing ``.af`` agent files (``override_existing_tools`` off by default, as letta-evals: a run
never replaces the organisation's shared tool of the same name). ``letta_client`` is imported
only inside functions, so a suite without Letta never loads it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field, SecretStr

from ci_evals._util.errors import ConfigError, SampleError
from ci_evals._util.netcause import sdk_limits
from ci_evals._util.redact import register
from ci_evals.config.specs import MAX_TIMEOUT, Context, Strict
from ci_evals.letta.agents import (
    AgentLedger,
    describe,
    import_file,
    shown_url,
    systematic_kind,
)

DEFAULT_BASE_URL = "http://localhost:8283"


# -- connection settings shared by the target and the judge ----------------------------------------


class LettaServer(Strict):
    """Where the Letta server is; unset values come from the environment, never from a YAML default."""

    base_url: str | None = Field(
        None, description="Default: $LETTA_BASE_URL, else http://localhost:8283."
    )
    api_key: SecretStr | None = Field(None, description="Default: $LETTA_API_KEY.")
    project_id: str | None = Field(None, description="Default: $LETTA_PROJECT_ID.")
    timeout: float = Field(
        300.0,
        gt=0,
        le=MAX_TIMEOUT,
        description="Seconds each Letta call may take in all (not per read: a server "
        "dripping bytes cannot stretch it).",
    )


class AgentFileImport(Strict):
    """How an .af is imported: like letta-evals, without replacing the server's tools by default."""

    override_existing_tools: bool = Field(
        False,
        description="Replace the server's tools of the same name with the .af's source (Letta's "
        "default; letta-evals never does). Off: the agent runs the tool the server has.",
    )


def base_url_of(spec: LettaServer) -> str:
    """The server URL: the spec, else $LETTA_BASE_URL, else localhost; a trailing /v1 is dropped."""
    url = (spec.base_url or os.environ.get("LETTA_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


def project_of(spec: LettaServer) -> str | None:
    return spec.project_id or os.environ.get("LETTA_PROJECT_ID") or None


def make_client(spec: LettaServer) -> Any:
    """An AsyncLetta for this spec. HTTP-level retries are off: retries are whole-sample attempts.
    Idle connections are reused for ``IDLE_REUSE_S`` at most (the SDK's 5 s is the Letta
    server's own keep-alive, so a call could go out on a connection the server was closing). No
    connection cap (the SDK's is 100): the run's ``max_concurrent`` bounds the calls in flight."""
    from letta_client import AsyncLetta, DefaultAsyncHttpxClient

    key = spec.api_key.get_secret_value() if spec.api_key else os.environ.get("LETTA_API_KEY")
    register(key)
    return AsyncLetta(
        base_url=base_url_of(spec),
        api_key=key or None,
        project_id=project_of(spec),
        timeout=spec.timeout,
        max_retries=0,
        http_client=DefaultAsyncHttpxClient(
            timeout=spec.timeout, limits=sdk_limits(DefaultAsyncHttpxClient, None, 100)
        ),
    )


def stop_line(breaker: Any, exc: BaseException, base_url: str, what: str) -> SampleError:
    """Count a final failure in the breaker; the SampleError to raise (printing the stop line once)."""
    import sys

    kind = systematic_kind(exc, base_url)
    hint = {
        "dns": "check the host in base_url / LETTA_BASE_URL",
        "refused": "is the Letta server running? check base_url / LETTA_BASE_URL",
        "tls": "check the scheme (http/https) and the server's certificate",
        "http_401": "check LETTA_API_KEY (or the target's api_key)",
        "http_403": "check that the key may use this project and agent",
        "http_404": "check agent_id / the server's URL",
    }.get(kind or "", "")
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
    ctx.files_read.add(
        path.resolve()
    )  # the agent decides the grades: part of the --resume fingerprint
    try:
        doc = json.loads(data)
    except ValueError as exc:
        raise ConfigError(f"agent file {ref} is not valid JSON: {exc}", key=key) from None
    except RecursionError:  # 100,000 nested brackets: not an agent export
        raise ConfigError(
            f"agent file {ref} is nested too deeply to be an agent export", key=key
        ) from None
    agents = doc.get("agents") if isinstance(doc, dict) else None
    if not isinstance(agents, list) or not all(isinstance(a, dict) for a in agents):
        raise ConfigError(
            f"agent file {ref} has no 'agents' list; export it with Letta's agent export", key=key
        )
    if len(agents) != 1:
        raise ConfigError(
            f"agent file {ref} must hold exactly one agent, found {len(agents)}", key=key
        )
    return AgentFile(ref=ref, path=path, data=data, doc=doc)


async def import_agent(
    client: Any,
    af: AgentFile,
    project_id: str | None,
    ledger: AgentLedger,
    created: list[str],
    model: str | None = None,
    override_tools: bool = False,
) -> tuple[str, int]:
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
    ids, retries = await import_file(
        client, af.path.name, af.data, project_id, ledger, name, **extra
    )
    created.extend(ids)
    if len(ids) != 1:
        raise SampleError(f"importing {af.ref} created {len(ids)} agents, expected 1")
    return ids[0], retries
