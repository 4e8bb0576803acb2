"""The per-sample rule: does one score pass (``score >= 0.5``)? Shared by every stage.

The runner marks each grade with it, the suite loader states it, the aggregator counts with it,
rewards and per-turn grading apply it, and gates compare aggregates with the same operators.
"""

from __future__ import annotations

import operator
from typing import Literal

OPS = {
    "gt": operator.gt,
    "gte": operator.ge,
    "lt": operator.lt,
    "lte": operator.le,
    "eq": operator.eq,
}
SYMBOL = {"gt": ">", "gte": ">=", "lt": "<", "lte": "<=", "eq": "=="}
Op = Literal["gt", "gte", "lt", "lte", "eq"]


def rule_text(op: str, value: float) -> str:
    """``score >= 0.5``: the rule as every report states it."""
    return f"score {SYMBOL[op]} {value:g}"


def passes(score: float, op: str, value: float) -> bool:
    """Whether ``score`` passes the rule ``op value``."""
    return OPS[op](score, value)
