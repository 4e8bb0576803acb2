"""``kind: http``: POST each sample as JSON to the user's agent service.

Header values may come from environment variables (``headers: {Authorization: {env: TOKEN,
prefix: "Bearer "}}``) so secrets never sit in the suite file. The response body is the answer
(plain text, or JSON ``{output}``/``{messages}``, which may report its ``usage``, ``steps`` and
``cost_usd``: :mod:`ci_evals.targets.io`; a reported cost is charged to the run's budget); a non-2xx status is an error for that sample.
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
        import httpx

        self.ctx.budget.check()  # the run's budget spent: not sent
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
            raise SampleError(f"HTTP target timed out after {self.spec.timeout:g} s") from None
        except httpx.HTTPError as exc:
            raise SampleError(
                scrub_and_shorten(
                    f"HTTP target request failed: {type(exc).__name__}: {exc}",
                    MESSAGE_LIMIT,
                    self._secrets,
                )
            ) from None
        if not 200 <= resp.status_code < 300:
            raise SampleError(
                f"HTTP target returned {resp.status_code}: "
                + scrub_and_shorten(text, MESSAGE_LIMIT, self._secrets, tail=True)
            )
        traj = parse_answer(text)
        self.ctx.budget.charge(traj.metadata.get("cost_usd"))
        return traj

    async def aclose(self) -> None:
        if self.client is not None:
            await self.client.aclose()
