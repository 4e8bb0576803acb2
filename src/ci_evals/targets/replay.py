"""``kind: replay``: grade recorded outputs instead of running anything.

Each line of ``outputs`` (JSONL) has the sample ``id`` and either ``output`` (a string: one
assistant message) or ``messages`` (normalized or OpenAI chat-completions shape), optionally
``memory_blocks`` and what the recorded answer cost and took: ``usage``
(``{prompt_tokens, completion_tokens}``), ``steps``, ``cost_usd`` and ``latency_s`` (the answer's
own latency, used as the sample's; :func:`ci_evals.targets.io.with_reported`). Replaying spends
nothing: ``cost_usd`` is reported, never charged to the run's ``max_cost_usd``. A sample with no recorded output is an error for that sample;
malformed lines are configuration errors naming the line.
"""

from __future__ import annotations

import json

from ci_evals._util.bounds import NOT_READ, loads, orjson_loads, quick_loads
from ci_evals._util.errors import ConfigError, SampleError
from ci_evals.config.specs import Context, TargetSpec
from ci_evals.config.yamlio import regular_file
from ci_evals.core.sample import Sample
from ci_evals.core.trajectory import Trajectory
from ci_evals.targets.base import Target
from ci_evals.targets.io import with_reported


class ReplaySpec(TargetSpec):
    outputs: str


class ReplayTarget(Target[ReplaySpec]):
    spec_model = ReplaySpec
    cpu_only = True  # a lookup in the outputs read at load time

    def __init__(self, spec: ReplaySpec, ctx: Context) -> None:
        super().__init__(spec, ctx)
        self.path = ctx.resolve(spec.outputs)
        # id -> (line, raw JSON bytes): far smaller than parsed dicts for 100k records.
        self.records: dict[str, tuple[int, bytes]] = {}
        if not self.path.exists():
            raise ConfigError(
                "replay outputs file not found", file=str(self.path), key="target.outputs"
            )
        if not self.path.is_dir():
            regular_file(self.path, "replay outputs", key="target.outputs")
        if self.path.is_dir():
            raise ConfigError(
                "replay outputs is a folder, expected a JSONL file",
                file=str(self.path),
                key="target.outputs",
            )
        with self.path.open("rb") as fh:
            for line_no, raw in enumerate(fh, 1):
                rec = quick_loads(raw)  # valid UTF-8 JSON, read as below would read it
                if (
                    rec is NOT_READ
                ):  # anything else: checked step by step, so the error names what is wrong
                    try:
                        text = raw.decode("utf-8")
                    except UnicodeDecodeError as exc:
                        raise ConfigError(
                            f"not UTF-8 text (byte {exc.start})", file=str(self.path), line=line_no
                        ) from None
                    if not text.strip():
                        continue
                    try:
                        rec = loads(text)
                    except ValueError as exc:
                        raise ConfigError(
                            f"invalid JSON: {exc}", file=str(self.path), line=line_no
                        ) from None
                if not isinstance(rec, dict) or "id" not in rec:
                    raise ConfigError(
                        "each line must be an object with an 'id'",
                        file=str(self.path),
                        line=line_no,
                    )
                if "output" not in rec and "messages" not in rec:
                    raise ConfigError(
                        "a record needs 'output' or 'messages'", file=str(self.path), line=line_no
                    )
                self.records[str(rec["id"])] = (line_no, raw)

    async def run(
        self, sample: Sample, *, run: int = 0, model: str | None = None, need_memory: bool = False
    ) -> Trajectory:
        found = self.records.get(str(sample.id))
        if found is None:
            raise SampleError(f"no recorded output for sample id {sample.id!r} in {self.path.name}")
        line, raw = found
        rec = orjson_loads(
            raw
        )  # read (and checked) whole when the suite loaded: the fast reader will do
        if rec is NOT_READ:
            rec = json.loads(raw.decode("utf-8"))
        try:
            traj = with_reported(rec, recorded=True)
        except ValueError as exc:
            raise SampleError(f"{self.path.name}:{line}: {exc}") from None
        traj.metadata.setdefault("latency_s", None)  # replaying took no time worth gating
        return traj
