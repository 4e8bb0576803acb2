"""``kind: command``: run the user's program once per sample.

The sample is written as JSON to the program's stdin; its stdout is the answer (plain text, or
JSON ``{output}`` / ``{messages}``). A non-zero exit or a timeout is an error for that sample,
with the tail of stderr.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex

from pydantic import Field

from ci_evals.errors import ConfigError, SampleError
from ci_evals.models import Sample
from ci_evals.specs import Context, TargetSpec
from ci_evals.targets.base import Target
from ci_evals.targets.io import parse_answer, sample_payload, tail
from ci_evals.textsafe import decode
from ci_evals.trajectory import Trajectory


class CommandSpec(TargetSpec):
    command: list[str] | str
    timeout: float = Field(default=300.0, gt=0)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None


class CommandTarget(Target):
    spec_model = CommandSpec

    def __init__(self, spec: CommandSpec, ctx: Context) -> None:
        super().__init__(spec, ctx)
        argv = shlex.split(spec.command) if isinstance(spec.command, str) else list(spec.command)
        if not argv:
            raise ConfigError("'command' is empty", key="target.command")
        self.argv = argv
        self.cwd = str(ctx.resolve(spec.cwd)) if spec.cwd else str(ctx.base_dir)

    async def run(self, sample: Sample, *, run: int = 0, model: str | None = None,
                  need_memory: bool = False) -> Trajectory:
        env = {**os.environ, **self.spec.env}
        try:
            proc = await asyncio.create_subprocess_exec(
                *self.argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, cwd=self.cwd, env=env,
            )
        except OSError as exc:
            raise SampleError(f"cannot start {self.argv[0]!r}: {exc.strerror or exc}") from None
        data = json.dumps(sample_payload(sample, run, model)).encode()
        try:
            out, err = await asyncio.wait_for(proc.communicate(data), self.spec.timeout)
        except TimeoutError:
            proc.kill()
            _, err = await proc.communicate()
            raise SampleError(f"command timed out after {self.spec.timeout:g} s; stderr: {tail(err)}") from None
        except asyncio.CancelledError:
            proc.kill()
            await proc.wait()
            raise
        if proc.returncode != 0:
            raise SampleError(f"command exited with code {proc.returncode}; stderr: {tail(err)}")
        text, replaced = decode(out)
        traj = parse_answer(text)
        if replaced:
            traj.metadata["replaced_chars"] = replaced
        return traj
