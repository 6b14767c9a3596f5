"""Reading a configuration file safely: a regular file of bounded size, parsed as
strict YAML (docs/interface.md, "Configuration keys": duplicate keys, anchors and
aliases are refused, nesting is bounded). loader.py builds on it."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import yaml

from privacy_eval.errors import ConfigError

# What the loader accepts (docs/interface.md, "Configuration keys"): a job configuration
# is a few kilobytes of plain mappings and lists, so anything far beyond is refused
# before it can cost time or memory.
MAX_CONFIG_BYTES = 128 * 1024  # the file, and each `--set` value (parsing that much YAML is already slow)
MAX_DEPTH = 32  # nested mappings and lists, the top-level mapping counting as 1


def read_config_bytes(path: Path) -> bytes:
    """The config file's bytes: a regular file of at most MAX_CONFIG_BYTES, read without
    ever blocking (a FIFO, a terminal or /dev/zero is refused before it is opened)."""
    try:
        info = os.stat(path)
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    _check_regular_file(path, info)
    try:
        # Non-blocking, in case the path was swapped for a FIFO since the stat above.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    try:
        _check_regular_file(path, os.fstat(fd))
        chunks, size = [], 0
        while size <= MAX_CONFIG_BYTES:
            chunk = os.read(fd, MAX_CONFIG_BYTES + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    finally:
        os.close(fd)
    if size > MAX_CONFIG_BYTES:  # grew since the stat
        raise ConfigError(f"config file {path} is larger than {MAX_CONFIG_BYTES} bytes")
    return b"".join(chunks)


def _check_regular_file(path: Path, info: os.stat_result) -> None:
    if not stat.S_ISREG(info.st_mode):
        kind = ("a directory" if stat.S_ISDIR(info.st_mode) else "a named pipe" if stat.S_ISFIFO(info.st_mode)
                else "a device" if stat.S_ISCHR(info.st_mode) or stat.S_ISBLK(info.st_mode)
                else "a socket" if stat.S_ISSOCK(info.st_mode) else "a special file")
        raise ConfigError(f"config file {path} is {kind}, not a regular file")
    if info.st_size > MAX_CONFIG_BYTES:
        raise ConfigError(
            f"config file {path} is larger than {MAX_CONFIG_BYTES} bytes ({info.st_size} bytes)"
        )


class Refused(yaml.YAMLError):
    """YAML that is valid but that the job refuses: the message says what and where."""


class _StrictLoader(yaml.SafeLoader):
    """yaml.SafeLoader that refuses duplicate keys, anchors and aliases, and nesting
    deeper than MAX_DEPTH.

    Duplicate keys: YAML loaders silently keep the last one, which can drop a whole
    `metrics:` block. Aliases: a few hundred bytes of nested aliases expand to billions
    of nodes ("billion laughs"), and a job configuration has no need for them. Depth:
    the composer recurses once per level.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._paths: dict[int, str] = {}

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise Refused(
                f"YAML anchors and aliases (&name, *name) are not accepted (line {event.start_mark.line + 1})"
            )
        if not isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            return super().compose_node(parent, index)
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise Refused(
                    f"mappings and lists nested deeper than {MAX_DEPTH} levels (line {event.start_mark.line + 1})"
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_document(self, node: Any) -> Any:
        self._record_paths(node, "")
        return super().construct_document(node)

    def _record_paths(self, node: Any, path: str) -> None:
        """The dotted key of every mapping, for the duplicate-key message (a tree: no aliases)."""
        if isinstance(node, yaml.MappingNode):
            self._paths[id(node)] = path
            for key, value in node.value:
                if key.tag == "tag:yaml.org,2002:merge":
                    self._record_paths(value, path)
                else:
                    name = str(key.value) if isinstance(key, yaml.ScalarNode) else "?"
                    self._record_paths(value, join_key(path, name))
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                self._record_paths(item, f"{path}[{i}]")

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                    continue  # a complex key is refused by the constructor itself
                key = self.construct_object(key_node)
                line = key_node.start_mark.line + 1
                if key in seen:
                    name = join_key(self._paths.get(id(node), ""), str(key))
                    raise Refused(f"key '{name}' appears twice (lines {seen[key]} and {line})")
                seen[key] = line
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_int(self, node: Any) -> Any:
        try:
            return super().construct_yaml_int(node)
        except ValueError:  # more digits than Python converts
            raise Refused(f"number too long (line {node.start_mark.line + 1})") from None

    def construct_yaml_timestamp(self, node: Any) -> Any:
        try:
            return super().construct_yaml_timestamp(node)
        except (ValueError, OverflowError):  # 2024-13-45
            raise Refused(f"not a valid date or time (line {node.start_mark.line + 1})") from None


_StrictLoader.add_constructor("tag:yaml.org,2002:int", _StrictLoader.construct_yaml_int)
_StrictLoader.add_constructor("tag:yaml.org,2002:timestamp", _StrictLoader.construct_yaml_timestamp)


def load_yaml(text: str) -> Any:
    """yaml.safe_load with the loader's limits (_StrictLoader)."""
    loader = _StrictLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def nesting(value: Any) -> int:
    """How deeply mappings and lists nest in a loaded value (within MAX_DEPTH: no recursion risk)."""
    if isinstance(value, dict):
        return 1 + max((nesting(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((nesting(v) for v in value), default=0)
    return 0


def join_key(where: str, name: str) -> str:
    """The dotted key of `name` inside mapping `where`."""
    return f"{where}.{name}" if where else name
