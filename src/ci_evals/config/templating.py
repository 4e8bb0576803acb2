"""The one templating module: ``{{ item.x }}`` / ``{{ sample.x }}`` paths and ``{name}`` placeholders.

Two syntaxes, used by every grader that renders text:

* ``{{ item.metadata.topic }}``, ``{{ sample.output_tools[0].function.name }}``: OpenAI grader
  templating. Namespaces are ``item`` (the dataset row) and ``sample`` (the target's output).
  A missing variable raises :class:`TemplateError` (an error for that sample, never ""). Strings
  render as they are; other values as JSON.
* ``{input}``, ``{submission}``, ``{ground_truth}`` and declared rubric variables: letta-evals
  rubric placeholders. Only the listed names are replaced, in a single pass, so other braces
  (JSON examples in a rubric) and braces inside substituted values are left untouched.

Substitution happens once: :func:`substitute` renders both syntaxes in one pass over the template,
so a submission, input or ground truth that itself contains ``{ground_truth}``, ``{{ item.x }}`` or
a rubric variable's name is placed as literal text and never expanded.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
from typing import Any

MUSTACHE = re.compile(r"\{\{\s*((?:item|sample)(?:\.[A-Za-z_][\w-]*|\[\d+\])*)\s*\}\}")
_STEP = re.compile(r"\.([A-Za-z_][\w-]*)|\[(\d+)\]")


class TemplateError(ValueError):
    """A template refers to a variable the sample does not have."""


@functools.lru_cache(maxsize=1024)
def _steps(path: str) -> tuple[str, tuple[str | int, ...]]:
    """``item.a[0].b`` -> (``item``, (``a``, 0, ``b``)), parsed once per distinct path."""
    found = re.match(r"\w+", path)
    if found is None:  # not a MUSTACHE path (each begins with its namespace)
        raise TemplateError(f"no template namespace in {{{{ {path} }}}}")
    head = found.group(0)
    steps = tuple(
        m.group(1) if m.group(1) is not None else int(m.group(2))
        for m in _STEP.finditer(path[len(head) :])
    )
    return head, steps


def lookup(path: str, context: dict[str, Any]) -> Any:
    """Follow ``item.a.b[0]`` through ``context``; raise TemplateError naming the missing part."""
    head, steps = _steps(path)
    if head not in context:
        raise TemplateError(f"unknown template namespace '{head}' in {{{{ {path} }}}}")
    value = context[head]
    for step in steps:
        if isinstance(step, str):
            if not isinstance(value, dict) or step not in value:
                raise TemplateError(
                    f"template variable {{{{ {path} }}}} is missing ('{step}' not found)"
                )
            value = value[step]
        else:
            if not isinstance(value, list) or step >= len(value):
                raise TemplateError(
                    f"template variable {{{{ {path} }}}} is missing (no index {step})"
                )
            value = value[step]
    if value is None:
        raise TemplateError(f"template variable {{{{ {path} }}}} is missing (null)")
    return value


def to_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


@functools.lru_cache(maxsize=1024)
def _parts(template: str) -> tuple[tuple[bool, str], ...]:
    """A template split once into (is_variable, text-or-path) parts."""
    parts, pos = [], 0
    for m in MUSTACHE.finditer(template):
        if m.start() > pos:
            parts.append((False, template[pos : m.start()]))
        parts.append((True, m.group(1)))
        pos = m.end()
    if pos < len(template):
        parts.append((False, template[pos:]))
    return tuple(parts)


def render(template: str, context: dict[str, Any]) -> str:
    """Replace every ``{{ item.x }}`` / ``{{ sample.x }}``; other text is left as it is.

    Templates are parsed once and cached, so rendering per sample is a join of lookups.
    """
    if "{{" not in template:
        return template
    return "".join(
        to_text(lookup(text, context)) if var else text for var, text in _parts(template)
    )


@functools.lru_cache(maxsize=256)
def _combined(names: tuple[str, ...]) -> re.Pattern[str]:
    """``{{ item.x }}`` (group 1) or one of ``{name}`` (group 2), in one pattern."""
    return re.compile(MUSTACHE.pattern + r"|\{(" + "|".join(re.escape(k) for k in names) + r")\}")


def substitute(template: str, values: dict[str, Any], context: dict[str, Any] | None = None) -> str:
    """Render ``{{ item.x }}`` / ``{{ sample.x }}`` (from ``context``) and ``{name}`` (from ``values``)
    in a single pass: text placed by one substitution is never read again, so placeholders inside
    a submission or ground truth stay literal. Without ``context``, ``{{ ... }}`` stays as written."""
    if not values:
        return template if context is None or "{{" not in template else render(template, context)

    def repl(m: re.Match[str]) -> str:
        if m.group(1) is not None:
            return to_text(lookup(m.group(1), context)) if context is not None else m.group(0)
        return to_text(values[m.group(2)])

    return _combined(tuple(values)).sub(repl, template)


def brace_parts(template: str) -> list[tuple[str, str | None]]:
    """A letta-evals 0.17+ rubric split into (literal text, placeholder name or None) parts.

    The rules are Python's ``str.format``: ``{name}`` is a placeholder, ``{{`` and ``}}`` are
    literal braces. A placeholder must be a plain name (no ``.attr``, ``[i]``, ``!r``, ``:spec``,
    no empty ``{}``); a lone brace is an error. Raises TemplateError.
    """
    import string

    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise TemplateError(
            f"rubric template: {exc}; write {{{{ and }}}} for literal braces"
        ) from None
    parts: list[tuple[str, str | None]] = []
    for literal, name, spec, conversion in parsed:
        if name is not None and (not name.isidentifier() or spec or conversion):
            shown = (
                "{"
                + name
                + (f"!{conversion}" if conversion else "")
                + (f":{spec}" if spec else "")
                + "}"
            )
            raise TemplateError(
                f"rubric placeholder {shown} is not a plain name; write {{{{ and }}}} for literal braces"
            )
        parts.append((literal, name))
    return parts


def format_braces(template: str, values: dict[str, Any]) -> str:
    """Fill a letta-evals 0.17+ rubric in one pass (substituted text is never re-read).

    Raises TemplateError naming the first placeholder ``values`` lacks.
    """
    out = []
    for literal, name in brace_parts(template):
        out.append(literal)
        if name is not None:
            if name not in values:
                raise TemplateError(
                    f"rubric references {{{name}}} but no value was given "
                    f"(available: {', '.join(sorted(values))})"
                )
            out.append(to_text(values[name]))
    return "".join(out)


_ABSENT = object()


class _LazyNamespace(dict[str, Any]):
    """A template namespace whose costly entries are computed on first use, then kept."""

    def __init__(self, eager: dict[str, Any], lazy: dict[str, Any]) -> None:
        super().__init__(eager)
        self._lazy = lazy

    def __contains__(self, key: object) -> bool:
        if dict.__contains__(self, key):
            return True
        if not isinstance(key, str):  # every name a template may read is a string
            return False
        make = self._lazy.pop(key, None)
        if make is None:
            return False
        value = make()
        if value is _ABSENT:
            return False
        self[key] = value
        return True

    def __getitem__(self, key: str) -> Any:
        if key not in self:
            raise KeyError(key)
        return dict.__getitem__(self, key)


def _parse_json(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, TypeError):
        return _ABSENT


def grader_context(
    item: dict[str, Any], submission: str, tool_calls: list[Any] | Callable[[], list[Any]]
) -> dict[str, Any]:
    """The ``item``/``sample`` namespaces for OpenAI-style templates.

    ``sample.output_json`` is the submission parsed as JSON, or absent when it is not JSON;
    ``tool_calls`` may be a list or a function giving it. Both are computed only if a template
    uses them (a grader on a hot path pays for nothing it does not render).
    """
    tools = tool_calls if callable(tool_calls) else (lambda: tool_calls)
    sample = _LazyNamespace(
        {"output_text": submission},
        {"output_tools": tools, "output_json": lambda: _parse_json(submission)},
    )
    return {"item": item, "sample": sample}
