"""The published JSON Schemas as the same text whichever pydantic generated them."""

from __future__ import annotations

from typing import Any


def portable(schema: Any) -> Any:
    """``schema`` without ``"additionalProperties": true``: JSON Schema's default (no schema of ours
    uses ``unevaluatedProperties``, the one keyword that reads it), which pydantic writes for a
    ``dict[str, Any]`` from 2.11 on and leaves out before, so the schemas docs/ publishes are the
    same text from pydantic 2.10 (the lowest the dependencies allow) to the newest."""
    if isinstance(schema, dict):
        return {
            key: portable(value)
            for key, value in schema.items()
            if not (key == "additionalProperties" and value is True)
        }
    if isinstance(schema, list):
        return [portable(item) for item in schema]
    return schema
