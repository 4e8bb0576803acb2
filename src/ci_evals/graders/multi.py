"""``multi``: several graders combined by a ``calculate_output`` formula (OpenAI's multigrader).

``graders`` maps variable names to grader specs (any kind except ``multi``: OpenAI forbids
nesting, and so do we); every sub-grader gets the same sample and submission and they run
concurrently. Each contributes its raw score (not its pass/fail) to the formula.

Formula grammar, checked when the suite loads (anything else is a ConfigError):

* numbers, the sub-grader names, parentheses;
* binary ``+ - * /`` and ``^`` (power), unary ``-`` and ``+``;
* calls ``min(a, ...)``, ``max(a, ...)`` (one or more arguments), ``abs``, ``floor``, ``ceil``,
  ``exp``, ``sqrt``, ``log`` (one argument; ``log`` is the natural logarithm).

Precedence is the usual one in mathematics: ``^`` binds tighter than ``*`` and ``/`` and than a
unary minus on its left (``-a^2`` = ``-(a^2)``), and is right-associative (``a^b^c`` =
``a^(b^c)``); ``**`` is rejected (write ``^``). All arithmetic is in floats.

Per sample: a sub-grader error, division by zero, a math domain error (``sqrt(-1)``, ``log(0)``,
a negative base to a fractional power) or an overflow makes the grade an error (score 0); else
the result is clamped to [0, 1]. ``metadata.sub_scores`` holds every sub-score (and
``sub_errors`` the failures); token usage of LLM sub-graders is summed into the grade.
"""

from __future__ import annotations

import ast
import asyncio
import keyword
import math
from collections.abc import Callable, Iterable
from typing import Any

from pydantic import Field

from ci_evals._util.errors import ConfigError, did_you_mean
from ci_evals.config.specs import Context, GraderSpec
from ci_evals.core.sample import GradeResult, Sample
from ci_evals.core.trajectory import Trajectory
from ci_evals.graders.base import Grader, build_grader, normalize_raw
from ci_evals.graders.extractors import make_extractor
from ci_evals.graders.string_check import error_grade

MAX_FORMULA_CHARS = 1000
MAX_DEPTH = 40


def _minmax(fn: Callable[[tuple[float, ...]], float]) -> Callable[..., float]:
    return lambda *args: fn(args)


FUNCTIONS: dict[str, tuple[Any, int | None]] = {
    # name: (implementation, exact arity or None for one or more)
    "min": (_minmax(min), None),
    "max": (_minmax(max), None),
    "abs": (abs, 1),
    "floor": (lambda x: float(math.floor(x)), 1),
    "ceil": (lambda x: float(math.ceil(x)), 1),
    "exp": (math.exp, 1),
    "sqrt": (math.sqrt, 1),
    "log": (math.log, 1),
}
_BINARY = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.Pow: math.pow,  # a domain error instead of Python's complex result for (-8) ** (1/3)
}
_UNARY = {ast.USub: lambda a: -a, ast.UAdd: lambda a: a}
_NAMES = {
    ast.Attribute: "attribute access",
    ast.Subscript: "indexing",
    ast.Compare: "comparisons",
    ast.BoolOp: "and/or",
    ast.IfExp: "if/else",
    ast.Lambda: "lambda",
    ast.List: "lists",
    ast.Tuple: "tuples",
    ast.Dict: "dicts",
    ast.Set: "sets",
    ast.ListComp: "comprehensions",
    ast.GeneratorExp: "comprehensions",
    ast.DictComp: "comprehensions",
    ast.SetComp: "comprehensions",
    ast.JoinedStr: "strings",
    ast.NamedExpr: "assignments",
    ast.Starred: "* arguments",
}


class Formula:
    """A parsed, checked ``calculate_output`` expression over the given variable names."""

    def __init__(self, text: str, names: Iterable[str]) -> None:
        self.text = text
        self.names = set(names)
        if len(text) > MAX_FORMULA_CHARS:
            raise self._error(f"is {len(text)} characters long (at most {MAX_FORMULA_CHARS})")
        if not text.strip():
            raise self._error("is empty")
        if "**" in text:
            raise self._error("uses '**'; write powers with '^' (a ^ 2)")
        try:
            # '^' is XOR in Python, below '*'; as '**' it is power, above '*' and unary minus.
            self.tree = ast.parse(" ".join(text.split()).replace("^", "**"), mode="eval")
        except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
            msg = getattr(exc, "msg", None) or str(exc) or type(exc).__name__
            raise self._error(f"is not a valid expression ({msg})") from None
        self._check(self.tree.body, 0)

    def _error(self, problem: str) -> ConfigError:
        shown = self.text if len(self.text) <= 80 else self.text[:77] + "..."
        return ConfigError(f"calculate_output '{shown}' {problem}")

    def _check(self, node: ast.AST, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise self._error(f"is nested more than {MAX_DEPTH} levels deep")
        if isinstance(node, ast.Constant):
            if type(node.value) not in (int, float):
                raise self._error(f"contains {node.value!r}: only numbers are allowed")
        elif isinstance(node, ast.Name):
            if node.id not in self.names:
                what = "a function, call it" if node.id in FUNCTIONS else "not a grader name"
                hint = did_you_mean(node.id, sorted(self.names))
                raise self._error(f"uses '{node.id}', {what}{hint}")
        elif isinstance(node, ast.BinOp):
            if type(node.op) not in _BINARY:
                raise self._error(f"uses operator {_symbol(node.op)}: only + - * / ^ are allowed")
            self._check(node.left, depth + 1)
            self._check(node.right, depth + 1)
        elif isinstance(node, ast.UnaryOp):
            if type(node.op) not in _UNARY:
                raise self._error(
                    f"uses operator {_symbol(node.op)}: only unary - and + are allowed"
                )
            self._check(node.operand, depth + 1)
        elif isinstance(node, ast.Call):
            self._check_call(node, depth)
        else:
            what = _NAMES.get(type(node), type(node).__name__)
            raise self._error(f"uses {what}, which is not allowed")

    def _check_call(self, node: ast.Call, depth: int) -> None:
        allowed = ", ".join(FUNCTIONS)
        if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
            name = node.func.id if isinstance(node.func, ast.Name) else ast.unparse(node.func)
            raise self._error(f"calls '{name}': only {allowed} may be called")
        name = node.func.id
        if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
            raise self._error(f"passes keyword or * arguments to {name}()")
        arity = FUNCTIONS[name][1]
        n = len(node.args)
        if (arity is None and n < 1) or (arity is not None and n != arity):
            need = "one or more arguments" if arity is None else "exactly one argument"
            raise self._error(f"calls {name}() with {n} arguments; it takes {need}")
        for arg in node.args:
            self._check(arg, depth + 1)

    def evaluate(self, values: dict[str, float]) -> float:
        """The formula's value; ZeroDivisionError, ValueError (domain) or OverflowError on bad math."""
        return self._eval(self.tree.body, values)

    def _eval(self, node: ast.AST, values: dict[str, float]) -> float:
        """The value of a node :meth:`_check` accepted (a number, a name, an operator, a call)."""
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
            return float(node.value)
        if isinstance(node, ast.Name):
            return float(values[node.id])
        if isinstance(node, ast.BinOp):
            return _BINARY[type(node.op)](
                self._eval(node.left, values), self._eval(node.right, values)
            )
        if isinstance(node, ast.UnaryOp):
            return _UNARY[type(node.op)](self._eval(node.operand, values))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            fn = FUNCTIONS[node.func.id][0]
            return float(fn(*(self._eval(a, values) for a in node.args)))
        raise TypeError(f"{type(node).__name__} was not checked")  # _check rejects it first


def _symbol(op: ast.AST) -> str:
    symbols = {
        ast.Mod: "%",
        ast.FloorDiv: "//",
        ast.BitXor: "^",
        ast.BitAnd: "&",
        ast.BitOr: "|",
        ast.LShift: "<<",
        ast.RShift: ">>",
        ast.MatMult: "@",
        ast.Not: "not",
        ast.Invert: "~",
    }
    return f"'{symbols.get(type(op), type(op).__name__)}'"


def evaluate(formula: Formula, values: dict[str, float]) -> tuple[float | None, str | None]:
    """(value, None) or (None, why the formula cannot be computed for these values)."""
    try:
        value = formula.evaluate(values)
    except ZeroDivisionError:
        return None, "division by zero"
    except ValueError as exc:
        return None, f"math domain error ({exc})"
    except OverflowError:
        return None, "numeric overflow"
    if not math.isfinite(value):
        return None, f"the result is {value}"
    return value, None


def merge_usage(target: dict[str, Any], meta: dict[str, Any]) -> None:
    """Add a sub-grade's ``usage``/``cache_hits``/``retries``/``cost_usd`` (or ``unpriced``)
    into ``target``."""
    usage = meta.get("usage")
    if isinstance(usage, dict):
        total = target.setdefault("usage", {"prompt_tokens": 0, "completion_tokens": 0})
        for k in ("prompt_tokens", "completion_tokens"):
            total[k] += int(usage.get(k) or 0)
    for k in ("cache_hits", "retries"):
        if isinstance(meta.get(k), int):
            target[k] = target.get(k, 0) + meta[k]
    unpriced = meta.get("unpriced")
    if unpriced:  # one sub-grade's cost unknown: the grade's is too (never a partial sum)
        names = unpriced if isinstance(unpriced, list) else [unpriced]
        target["unpriced"] = sorted({*target.get("unpriced", []), *map(str, names)})
        target.pop("cost_usd", None)
    elif isinstance(meta.get("cost_usd"), int | float) and "unpriced" not in target:
        target["cost_usd"] = target.get("cost_usd", 0.0) + meta["cost_usd"]


class MultiSpec(GraderSpec):
    graders: dict[str, dict[str, Any]] = Field(
        min_length=1, description="Variable name -> grader spec."
    )
    calculate_output: str = Field(
        description="Formula over the grader names (see the module rules)."
    )


class MultiGrader(Grader[MultiSpec]):
    """Run the sub-graders concurrently and combine their raw scores with ``calculate_output``."""

    spec_model = MultiSpec

    def __init__(self, name: str, spec: MultiSpec, ctx: Context) -> None:
        super().__init__(name, spec, ctx)
        file = str(ctx.suite_file) if ctx.suite_file else None
        self.subs: dict[str, Grader[GraderSpec]] = {}
        self.extractors: dict[str, Any] = {}
        for key, raw in spec.graders.items():
            where = f"graders.{name}.graders.{key}"
            if not key.isidentifier() or keyword.iskeyword(key) or key in FUNCTIONS:
                raise ConfigError(
                    f"'{key}' cannot be a formula variable: use letters, digits and _ "
                    f"(not a Python keyword or one of {', '.join(FUNCTIONS)})",
                    key=where,
                    file=file,
                )
            if isinstance(raw, dict) and normalize_raw(raw).get("kind") == "multi":
                raise ConfigError(
                    "a multi grader cannot contain another multi grader", key=where, file=file
                )
            sub = build_grader(f"{name}.{key}", raw, ctx, key=where, file=file)
            self.subs[key] = sub
            if {"extractor", "extractor_config"} & sub.spec.model_fields_set:
                self.extractors[key] = make_extractor(
                    sub.spec.extractor,
                    sub.spec.extractor_config,
                    ctx.base_dir,
                    key=where,
                    file=file,
                )
        self.formula = Formula(spec.calculate_output, self.subs)
        # A sub-grader reading a memory block needs the target to fetch memory.
        self.needs_memory = any(e.needs_memory for e in self.extractors.values())

    def checks_samples(self) -> bool:
        return any(sub.checks_samples() for sub in self.subs.values())

    def check_samples(self, samples: Iterable[Sample]) -> None:
        samples = list(samples)
        for sub in self.subs.values():
            sub.check_samples(samples)

    def prepare(self) -> None:
        for sub in self.subs.values():
            sub.prepare()

    async def start(self) -> None:
        await asyncio.gather(*(sub.start() for sub in self.subs.values()))

    async def aclose(self) -> None:
        await asyncio.gather(*(sub.aclose() for sub in self.subs.values()), return_exceptions=True)

    async def _sub_grade(
        self, key: str, sample: Sample, submission: str, trajectory: Trajectory
    ) -> GradeResult:
        sub = self.subs[key]
        try:
            if key in self.extractors:
                submission = await self.extractors[key].extract(trajectory)
            return await sub.grade(sample, submission, trajectory)
        except Exception as exc:  # a sub-grader failing is an error of this grade, never of the run
            return error_grade(f"{type(exc).__name__}: {exc}")

    async def grade(self, sample: Sample, submission: str, trajectory: Trajectory) -> GradeResult:
        keys = list(self.subs)
        grades = await asyncio.gather(
            *(self._sub_grade(k, sample, submission, trajectory) for k in keys)
        )
        scores = {k: g.score for k, g in zip(keys, grades, strict=True)}
        errors = {k: g.error for k, g in zip(keys, grades, strict=True) if g.error}
        meta: dict[str, Any] = {"sub_scores": scores}
        if errors:
            meta["sub_errors"] = errors
        meta["sub_rationales"] = {
            k: g.rationale for k, g in zip(keys, grades, strict=True) if g.rationale
        }
        for g in grades:
            merge_usage(meta, g.metadata)
        if errors:
            first = next(iter(errors))
            return error_grade(f"sub-grader '{first}' failed: {errors[first]}", **meta)
        value, problem = evaluate(self.formula, scores)
        if value is None:
            return error_grade(f"calculate_output '{self.formula.text}': {problem}", **meta)
        score = min(1.0, max(0.0, value))
        shown = ", ".join(f"{k}={v:g}" for k, v in scores.items())
        clamp = "" if score == value else f", clamped to {score:g}"
        meta["raw_score"] = value
        return GradeResult(
            score=score,
            rationale=f"{self.formula.text} = {value:g}{clamp} ({shown})",
            metadata=meta,
        )
