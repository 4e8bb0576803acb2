"""The agents a run creates on a Letta server: imports that survive the server's transient
failures, deletes, and the ledger of what is left (shared by the Letta target and the judge).

A real Letta 0.16.8 server on Postgres deadlocks now and then when agents are imported
concurrently (``deadlock detected`` on ``INSERT INTO tools_agents``), which it returns as
``HTTP 400 … Import failed``; it may also answer 409, 5xx or drop the connection. Those are retried
as :mod:`ci_evals.letta.retries` says (the shared backoff: jittered, capped, bounded), and every
retry is counted. ``letta_client`` is imported only inside functions.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from ci_evals._util.errors import SampleError
from ci_evals._util.netcause import SYSTEMATIC, cause_of
from ci_evals._util.redact import MESSAGE_LIMIT, scrub_and_shorten
from ci_evals.core.sample import Sample
from ci_evals.letta.retries import import_backoff, server_asked, transient
from ci_evals.usercode.contain import contained

T = TypeVar("T")

if TYPE_CHECKING:  # the summary.json types only: importing ci_evals.letta loads no pydantic
    from ci_evals.results.records import LettaAgent, LettaBlock


def shown_url(url: str) -> str:
    """The URL without any user:password part, for messages."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


def timed_out(base_url: str) -> str:
    """The line for a Letta call past its deadline (the SDK's own timeout or ours)."""
    return f"Letta request timed out ({shown_url(base_url)})"


def describe(exc: BaseException, base_url: str) -> str:
    """One line for a failed Letta call, scrubbed whole and then cut (a server may echo the key)."""
    return scrub_and_shorten(_describe(exc, base_url), MESSAGE_LIMIT)


def _describe(exc: BaseException, base_url: str) -> str:
    import letta_client

    if isinstance(exc, letta_client.APITimeoutError) and _cause(exc, base_url).kind == "timeout":
        return timed_out(base_url)
    if isinstance(exc, letta_client.APIConnectionError):
        cause = _cause(exc, base_url)
        said = (
            "nothing listens there (connection refused)"
            if cause.kind == "refused"
            else cause.message
        )
        return f"cannot reach the Letta server at {shown_url(base_url)}: {said}"
    if isinstance(exc, letta_client.APIStatusError):
        body = exc.body
        detail = body.get("detail", body) if isinstance(body, dict) else body
        req = exc.response.request
        return f"Letta returned HTTP {exc.status_code} for {req.method} {req.url.path}: {detail}"
    if isinstance(exc, SampleError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


def _cause(exc: BaseException, base_url: str):
    return cause_of(exc, base_url)


def systematic_kind(exc: BaseException, base_url: str) -> str | None:
    """The breaker's cause for a failed Letta call (:mod:`ci_evals._util.breaker`), or None."""
    import letta_client

    if isinstance(exc, letta_client.APIStatusError):
        return f"http_{exc.status_code}" if exc.status_code in (401, 403, 404) else None
    if isinstance(exc, letta_client.APIConnectionError):
        kind = _cause(exc, base_url).kind
        return kind if kind in SYSTEMATIC else None
    return None


DELETES_AT_ONCE = 8
"""Deletes in flight at once: 12 agents took 0.99 s one by one and 0.52 s eight at a time on a
real Letta 0.16.8 (its database is the bound)."""
SETTLE_S = 5.0  # how long a sent import may still answer once its sample is cancelled


async def import_file(
    client: Any,
    name: str,
    data: bytes,
    project_id: str | None,
    ledger: AgentLedger,
    agent_name: str | None,
    **options: Any,
) -> tuple[list[str], int]:
    """``POST /v1/agents/import`` of an .af, retried on transient failures (:mod:`ci_evals.letta.retries`).

    Returns (the new agents' ids, retries used); the ids are in ``ledger`` as soon as they are
    known. A 5xx or a dropped connection may come after the server made the agent: such an agent is
    unknown to us, so only failures before any agent was made (a deadlocked import rolls back) are
    retried blindly; the others are retried too, since an import that failed with them left nothing
    in every case measured on 0.16.8.

    A sample cancelled (Ctrl-C, a time limit) while its import is on the wire lets that request
    answer for up to :data:`SETTLE_S` seconds, so the agent the server made is in the ledger and
    deleted at close; one still unanswered then is named by the ledger as possibly left over.
    """
    from letta_client import omit

    policy = import_backoff()
    while True:
        request = asyncio.ensure_future(
            client.agents.import_file(
                file=(name, data, "application/json"), project_id=project_id or omit, **options
            )
        )
        try:
            resp = await settled(request, ledger, agent_name, _imported)
        except Exception as exc:
            wait = policy.next_wait(server_asked(exc)) if transient(exc) else None
            if wait is None:
                exc.retries = policy.retries  # type: ignore[attr-defined]
                exc.exhausted = policy.retries > 0  # type: ignore[attr-defined]  # retried enough: no new attempt
                raise
            await asyncio.sleep(wait)
            continue
        ids = list(resp.agent_ids)
        ledger.add(ids, agent_name)
        return ids, policy.retries


def _imported(resp: Any) -> list[str]:
    return list(resp.agent_ids)


async def settled(
    call: asyncio.Future[T],
    ledger: AgentLedger,
    name: str | None,
    ids_of: Callable[[T], list[str]],
) -> T:
    """``call``'s result (it makes agents: an import, an ``agent_script`` factory). When the sample
    awaiting it is cancelled meanwhile (Ctrl-C, a time limit), the call may still finish for up
    to :data:`SETTLE_S` seconds: the agents it made (``ids_of`` its result) go into ``ledger``,
    deleted at close; one still running then is cancelled and ``name``d in
    ``ledger.unanswered`` (what it made, if anything, is unknown)."""
    try:
        return await asyncio.shield(call)
    except asyncio.CancelledError:
        made = await _settle(call, ids_of)
        if made is None:
            ledger.unanswered.append(name)
        else:
            ledger.add(made, name)
        raise


async def from_factory(
    factory: Callable[..., Any], client: Any, sample: Sample, ledger: AgentLedger, ref: str
) -> str:
    """The id of the agent the ``agent_script`` factory ``ref`` makes for ``sample``, in
    ``ledger`` (deleted at close). The factory runs as its own task (a sync one on a thread: it may
    block on its own client), so a sample cancelled meanwhile lets it finish, as an import does
    (:func:`settled`); SystemExit and the like from it are that sample's error."""
    call = asyncio.ensure_future(_made_by(factory, client, sample))
    result = await settled(call, ledger, f"agent_script {ref}", _factory_ids)
    ids = _factory_ids(result)
    if not ids:
        raise SampleError(f"agent factory {ref} returned {result!r}, not an agent id")
    ledger.add(ids, getattr(result, "name", None))
    return ids[0]


async def _made_by(factory: Callable[..., Any], client: Any, sample: Sample) -> Any:
    with contained():  # inside the task that runs the factory: an escape never ends the loop
        if inspect.iscoroutinefunction(factory):
            return await factory(client, sample)
        result = await asyncio.to_thread(factory, client, sample)
        return await result if inspect.isawaitable(result) else result


def _factory_ids(result: Any) -> list[str]:
    """The agent a factory's answer names (an id, or an object with ``.id``), if any."""
    agent_id = getattr(result, "id", result)
    return [agent_id] if isinstance(agent_id, str) and agent_id else []


async def _settle(request: asyncio.Future[T], ids_of: Callable[[T], list[str]]) -> list[str] | None:
    """The ids a cancelled sample's call made ([] when it failed), or None when it did not answer
    within :data:`SETTLE_S` (then it is cancelled too). More cancels meanwhile do not shorten the
    wait: one stop arrives as several (gather cancels its workers, the runner once more)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + SETTLE_S
    while not request.done() and (left := end - loop.time()) > 0:
        try:
            await asyncio.wait({request}, timeout=left)
        except asyncio.CancelledError:  # the same stop again: the bound still holds
            continue
    if not request.done():
        request.cancel()
        return None
    if request.cancelled() or request.exception() is not None:
        return []  # the server refused it or the connection failed: nothing was made
    return ids_of(request.result())


async def delete_agent(
    client: Any, agent_id: str, base_url: str, timeout: float | None = None
) -> str | None:
    """Delete an agent, once more on failure; a 404 means it is already gone. ``timeout``: seconds
    each try may take in all (httpx's own bound is per read: a server dripping its answer would
    hold the run's end).

    Returns None when the agent is gone, else why it could not be deleted (one line).
    """
    import letta_client

    why = None
    for _ in range(2):
        try:
            async with asyncio.timeout(timeout):
                await client.agents.delete(agent_id)
            return None
        except letta_client.NotFoundError:
            return None
        except TimeoutError:
            why = timed_out(base_url)
        except Exception as exc:  # reported by the ledger
            why = describe(exc, base_url)
    return why


class AgentLedger:
    """Agents created on the server: live until deleted, kept on purpose, or left over."""

    def __init__(self, base_url: str, timeout: float | None = None) -> None:
        self.base_url = base_url
        self.timeout = timeout  # seconds a delete may take in all
        self.live: dict[str, str | None] = {}  # id -> name
        self.kept: list[LettaAgent] = []
        self.leftover: list[LettaAgent] = []
        self.errors: dict[str, str] = {}
        self.unanswered: list[str | None] = []  # names of imports cut off unanswered (ids unknown)

    def add(self, agent_ids: list[str], name: str | None) -> None:
        for agent_id in agent_ids:
            self.live[agent_id] = name

    async def forget(self, client: Any, agent_ids: list[str]) -> None:
        """Delete these agents, :data:`DELETES_AT_ONCE` at a time (a stopped run's close has a
        sample's worth per worker, and a cancelled CI job a few seconds); one whose delete fails
        stays live (tried again at close)."""
        gate = asyncio.Semaphore(DELETES_AT_ONCE)

        async def one(agent_id: str) -> None:
            async with gate:
                why = await delete_agent(client, agent_id, self.base_url, self.timeout)
            if why is None:
                self.live.pop(agent_id, None)
                self.errors.pop(agent_id, None)
            else:
                self.errors[agent_id] = why

        if len(agent_ids) == 1:  # a sample's own agent: no task to make
            await one(agent_ids[0])
        elif agent_ids:
            await asyncio.gather(*(one(a) for a in agent_ids))

    def keep(self, agent_ids: list[str]) -> None:
        for agent_id in agent_ids:
            if agent_id in self.live:
                self.kept.append({"id": agent_id, "name": self.live.pop(agent_id)})

    async def close(self, client: Any | None) -> None:
        """Delete what is still live; what cannot be deleted becomes a leftover (id, name, error)."""
        if client is not None and self.live:
            await self.forget(client, sorted(self.live))
        for agent_id, name in sorted(self.live.items()):
            self.leftover.append(
                {"id": agent_id, "name": name, "error": self.errors.get(agent_id) or "not deleted"}
            )
        self.live.clear()

    def report(self) -> LettaBlock:
        block: LettaBlock = {"leftover_agents": list(self.leftover), "kept_agents": list(self.kept)}
        if self.unanswered:
            block["unanswered_imports"] = [n or "unnamed" for n in self.unanswered]
        return block


def letta_report(ledgers: list[AgentLedger]) -> LettaBlock | None:
    """summary.json's ``letta`` block from the ledgers of the target and the graders (None if empty).

    ``base_url`` (without credentials) is the server of the first ledger that has agents to show.
    """
    return merge_blocks([{**g.report(), "base_url": shown_url(g.base_url)} for g in ledgers])


def merge_blocks(blocks: list[LettaBlock]) -> LettaBlock | None:
    """One ``letta`` block from several (the target's and the graders' ledgers, or the shards'
    summaries): their agents one after the other, the first server that has some; None if empty."""
    shown = [
        b
        for b in blocks
        if b.get("leftover_agents") or b.get("kept_agents") or b.get("unanswered_imports")
    ]
    if not shown:
        return None
    block: LettaBlock = {
        "leftover_agents": [a for b in shown for a in b.get("leftover_agents") or []],
        "kept_agents": [a for b in shown for a in b.get("kept_agents") or []],
    }
    unanswered = [n for b in shown for n in b.get("unanswered_imports") or []]
    if unanswered:
        block["unanswered_imports"] = unanswered
    block["base_url"] = shown[0].get("base_url") or ""
    return block
