"""Safe YAML loading that remembers the line of every key, so errors can name it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ci_evals.errors import ConfigError


def _walk(node, path: str, lines: dict[str, int]) -> None:
    import yaml

    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = str(key_node.value)
            child = f"{path}.{key}" if path else key
            lines[child] = key_node.start_mark.line + 1
            _walk(value_node, child, lines)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            child = f"{path}[{i}]"
            lines[child] = item.start_mark.line + 1
            _walk(item, child, lines)


def load_yaml(path: Path) -> tuple[Any, dict[str, int]]:
    """Parse ``path`` with the safe loader; return (data, {dotted key path: line})."""
    import yaml

    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError("file not found", file=str(path)) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"not UTF-8 text (byte {exc.start})", file=str(path)) from None
    except IsADirectoryError:
        raise ConfigError("is a folder, expected a YAML file", file=str(path)) from None
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(
            f"YAML syntax error: {problem}", file=str(path), line=mark.line + 1 if mark else None
        ) from None
    lines: dict[str, int] = {}
    if node is not None:
        _walk(node, "", lines)
    return data, lines
