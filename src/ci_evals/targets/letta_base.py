"""What both Letta targets share (``kind: agent`` / ``letta_agent`` and ``kind: letta_code``).

The server their spec names, the AsyncLetta client (made on first use, so a ``setup_script`` may
receive it), the ledger of the agents a run creates (live, kept with ``cleanup: false``, left
over), and closing: the agents whose delete failed are tried once more, then the client closes.
"""

from __future__ import annotations

from typing import Any

from typing_extensions import TypeVar

from ci_evals.config.specs import Context, TargetSpec
from ci_evals.letta.agents import AgentLedger
from ci_evals.letta.client import LettaServer, base_url_of, make_client
from ci_evals.targets.base import Target


class LettaSpec(TargetSpec, LettaServer):
    """The fields both Letta targets have: their kind and the server (``base_url``, ``api_key``,
    ``project_id``, ``timeout``)."""


LettaSpecT_co = TypeVar("LettaSpecT_co", bound=LettaSpec, covariant=True, default=LettaSpec)
"""A Letta target's spec type (see :data:`ci_evals.targets.base.SpecT_co`)."""


class LettaBase(Target[LettaSpecT_co]):
    """A target that talks to a Letta server: its client, its agents' ledger, closing both."""

    def __init__(self, spec: LettaSpecT_co, ctx: Context) -> None:
        super().__init__(spec, ctx)
        self.base_url = base_url_of(spec)
        # live, kept (cleanup: false) and left-over agents
        self.ledger = AgentLedger(self.base_url, spec.timeout)
        self._client: Any = None

    @property
    def client(self) -> Any:
        """The AsyncLetta client (made on first use; a ``setup_script`` may receive it)."""
        if self._client is None:
            self._client = make_client(self.spec)
        return self._client

    async def start(self) -> None:
        self.client  # noqa: B018 - create it now

    async def aclose(self) -> None:
        if self._client is None:
            return
        await self.ledger.close(
            self._client
        )  # agents of failed deletes: tried once more, else reported
        await self._client.close()
        self._client = None
