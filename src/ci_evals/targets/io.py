"""Shared by the ``command`` and ``http`` targets: what a sample looks like on the wire and how a
program's answer becomes a trajectory."""

from __future__ import annotations

import json
from typing import Any

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
    """Plain text -> one assistant message; a JSON object with ``output``/``messages`` -> as given."""
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            obj = json.loads(stripped)
        except ValueError:
            obj = None
        if isinstance(obj, dict) and ("output" in obj or "messages" in obj):
            return trajectory_from_record(obj)
    return Trajectory.from_text(text.rstrip("\n"))


def tail(text: str | bytes, limit: int = 500) -> str:
    """The end of a program's output for a message: scrubbed whole first, then cut."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    text = scrub(text).strip()
    return text if len(text) <= limit else "…" + text[-limit:]
