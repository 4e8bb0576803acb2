"""How a dataset row's problems are worded (ci_evals.config.dataset): where its JSON broke, why its id clashes."""

from __future__ import annotations

import json

from ci_evals._util.text import shorten


def json_where(exc: ValueError, unit: str) -> str:
    """`` at column 5: Expecting value``: where in the line (or CSV cell) the JSON broke, and why.

    The JSON parser's own position counts lines inside the text it was given; a JSONL line or a
    cell is one line of the dataset, so only the column (or character of the cell) is meaningful.
    """
    if isinstance(exc, json.JSONDecodeError):
        pos = exc.colno if unit == "column" else exc.pos + 1
        return f" at {unit} {pos}{' of the cell' if unit == 'character' else ''}: {exc.msg}"
    return f": {exc}"


def duplicate_id(sid: int | str, no_id: bool, first: int, first_no_id: bool) -> str:
    """Why a row's id clashes, saying which row had no ``id`` and was given its row index."""
    shown = shorten(repr(sid))
    if no_id:
        return (
            f"row has no 'id', so its id is its row index {shown}, which line {first} already uses: "
            "give every row an 'id'"
        )
    if first_no_id:
        return (
            f"duplicate sample id {shown}: line {first} has no 'id', so its id is its row index "
            f"{shown}: give every row an 'id'"
        )
    return f"duplicate sample id {shown} (first on line {first})"
