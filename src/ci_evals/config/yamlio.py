"""Safe YAML loading that remembers the line of every key, so errors can name it.

Bounded, so a hostile file fails fast with one line instead of exhausting memory or the stack:
nesting deeper than :data:`MAX_DEPTH`, more than :data:`MAX_NODES` values once aliases are
expanded (a "billion laughs" bomb), a key given twice in one mapping (both lines named) and a
non-finite number (``.nan``, ``.inf``) are errors.
"""

from __future__ import annotations

import math
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ci_evals._util.errors import ConfigError

if TYPE_CHECKING:
    import yaml

MAX_DEPTH = 100
"""Nesting levels a suite (or a JSON dataset/replay record) may have."""
MAX_NODES = 100_000
"""Values a YAML document may hold with every alias expanded."""


def _loader(text: str, file: str) -> yaml.SafeLoader:
    """A SafeLoader whose composer refuses nesting deeper than MAX_DEPTH (before Python's stack does)."""
    import yaml

    class Loader(yaml.SafeLoader):
        depth = 0

        def _too_deep(self, mark: yaml.Mark) -> ConfigError:
            return ConfigError(
                f"nested more than {MAX_DEPTH} levels deep", file=file, line=mark.line + 1
            )

        def fetch_flow_collection_start(self, token_class: type[yaml.Token]) -> None:
            # The scanner's look-ahead is quadratic in open brackets: stop before it gets costly.
            if self.flow_level >= MAX_DEPTH:
                raise self._too_deep(self.get_mark())
            super().fetch_flow_collection_start(token_class)

        def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise self._too_deep(self.peek_event().start_mark)
            try:
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

    return Loader(text)


class _Walk:
    """Records {dotted key path: line}; counts values with aliases expanded; checks keys and numbers."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.lines: dict[str, int] = {}
        self.nodes = 0

    def _fail(self, node: yaml.Node, msg: str) -> ConfigError:
        return ConfigError(msg, file=self.file, line=node.start_mark.line + 1)

    def walk(self, node: yaml.Node, path: str) -> None:
        import yaml

        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise self._fail(
                node, f"more than {MAX_NODES:,} values once aliases are expanded (an alias bomb?)"
            )
        if isinstance(node, yaml.MappingNode):
            seen: dict[str, int] = {}
            for key_node, value_node in node.value:
                key = str(key_node.value)
                line = key_node.start_mark.line + 1
                if isinstance(key_node, yaml.ScalarNode) and key != "<<":
                    if key in seen:
                        shown = key if len(key) <= 60 else key[:57] + "..."
                        raise ConfigError(
                            f"duplicate key '{shown}' (lines {seen[key]} and {line})",
                            file=self.file,
                            line=line,
                        )
                    seen[key] = line
                child = f"{path}.{key}" if path else key
                self.lines.setdefault(child, line)
                self.walk(key_node, child)
                self.walk(value_node, child)
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                child = f"{path}[{i}]"
                self.lines.setdefault(child, item.start_mark.line + 1)
                self.walk(item, child)
        elif node.tag == "tag:yaml.org,2002:float":
            try:
                finite = math.isfinite(float(node.value.replace("_", "")))
            except ValueError:  # .nan, .inf and their spellings
                finite = False
            if not finite:
                where = f" at {path}" if path else ""
                raise self._fail(node, f"'{node.value}'{where} is not a finite number")


MAX_YAML_BYTES = 16 * 1024 * 1024
"""A suite file larger than this is refused before it is read."""


def regular_file(path: Path, what: str, *, key: str | None = None) -> os.stat_result:
    """``path``'s stat if it is a regular file (a symlink to one is fine); else ConfigError.

    A FIFO would block the read forever, ``/dev/zero`` or ``/dev/urandom`` never end: only a
    regular file has an end that reading reaches.
    """
    try:
        st = path.stat()
    except FileNotFoundError:
        raise ConfigError(f"{what} not found", file=str(path), key=key) from None
    except OSError as exc:
        raise ConfigError(f"cannot read {what}: {exc.strerror}", file=str(path), key=key) from None
    if stat.S_ISDIR(st.st_mode):
        raise ConfigError(f"{what} is a folder, expected a file", file=str(path), key=key)
    if not stat.S_ISREG(st.st_mode):
        kind = (
            "a FIFO"
            if stat.S_ISFIFO(st.st_mode)
            else "a device"
            if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode)
            else "a socket"
            if stat.S_ISSOCK(st.st_mode)
            else "not a regular file"
        )
        raise ConfigError(f"{what} is {kind}, expected a regular file", file=str(path), key=key)
    return st


def load_yaml(path: Path) -> tuple[Any, dict[str, int]]:
    """Parse ``path`` with the safe loader; return (data, {dotted key path: line})."""
    import yaml

    file = str(path)
    st = regular_file(path, "file")
    if st.st_size > MAX_YAML_BYTES:
        raise ConfigError(
            f"{st.st_size:,} bytes; a suite file may hold at most {MAX_YAML_BYTES:,}", file=file
        )
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError("file not found", file=file) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"not UTF-8 text (byte {exc.start})", file=file) from None
    except IsADirectoryError:
        raise ConfigError("is a folder, expected a YAML file", file=file) from None
    bad = text.find("\0")
    if bad >= 0:
        raise ConfigError(
            f"a NUL byte at column {bad - text.rfind(chr(10), 0, bad)}; YAML text cannot hold one",
            file=file,
            line=text.count("\n", 0, bad) + 1,
        )
    try:
        loader = _loader(text, file)
    except yaml.YAMLError as exc:  # the reader refuses special characters before any parsing
        raise ConfigError(
            f"YAML syntax error: {getattr(exc, 'reason', None) or exc}", file=file
        ) from None
    try:
        node = loader.get_single_node()
        walk = _Walk(file)
        if node is not None:
            walk.walk(node, "")
        data = loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(
            f"YAML syntax error: {problem}", file=file, line=mark.line + 1 if mark else None
        ) from None
    finally:
        loader.dispose()
    return data, walk.lines if node is not None else {}
