"""Shared by the ``command`` and ``http`` targets: what a sample looks like on the wire and how a
program's answer becomes a trajectory.

A JSON answer (``{output}`` or ``{messages}``) may report what it cost: ``usage``
(``{prompt_tokens, completion_tokens}``), ``steps`` (the agent's model calls) and ``cost_usd``; a
recorded answer (``kind: replay``) also its ``latency_s``. They go to the trajectory's usage and
metadata; a malformed one is an error for that sample, never a silently wrong figure.
"""

from __future__ import annotations

import json
import math
from typing import Any

from ci_evals._util.errors import SampleError
from ci_evals._util.redact import scrub
from ci_evals.core.sample import Sample
from ci_evals.core.trajectory import Trajectory, trajectory_from_record

HIDDEN = frozenset({"ground_truth", "rubric_vars", "rubric", "rubric_path"})
"""What the agent must never see: the expected answer and the per-sample grading instructions."""


def sample_payload(sample: Sample, run: int, model: str | None) -> dict[str, Any]:
    """The JSON a user's program receives for one sample: ``id``, ``input``, ``metadata``, ``tags``,
    ``agent_args``, ``extra_vars`` (without grading-only keys), ``run`` and ``model``. Never the
    ground truth or the rubric fields, so an agent that echoes its input cannot pass."""
    payload = sample.model_dump(mode="json", exclude=set(HIDDEN & set(type(sample).model_fields)))
    extra = payload.get("extra_vars")
    if isinstance(extra, dict) and HIDDEN & extra.keys():
        payload["extra_vars"] = {k: v for k, v in extra.items() if k not in HIDDEN}
    payload["run"] = run
    if model is not None:
        payload["model"] = model
    return payload


def parse_answer(text: str) -> Trajectory:
    """Plain text -> one assistant message; a JSON object with ``output``/``messages`` -> as given,
    with the ``usage``, ``steps`` and ``cost_usd`` it reports (SampleError when one is malformed)."""
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            obj = json.loads(stripped)
        except ValueError:
            obj = None
        if isinstance(obj, dict) and ("output" in obj or "messages" in obj):
            try:
                return with_reported(obj)
            except ReportError as exc:
                raise SampleError(f"the answer's {exc}") from None
    return Trajectory.from_text(text.rstrip("\n"))


class ReportError(ValueError):
    """A figure an answer reports about itself is malformed."""


def with_reported(record: dict[str, Any], *, recorded: bool = False) -> Trajectory:
    """:func:`~ci_evals.core.trajectory.trajectory_from_record` plus what the answer reports:
    ``usage`` into the trajectory's usage, ``steps``, ``cost_usd`` (and, ``recorded``, the
    recorded answer's ``latency_s``) into its metadata. ReportError names a malformed figure;
    the record's own shape errors stay ValueError."""
    usage = _usage(record.get("usage"))
    meta: dict[str, Any] = {}
    steps = record.get("steps")
    if steps is not None:
        if type(steps) is not int or steps < 0:
            raise ReportError(f"'steps' must be a whole number >= 0, got {_shown(steps)}")
        meta["steps"] = steps
    for key in ("cost_usd", "latency_s") if recorded else ("cost_usd",):
        value = record.get(key)
        if value is not None:
            meta[key] = _amount(key, value)
    traj = trajectory_from_record({k: v for k, v in record.items() if k != "usage"})
    traj.usage.add(usage["prompt_tokens"], usage["completion_tokens"])
    traj.metadata.update(meta)
    return traj


def _usage(value: Any) -> dict[str, int]:
    counts = {"prompt_tokens": 0, "completion_tokens": 0}
    if value is None:
        return counts
    if not isinstance(value, dict):
        raise ReportError(
            f"'usage' must be an object {{prompt_tokens, completion_tokens}}, got {_shown(value)}"
        )
    for key in counts:
        n = value.get(key, 0)
        if type(n) is not int or n < 0:
            raise ReportError(f"'usage.{key}' must be a whole number >= 0, got {_shown(n)}")
        counts[key] = n
    return counts


def _amount(key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ReportError(f"'{key}' must be a number >= 0, got {_shown(value)}")
    if value < 0:
        raise ReportError(f"'{key}' must be a number >= 0, got {value!r}")
    return float(value)


def _shown(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, float) else repr(value)
    return text if len(text) <= 40 else text[:39] + "…"


def tail(text: str | bytes, limit: int = 500) -> str:
    """The end of a program's output for a message: scrubbed whole first, then cut."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    text = scrub(text).strip()
    return text if len(text) <= limit else "…" + text[-limit:]
