"""Typed configuration: dataclasses filled from YAML with clear errors.

Every component has one dataclass config validated in `__post_init__`. This module turns a
YAML file (or a dict) into such a dataclass, rejecting unknown keys with a "did you mean"
hint, duplicate keys with their line, missing required fields by name, checking basic
types, and naming the file and field in every error. A dataclass may list in `YAML_REQUIRED`
the fields a file must state explicitly (safety limits never fall back to a default because
a line was left out).
"""
from __future__ import annotations

import dataclasses
import difflib
import math
import typing
from pathlib import Path
from typing import Any, Mapping, TypeVar

import yaml

T = TypeVar("T")


class ConfigError(ValueError):
    """A configuration value or file is invalid; the message names the field and the value."""


def _hint(key: str, known: list[str]) -> str:
    close = difflib.get_close_matches(key, known, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _coerce(value: Any, tp: Any, where: str) -> Any:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any:
        return value
    if origin is typing.Union or (origin is not None and str(origin) == "<class 'types.UnionType'>"):
        if value is None and type(None) in args:
            return None
        errors = []
        for a in args:
            if a is type(None):
                continue
            try:
                return _coerce(value, a, where)
            except ConfigError as e:  # try the next alternative
                errors.append(str(e))
        raise ConfigError(errors[0] if errors else f"{where}: bad value {value!r}")
    if dataclasses.is_dataclass(tp):
        if isinstance(value, tp):
            return value
        if not isinstance(value, Mapping):
            raise ConfigError(f"{where}: expected a mapping, got {value!r}")
        return from_dict(tp, value, where)
    if origin in (tuple, list):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{where}: expected a list, got {value!r}")
        if origin is tuple and args and args[-1] is not Ellipsis:
            if len(value) != len(args):
                raise ConfigError(f"{where}: expected {len(args)} items, got {len(value)}: {value!r}")
            items = [_coerce(v, a, f"{where}[{i}]") for i, (v, a) in enumerate(zip(value, args))]
        else:
            inner = args[0] if args else Any
            items = [_coerce(v, inner, f"{where}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else list(items)
    if origin is dict:
        if not isinstance(value, Mapping):
            raise ConfigError(f"{where}: expected a mapping, got {value!r}")
        return dict(value)
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: expected true/false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where}: expected an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{where}: expected a number, got {value!r}")
        value = float(value)
        if math.isnan(value):
            raise ConfigError(f"{where}: NaN is not allowed")
        return value
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{where}: expected a string, got {value!r}")
        return value
    return value


def from_dict(cls: type[T], data: Mapping[str, Any], source: str = "config") -> T:
    """Build dataclass `cls` from `data`; unknown keys, missing required fields and wrong types
    raise ConfigError naming `source` and the field."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: expected a mapping for {cls.__name__}, got {data!r}")
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    hints = typing.get_type_hints(cls)
    no_default = [n for n, f in fields.items()
                  if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    required = list(dict.fromkeys(no_default + list(getattr(cls, "YAML_REQUIRED", ()))))
    unknown = [k for k in data if k not in fields]
    if unknown:                                  # a misspelt key first: it explains a "missing" one
        raise ConfigError(
            f"{source}: unknown field {unknown[0]!r} for {cls.__name__}{_hint(str(unknown[0]), list(fields))}")
    missing = [n for n in required if n not in data]
    if missing:
        raise ConfigError(f"{source}: missing required field{'s' if len(missing) > 1 else ''} "
                          f"{', '.join(map(repr, missing))} for {cls.__name__}")
    kwargs = {}
    for key, value in data.items():
        if key not in fields:
            raise ConfigError(
                f"{source}: unknown field {key!r} for {cls.__name__}{_hint(str(key), list(fields))}"
            )
        kwargs[key] = _coerce(value, hints[key], f"{source}: {key}")
    try:
        return cls(**kwargs)
    except ConfigError as e:
        raise ConfigError(f"{source}: {e}") from None
    except TypeError as e:
        raise ConfigError(f"{source}: {e}") from None


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key repeated within one mapping (YAML would keep the last)."""

    def construct_mapping(self, node, deep=False):
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (line {line}; first at line {seen[key]})", key_node.start_mark)
            seen[key] = line
        return super().construct_mapping(node, deep)


MAX_YAML_VALUES = 100_000   # values a config may expand to; YAML aliases can make a 2 kB file expand exponentially
MAX_MESSAGE_CHARS = 2000     # a ConfigError quotes at most this much (a value pasted into a message is cut)


def _check_size(data: Any, source: str) -> Any:
    """Refuse YAML whose aliases expand past MAX_YAML_VALUES values (an alias bomb), before any
    code formats or validates it; stops counting at the bound, so the check itself is cheap."""
    count, stack = 0, [data]
    while stack:
        x = stack.pop()
        count += 1
        if count > MAX_YAML_VALUES:
            raise ConfigError(f"{source}: expands to more than {MAX_YAML_VALUES} values (YAML aliases nested "
                              f"into each other?); refusing it")
        if isinstance(x, dict):
            stack.extend(x.keys())
            stack.extend(x.values())
        elif isinstance(x, (list, tuple)):
            stack.extend(x)
    return data


def load_yaml(path: str | Path) -> dict:
    """Read a YAML mapping; a missing, unreadable or non-mapping file or a repeated key is a ConfigError."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"config file not found: {str(p)!r}")
    try:
        data = yaml.load(p.read_text(), Loader=_UniqueKeyLoader)  # noqa: S506 (a SafeLoader subclass)
    except yaml.YAMLError as e:
        raise ConfigError(f"{p}: not valid YAML: {e}") from None
    _check_size(data, str(p))
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: expected a mapping at top level, got {type(data).__name__}")
    return data


def from_yaml(cls: type[T], path: str | Path, section: str | None = None) -> T:
    """Load dataclass `cls` from a YAML file, optionally from one top-level `section`."""
    data = load_yaml(path)
    if section is not None:
        if section not in data:
            raise ConfigError(f"{path}: missing section {section!r}{_hint(section, list(data))}")
        data = data[section]
    return from_dict(cls, data, f"{path}" + (f" [{section}]" if section else ""))


def to_dict(cfg: Any) -> dict:
    """Plain-dict form of a dataclass config (tuples become lists), for YAML/JSON."""
    def conv(v):
        if dataclasses.is_dataclass(v):
            return {f.name: conv(getattr(v, f.name)) for f in dataclasses.fields(v)}
        if isinstance(v, (list, tuple)):
            return [conv(x) for x in v]
        return v
    return conv(cfg)


def check(cond: bool, message: str) -> None:
    """Raise ConfigError(message) when `cond` is false (used in __post_init__); a message longer than
    MAX_MESSAGE_CHARS (a huge value quoted in it) is cut, saying how long it was."""
    if not cond:
        if len(message) > MAX_MESSAGE_CHARS:
            message = f"{message[:MAX_MESSAGE_CHARS]}... (message cut: {len(message)} characters)"
        raise ConfigError(message)


def check_within(name: str, value: Any, lo: float, hi: float, unit: str = "", why: str = "") -> None:
    """`value` must be a finite number in [lo, hi]; the error quotes it, the bounds and `why`."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and lo <= value <= hi
    u = f" {unit}" if unit else ""
    check(ok, f"{name} must be in [{lo:g}, {hi:g}]{u}{f' ({why})' if why else ''}, got {value!r}")


def field_docs(cls: type) -> dict[str, str]:
    """{field: its comment} of a config dataclass, read from the source: the comment on the
    field's line plus any comment-only lines right under it (the project's one-comment-per-field
    convention). A field without a comment is an error: a generated ROS parameter would have no
    description."""
    names = [f.name for f in dataclasses.fields(cls)]
    docs: dict[str, list[str]] = {}
    for klass in cls.__mro__:          # an inherited field's comment is in its own class's source
        if dataclasses.is_dataclass(klass):
            for name, doc in _own_field_docs(klass, names).items():
                if not docs.get(name):
                    docs[name] = doc
    missing = [n for n in names if not docs.get(n)]
    check(not missing, f"{cls.__name__}: fields without a comment: {missing}")
    return {n: " ".join(docs[n]) for n in names}


def _own_field_docs(cls: type, names: list[str]) -> dict[str, list[str]]:
    """The comments of the fields `names` written in `cls`'s own source: on the field's line, then
    comment-only lines right under it; a field with none there takes the first comments that follow
    its line (on its statement's continuation lines or under it)."""
    import inspect
    import io
    import tokenize

    docs: dict[str, list[str]] = {}
    current = None
    depth_line: dict[int, str] = {}
    src = inspect.getsource(cls)
    for tok in tokenize.generate_tokens(io.StringIO(src).readline):
        if tok.type == tokenize.NAME and tok.start[1] == 4 and tok.string in names and tok.start[0] not in depth_line:
            depth_line[tok.start[0]] = tok.string
            current = tok.string if tok.string not in docs else None
            if current:
                docs[current] = []
        elif tok.type == tokenize.NAME and tok.start[1] == 4 and tok.string == "def":
            break
        elif tok.type == tokenize.COMMENT and current is not None:
            line = tok.start[0]
            owner = depth_line.get(line)
            continuation = owner is None and (tok.line.strip().startswith("#") or not docs[current])
            if owner == current or continuation:
                docs[current].append(tok.string.lstrip("#").strip())
    return docs
