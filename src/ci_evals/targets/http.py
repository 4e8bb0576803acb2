"""``kind: http``: POST each sample as JSON to the user's agent service.

Header values may come from environment variables (``headers: {Authorization: {env: TOKEN,
prefix: "Bearer "}}``) so secrets never sit in the suite file. The response body is the answer
(plain text, or JSON ``{output}``/``{messages}``, which may report its ``usage``, ``steps`` and
``cost_usd``: :mod:`ci_evals.targets.io`; a reported cost is charged to the run's budget); a non-2xx status is an error for that sample.

With ``max_retries``, a request that failed on the way (a dropped or refused connection, a
timeout) or was answered 408, 425, 429 or 5xx is sent again, as
:func:`ci_evals._util.retry.attempt_backoff` waits (jittered, doubling from ``retry_backoff``,
raised to the service's ``Retry-After``); any other answer is final. The sample's record counts
the retries (``retries``), and an error after them says how many attempts it took.
"""

from __future__ import annotations

import asyncio
import os
from typing import TYPE_CHECKING

from pydantic import Field

from ci_evals._util.bounds import check_url
from ci_evals._util.errors import ConfigError, SampleError
from ci_evals._util.netcause import IDLE_REUSE_S
from ci_evals._util.redact import MESSAGE_LIMIT, register, scrub_and_shorten
from ci_evals._util.retry import RETRY_BACKOFF_HELP, attempt_backoff, retry_after
from ci_evals.config.specs import MAX_TIMEOUT, Context, Strict, TargetSpec
from ci_evals.core.sample import Sample
from ci_evals.core.trajectory import Trajectory
from ci_evals.targets.base import Target
from ci_evals.targets.io import parse_answer, sample_payload

if TYPE_CHECKING:
    import httpx  # imported by start(), not at load: the suite loads without it


class EnvValue(Strict):
    env: str
    prefix: str = ""


class HttpSpec(TargetSpec):
    url: str
    headers: dict[str, str | EnvValue] = Field(default_factory=dict)
    timeout: float = Field(default=300.0, gt=0, le=MAX_TIMEOUT)
    max_response_mb: float = Field(
        default=8.0,
        gt=0,
        le=1024,
        description="MiB of response body read per sample; more is an error for the sample.",
    )
    max_retries: int = Field(
        0,
        ge=0,
        description="Extra attempts of a sample whose request failed on the way (connection, "
        "timeout) or was answered 408, 425, 429 or 5xx.",
    )
    retry_backoff: float = Field(1.0, ge=0, description=RETRY_BACKOFF_HELP)


RETRIED_STATUSES = frozenset({408, 425, 429})
"""Answers worth another attempt besides 5xx: the service may answer the same request later."""


class _Transient(Exception):
    """An attempt's failure worth another one: ``why`` (after "HTTP target "), the service's
    ``Retry-After`` in seconds (``asked``) if it gave one."""

    def __init__(self, why: str, asked: float | None = None) -> None:
        super().__init__(why)
        self.why, self.asked = why, asked


class HttpTarget(Target[HttpSpec]):
    spec_model = HttpSpec

    def __init__(self, spec: HttpSpec, ctx: Context) -> None:
        super().__init__(spec, ctx)
        if not spec.url.startswith(("http://", "https://")):
            raise ConfigError("'url' must start with http:// or https://", key="target.url")
        check_url(spec.url, "target.url")
        self.client: httpx.AsyncClient | None = None
        self._secrets: list[str] = []

    def _headers(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for name, value in self.spec.headers.items():
            if isinstance(value, EnvValue):
                if value.env not in os.environ:
                    raise ConfigError(
                        f"environment variable {value.env} is not set", key=f"target.headers.{name}"
                    )
                out[name] = value.prefix + os.environ[value.env]
                self._secrets += [os.environ[value.env], out[name]]
                register(
                    os.environ[value.env]
                )  # masked wherever it shows up, model output included
            else:
                out[name] = value
        return out

    async def start(self) -> None:
        import httpx

        self.client = httpx.AsyncClient(
            timeout=self.spec.timeout,
            headers=self._headers(),
            limits=httpx.Limits(
                max_connections=None, max_keepalive_connections=200, keepalive_expiry=IDLE_REUSE_S
            ),
        )

    async def run(
        self, sample: Sample, *, run: int = 0, model: str | None = None, need_memory: bool = False
    ) -> Trajectory:
        policy = attempt_backoff(self.spec.retry_backoff, self.spec.max_retries)
        while True:
            self.ctx.budget.check()  # the run's budget spent: not sent
            try:
                traj = await self._attempt(sample, run, model)
            except _Transient as exc:
                wait = policy.next_wait(exc.asked)
                if wait is not None:
                    await asyncio.sleep(wait)
                    continue
                attempts = f" failed after {policy.retries + 1} attempts:" if policy.retries else ""
                raise SampleError(
                    f"HTTP target{attempts} {exc.why}", retries=policy.retries
                ) from None
            if policy.retries:
                traj.metadata["retries"] = policy.retries
            self.ctx.budget.charge(traj.metadata.get("cost_usd"))
            return traj

    async def _attempt(self, sample: Sample, run: int, model: str | None) -> Trajectory:
        """One request and its answer; :class:`_Transient` when another attempt may fare better."""
        import httpx

        cap = int(self.spec.max_response_mb * 1024 * 1024)
        client = self.client
        assert client is not None, "start() opens the client"
        try:
            async with asyncio.timeout(self.spec.timeout):  # the whole request, not each read
                request = client.build_request(
                    "POST", self.spec.url, json=sample_payload(sample, run, model)
                )
                resp = await client.send(request, stream=True)
                try:  # read at most the cap: a huge body is an error, never held whole
                    body = bytearray()
                    async for chunk in resp.aiter_bytes():
                        body += chunk
                        if len(body) > cap:
                            raise SampleError(
                                f"HTTP target response is larger than {cap / 1048576:g} MiB "
                                "(max_response_mb)"
                            )
                    text = bytes(body).decode(resp.encoding or "utf-8", errors="replace")
                finally:
                    await resp.aclose()
        except (httpx.TimeoutException, TimeoutError):
            raise _Transient(f"timed out after {self.spec.timeout:g} s") from None
        except httpx.HTTPError as exc:
            why = scrub_and_shorten(
                f"request failed: {type(exc).__name__}: {exc}", MESSAGE_LIMIT, self._secrets
            )
            if isinstance(exc, httpx.TransportError) and not isinstance(
                exc, httpx.UnsupportedProtocol
            ):
                raise _Transient(why) from None
            raise SampleError(f"HTTP target {why}") from None
        if not 200 <= resp.status_code < 300:
            why = f"returned {resp.status_code}: " + scrub_and_shorten(
                text, MESSAGE_LIMIT, self._secrets, tail=True
            )
            if resp.status_code >= 500 or resp.status_code in RETRIED_STATUSES:
                raise _Transient(why, retry_after(resp.headers))
            raise SampleError(f"HTTP target {why}")
        return parse_answer(text)

    async def aclose(self) -> None:
        if self.client is not None:
            await self.client.aclose()
