"""``kind: command``: run the user's program once per sample.

The sample is written as JSON to the program's stdin; its stdout is the answer (plain text, or
JSON ``{output}`` / ``{messages}``, which may report its ``usage``, ``steps`` and ``cost_usd``:
:mod:`ci_evals.targets.io`; a reported cost is charged to the run's budget). A non-zero exit or a timeout is an error for that sample,
with the tail of stderr. The program runs in its own session; when its sample ends (answer,
timeout or interruption) everything it started is killed (see :mod:`ci_evals._util.procs`).

Memory stays flat whatever the program writes: stdout past ``max_output_mb`` (default 8 MiB) is
an error for that sample (the program is killed at once, not read to its end), and of stderr only
the last :data:`STDERR_KEEP` bytes are kept, which is all an error message shows.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
from asyncio.subprocess import Process

from pydantic import Field

from ci_evals._util.errors import ConfigError, SampleError
from ci_evals._util.procs import MARKER, kill_tree, new_marker
from ci_evals._util.text import shorten
from ci_evals._util.textsafe import decode
from ci_evals.config.specs import MAX_TIMEOUT, Context, TargetSpec
from ci_evals.core.sample import Sample
from ci_evals.core.trajectory import Trajectory
from ci_evals.targets.base import Target
from ci_evals.targets.io import parse_answer, sample_payload, tail

POLL_SECONDS = 0.05
PIPE_GRACE = 1.0
"""Seconds the pipes may stay open after the program exited (a leftover child holding them)."""
CLOSE_WAIT = 1.0
"""Seconds to wait for stdin's pipe to report its close (to take its error, if any)."""
STDERR_KEEP = 64 * 1024
"""Bytes of a program's stderr kept (the end: where the error usually is)."""


class CommandSpec(TargetSpec):
    command: list[str] | str
    timeout: float = Field(default=300.0, gt=0, le=MAX_TIMEOUT)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    max_output_mb: float = Field(
        default=8.0,
        gt=0,
        le=1024,
        description="MiB of stdout read per sample; more is an error for the sample.",
    )


class CommandTarget(Target[CommandSpec]):
    spec_model = CommandSpec

    def __init__(self, spec: CommandSpec, ctx: Context) -> None:
        super().__init__(spec, ctx)
        try:
            argv = (
                shlex.split(spec.command) if isinstance(spec.command, str) else list(spec.command)
            )
        except ValueError as exc:  # an unbalanced quote
            raise ConfigError(f"cannot split the command: {exc}", key="target.command") from None
        if not argv:
            raise ConfigError("'command' is empty", key="target.command")
        self.argv = argv
        self.cwd = str(ctx.resolve(spec.cwd)) if spec.cwd else str(ctx.base_dir)
        if spec.cwd and not os.path.isdir(self.cwd):
            raise ConfigError(f"folder not found: {shorten(self.cwd)}", key="target.cwd")
        self._live: dict[int, str] = {}  # pid -> marker of each running command

    async def run(
        self, sample: Sample, *, run: int = 0, model: str | None = None, need_memory: bool = False
    ) -> Trajectory:
        self.ctx.budget.check()  # the run's budget spent: not started
        marker = new_marker()
        env = {**os.environ, **self.spec.env, MARKER: marker}
        try:
            proc = await asyncio.create_subprocess_exec(
                *self.argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=self.cwd,
                env=env,
                start_new_session=True,
            )
        except OSError as exc:
            raise SampleError(f"cannot start {self.argv[0]!r}: {exc.strerror or exc}") from None
        self._live[proc.pid] = marker
        # Each of the three was asked for as a PIPE, so each is there.
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        data = json.dumps(sample_payload(sample, run, model)).encode()
        out, err = bytearray(), bytearray()
        cap = int(self.spec.max_output_mb * 1024 * 1024)
        readers = [
            asyncio.create_task(_drain(proc.stdout, out, cap)),
            asyncio.create_task(_drain(proc.stderr, err, None)),
        ]
        try:
            async with asyncio.timeout(self.spec.timeout):
                await _feed(proc.stdin, data)
                await _finish(proc, readers)
        except TimeoutError:
            raise SampleError(
                f"command timed out after {self.spec.timeout:g} s; stderr: {tail(bytes(err))}"
            ) from None
        finally:
            # Whatever happened (answer, timeout, cancel), nothing the command started outlives it,
            # and nobody waits on pipes a leftover child might hold.
            self._kill(proc)
            for r in readers:
                r.cancel()
            _close(proc)
        if proc.returncode != 0:
            raise SampleError(
                f"command exited with code {proc.returncode}; stderr: {tail(bytes(err))}"
            )
        text, replaced = decode(bytes(out))
        traj = parse_answer(text)
        self.ctx.budget.charge(traj.metadata.get("cost_usd"))
        if replaced:
            traj.metadata["replaced_chars"] = replaced
        return traj

    def _kill(self, proc: Process) -> None:
        marker = self._live.pop(proc.pid, None)
        kill_tree(proc.pid, marker)

    async def aclose(self) -> None:
        for pid, marker in list(self._live.items()):
            self._live.pop(pid, None)
            kill_tree(pid, marker)


async def _drain(stream: asyncio.StreamReader, buf: bytearray, cap: int | None) -> None:
    """Read ``stream`` into ``buf``: SampleError past ``cap`` bytes; without a cap, keep the last
    STDERR_KEEP bytes."""
    while chunk := await stream.read(1 << 16):
        buf += chunk
        if cap is None:
            if len(buf) > 2 * STDERR_KEEP:
                del buf[:-STDERR_KEEP]
        elif len(buf) > cap:
            raise SampleError(
                f"command wrote more than {cap / 1048576:g} MiB to stdout (max_output_mb); "
                "it was stopped"
            )


async def _feed(stdin: asyncio.StreamWriter, data: bytes) -> None:
    try:
        stdin.write(data)
        await stdin.drain()
    except (BrokenPipeError, ConnectionResetError):
        pass  # the program did not read its input: its exit code and output tell the rest
    finally:
        stdin.close()
        # The pipe's close carries the same error. Python 3.11.2 (Debian 12, the image's) logs it
        # as "Future exception was never retrieved" with a traceback unless it is awaited.
        try:
            async with asyncio.timeout(CLOSE_WAIT):
                await stdin.wait_closed()
        except (OSError, TimeoutError):
            pass


async def _finish(proc: Process, readers: list[asyncio.Task[None]]) -> None:
    """Wait for the program to exit and its output to end.

    asyncio's ``wait()`` also waits for the pipes to close, which a background child of the
    program can hold open for ever; so watch the exit status itself, then allow the pipes
    ``PIPE_GRACE`` seconds to drain before taking what was written.
    """
    while proc.returncode is None:
        done, _ = await asyncio.wait(readers, timeout=POLL_SECONDS)
        for task in done:
            # Output over the cap: stop now (the caller kills the tree).
            if (exc := task.exception()) is not None:
                raise exc
        if len(done) == len(readers):  # both pipes closed: wait() returns promptly now
            await proc.wait()
            return
    done, _ = await asyncio.wait(readers, timeout=PIPE_GRACE)
    for task in done:
        if (exc := task.exception()) is not None:
            raise exc


def _close(proc: Process) -> None:
    """Close the pipes' transport so no file descriptor outlives the sample."""
    transport = getattr(proc, "_transport", None)
    if transport is not None:
        transport.close()
