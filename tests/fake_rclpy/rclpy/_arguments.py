"""ROS command-line arguments and parameter files, parsed with rcl's rules (the fake's rcl).

`parse(args)` reads what rcl_parse_arguments reads (rcl/src/rcl/arguments.c, Humble/Jazzy):
only arguments after `--ros-args` (until `--`) are ROS arguments; there `-p/--param
[node:]name:=value`, `--params-file FILE`, `-r/--remap [node:]from:=to`, `--log-level
[name:=]level`, `--log-config-file F`, `-e/--enclave E`, `--enable-/--disable-{stdout,rosout,
external-lib}-logs` are known; a flag without its value or an unparsable rule or file is an
error (rclpy raises RCLError from init, RCLInvalidROSArgsError from Node); any other ROS
argument is unknown (rclpy raises UnknownROSArgsError with the list of them).

Parameter overrides keep rcl's order and structure: one entry per node name (a file's node
names, `/**` for a `-p` without a node prefix), entries merged by name in order of first
appearance, a later value for the same parameter replacing the earlier one.

Values are typed as rcl_yaml_param_parser's get_value (src/parse.c) types them, not as
YAML/PyYAML would: a quoted scalar is a string; an unquoted one is a bool if it is one of
Y y yes Yes YES true True TRUE on On ON (and N n no ... off Off OFF), else an int64 if C's
strtoll(base 0) reads all of it without overflow (so 010 is 8 and 0x10 is 16), else a double
if strtod reads all of it without range error (so 1e3, inf and nan are doubles; .inf/.nan
forms too), else a string (so null and ~ are strings). An empty unquoted value is an error.
A sequence must hold scalars of one type (an empty one is an unset parameter); aliases are
refused. `!!str` makes a string on Jazzy but is ignored on Humble: the fake refuses it where
the two would disagree. Nested maps under ros__parameters make dotted parameter names;
nested maps above it make the node's namespace (a/b -> /a/b).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import yaml

from rclpy.parameter import Parameter

PARAMS_KEY = "ros__parameters"
_TRUE = {"Y", "y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"}
_FALSE = {"N", "n", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"}
_SPECIAL = {".nan", ".NaN", ".NAN", ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", "-.inf", "-.Inf", "-.INF"}
_WS = " \t\n\v\f\r"
_INT_RE = re.compile(r"[+-]?(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)")
_DEC_RE = re.compile(r"[+-]?(([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?)")
_HEX_RE = re.compile(r"[+-]?0[xX]([0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)([pP][+-]?[0-9]+)?")
_INFNAN_RE = re.compile(r"[+-]?(inf|infinity|nan(\([0-9A-Za-z_]*\))?)", re.IGNORECASE)
_NAME_PART = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\*|\*\*")
_LOG_FLAGS = {f"--{a}-{s}-logs" for a in ("enable", "disable") for s in ("stdout", "rosout", "external-lib")}


class ArgumentError(ValueError):
    """An argument rcl cannot parse (the message says which and why)."""


@dataclass
class Arguments:
    params: dict = field(default_factory=dict)  # node name -> {param name: Parameter}, rcl's order
    remaps: list = field(default_factory=list)  # (node prefix or None, from, to)
    log_levels: dict = field(default_factory=dict)  # logger name ("" = default) -> severity
    unknown_ros: list = field(default_factory=list)
    non_ros: list = field(default_factory=list)
    param_files: list = field(default_factory=list)

    def add_param(self, node: str, name: str, param: Parameter) -> None:
        self.params.setdefault(node, {})[name] = param


# --- scalar typing (rcl_yaml_param_parser get_value) -----------------------------------------

def _strtoll(text: str):
    """C strtoll(text, &end, 0) when it reads the whole text without overflow, else None."""
    s = text.lstrip(_WS)
    if not _INT_RE.fullmatch(s):
        return None
    sign, body = ("-", s[1:]) if s[0] == "-" else ("", s.lstrip("+"))
    if body[:2] in ("0x", "0X"):
        v = int(body, 16)
    elif len(body) > 1 and body[0] == "0":
        v = int(body, 8)
    else:
        v = int(body)
    v = -v if sign else v
    return v if -2**63 <= v < 2**63 else None  # ERANGE: not an int


def _strtod(text: str):
    """C strtod(text, &end) when it reads the whole text without a range error, else None."""
    s = text.lstrip(_WS)
    if _INFNAN_RE.fullmatch(s):
        v = float("nan") if "nan" in s.lower() else float("inf")
        return -v if s[0] == "-" else v
    if _DEC_RE.fullmatch(s):
        v = float(s)
        mantissa = re.split(r"[eE]", s)[0]
        nonzero = bool(re.search(r"[1-9]", mantissa))
    elif _HEX_RE.fullmatch(s):
        body = s.lstrip("+-")[2:]
        mantissa = re.split(r"[pP]", body)[0]
        v = float.fromhex(("-" if s[0] == "-" else "") + "0x" + (body if re.search(r"[pP]", body) else body + "p0"))
        nonzero = bool(re.search(r"[1-9a-fA-F]", mantissa))
    else:
        return None
    if math.isinf(v) or (v == 0.0 and nonzero) or (v != 0.0 and abs(v) < 2.2250738585072014e-308):
        return None  # overflow or underflow: ERANGE
    return v


def _humble_value(text: str, quoted: bool):
    if not quoted:
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        i = _strtoll(text)
        if i is not None:
            return i
        if text in _SPECIAL:
            body = text.lstrip("+-.")
            v = float("nan") if body.lower() == "nan" else float("inf")
            return -v if text.startswith("-") else v
        d = _strtod(text)
        if d is not None:
            return d
    return text


def scalar_value(text: str, style, tag, line: int):
    quoted = style in ("'", '"')
    if not quoted and text == "":
        raise ArgumentError(f"No value at line {line}")
    value = _humble_value(text, quoted)
    if tag == "tag:yaml.org,2002:str" and not isinstance(value, str):
        raise ArgumentError(f"'!!str {text}' at line {line} is a string on Jazzy but a {type(value).__name__} on "
                            "Humble (rcl ignores tags there); quote the value instead")
    return value


# --- YAML events -> a small tree that keeps scalar styles and tags -------------------------

def _tree(text: str, source: str) -> list:
    """Documents of (kind, payload, line) nodes: ("scalar", (value, style, tag)), ("seq", [...]),
    ("map", [(key, value), ...])."""
    docs, stack = [], []
    try:
        events = list(yaml.parse(text, Loader=yaml.SafeLoader))
    except yaml.YAMLError as e:
        line = getattr(getattr(e, "problem_mark", None), "line", 0) + 1
        raise ArgumentError(f"Error parsing a event near line {line} of {source}: {e}") from None

    def add(node):
        if not stack:
            docs.append(node)
        else:
            stack[-1][1].append(node)

    for ev in events:
        line = ev.start_mark.line + 1 if ev.start_mark is not None else 0
        if isinstance(ev, yaml.AliasEvent):
            raise ArgumentError(f"Will not support aliasing at line {line}")
        if isinstance(ev, yaml.ScalarEvent):
            add(("scalar", (ev.value, ev.style, ev.tag), line))
        elif isinstance(ev, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            stack.append(("seq" if isinstance(ev, yaml.SequenceStartEvent) else "map", [], line))
        elif isinstance(ev, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            kind, items, start = stack.pop()
            if kind == "map":
                items = list(zip(items[0::2], items[1::2]))
            add((kind, items, start))
    return docs


def _seq_values(node, line: int):
    kind, items, _ = node
    values, first = [], None
    for item in items:
        if item[0] != "scalar":
            raise ArgumentError(f"Sequences can only hold scalars (a nested {item[0]} at line {item[2]})")
        v = scalar_value(*item[1], item[2])
        t = type(v)
        if first is None:
            first = t
        elif t is not first:
            tname = {bool: "bool", int: "integer", float: "double", str: "string"}[t]
            raise ArgumentError(f"Sequence should be of same type. Value type '{tname}' do not belong at "
                                f"line_num {item[2]}")
        values.append(v)
    return values


def _param(name: str, node) -> Parameter:
    kind, payload, line = node
    if kind == "scalar":
        return Parameter(name, value=scalar_value(*payload, line))
    values = _seq_values(node, line)
    if not values:  # rcl stores the name with no value: rclpy sees an unset parameter
        return Parameter(name, Parameter.Type.NOT_SET, None)
    return Parameter(name, value=values)


def _validate_node_name(name: str, line: int) -> None:
    parts = name.strip("/").split("/") if name not in ("/",) else []
    if not parts or not all(_NAME_PART.fullmatch(p) for p in parts):
        raise ArgumentError(f"Invalid node name {name!r} at line {line}")


def _walk_params(node, prefix: str, node_name: str, out: Arguments) -> None:
    kind, items, line = node
    if kind != "map":
        raise ArgumentError(f"Cannot have a value before {PARAMS_KEY} at line {line}")
    for key, value in items:
        if key[0] != "scalar":
            raise ArgumentError(f"Sequences cannot be key at line {key[2]}")
        if key[1][0] == "":
            raise ArgumentError(f"No key at line {key[2]}")
        name = prefix + key[1][0]
        if value[0] == "map":
            _walk_params(value, name + ".", node_name, out)
        else:
            out.add_param(node_name, name, _param(name, value))


def _walk_nodes(node, ns: list, out: Arguments) -> None:
    kind, items, line = node
    if kind != "map":
        raise ArgumentError(f"Cannot have a value before {PARAMS_KEY} at line {line}")
    for key, value in items:
        if key[0] != "scalar":
            raise ArgumentError(f"Sequences cannot be key at line {key[2]}")
        text = key[1][0]
        if text == "":
            raise ArgumentError(f"No key at line {key[2]}")
        if text.startswith(PARAMS_KEY):  # rcl compares the first strlen(PARAMS_KEY) characters
            if not ns:
                raise ArgumentError(f"There are no node names before {PARAMS_KEY} at line {key[2]}")
            node_name = "/".join(ns)
            _validate_node_name(node_name, key[2])
            out.params.setdefault(node_name, {})
            _walk_params(value, "", node_name, out)
            ns = ns[:-1]  # rcl drops the node name once its parameters start
        elif value[0] == "scalar":
            raise ArgumentError(f"Cannot have a value before {PARAMS_KEY} at line {value[2]}")
        elif value[0] == "seq":
            raise ArgumentError(f"Sequences can only be values and not keys in params. Error at line {value[2]}")
        else:
            _walk_nodes(value, ns + [text], out)


def load_params_file(path: str, out: Arguments) -> None:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise ArgumentError(f"Error opening YAML file {path}: {e}") from None
    for doc in _tree(text, path):
        _walk_nodes(doc, [], out)


def parse_value_rule(node: str, name: str, text: str, out: Arguments) -> None:
    """`-p [node:]name:=value`: the value as rcl_parse_yaml_value reads it (scalar or sequence)."""
    if text == "":
        raise ArgumentError("No value")
    docs = _tree(text, "parameter value")
    if len(docs) != 1 or docs[0][0] == "map":
        raise ArgumentError(f"Cannot parse {text!r} as a parameter value")
    out.add_param(node, name, _param(name, docs[0]))


# --- rules ---------------------------------------------------------------------------------

def _split_rule(rule: str, what: str):
    lhs, sep, rhs = rule.partition(":=")
    if not sep or not lhs:
        raise ArgumentError(f"Couldn't parse {what} rule: {rule!r}")
    node = None
    if ":" in lhs:
        node, _, lhs = lhs.partition(":")
        if not _NAME_PART.fullmatch(node) or node in ("*", "**"):
            raise ArgumentError(f"Couldn't parse {what} rule: {rule!r} (node name prefix)")
    if not lhs:
        raise ArgumentError(f"Couldn't parse {what} rule: {rule!r}")
    return node, lhs, rhs


def parse(args) -> Arguments:
    out = Arguments()
    args = list(args or [])
    ros, i = False, 0
    while i < len(args):
        a = args[i]
        if not isinstance(a, str):
            raise TypeError(f"arguments must be str, got {a!r}")
        nxt = args[i + 1] if i + 1 < len(args) else None
        if not ros:
            if a == "--ros-args":
                ros = True
            else:
                out.non_ros.append(a)
            i += 1
            continue
        if a == "--ros-args":
            i += 1
            continue
        if a == "--":
            ros = False
            i += 1
            continue
        if a in ("-p", "--param"):
            if nxt is None:
                raise ArgumentError(f"Couldn't parse trailing {a} flag. No parameter override rule found.")
            node, name, text = _split_rule(nxt, "parameter override")
            if not all(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", p) for p in re.split(r"[./]", name)):
                raise ArgumentError(f"Couldn't parse parameter override rule: '{a} {nxt}'. Error: invalid name")
            try:
                parse_value_rule("/**" if node is None else node, name, text, out)
            except ArgumentError as e:
                raise ArgumentError(f"Couldn't parse parameter override rule: '{a} {nxt}'. Error: {e}") from None
            i += 2
        elif a in ("-r", "--remap"):
            if nxt is None:
                raise ArgumentError(f"Couldn't parse trailing {a} flag. No remap rule found.")
            node, src, dst = _split_rule(nxt, "remap")
            if not dst:
                raise ArgumentError(f"Couldn't parse remap rule: '{a} {nxt}'.")
            out.remaps.append((node, src, dst))
            i += 2
        elif a == "--params-file":
            if nxt is None:
                raise ArgumentError(f"Couldn't parse trailing {a} flag. No file path provided.")
            try:
                load_params_file(nxt, out)
            except ArgumentError as e:
                raise ArgumentError(f"Couldn't parse params file: '{a} {nxt}'. Error: {e}") from None
            out.param_files.append(nxt)
            i += 2
        elif a == "--log-level":
            if nxt is None:
                raise ArgumentError(f"Couldn't parse trailing log level flag: '{a}'. No log level provided.")
            name, sep, level = nxt.rpartition(":=")
            from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
            try:
                out.log_levels[name if sep else ""] = _rclpy.rclpy_logging_severity_level_from_string(level)
            except RuntimeError:
                raise ArgumentError(f"Couldn't parse log level: '{a} {nxt}'.") from None
            i += 2
        elif a in ("--log-config-file", "-e", "--enclave"):
            if nxt is None:
                raise ArgumentError(f"Couldn't parse trailing {a} flag.")
            i += 2
        elif a in _LOG_FLAGS:
            i += 1
        else:
            out.unknown_ros.append(a)
            i += 1
    return out


# --- what a node makes of them -------------------------------------------------------------

def node_pattern(name: str) -> re.Pattern:
    """rclpy's match of a parameter file's node name against a node's fully qualified name:
    a leading '/' is added, '/*' becomes '(/\\w+)' (so '/**' becomes '(/\\w+)*'), and the
    whole name must match."""
    if not name.startswith("/"):
        name = "/" + name
    return re.compile(name.replace("/*", r"(/[A-Za-z0-9_]+)"))


def params_for(fqn: str, sources) -> dict:
    """{name: Parameter} for the node `fqn` from Arguments in order (global, then the node's)."""
    out: dict = {}
    for args in sources:
        for node_name, params in args.params.items():
            if node_pattern(node_name).fullmatch(fqn):
                out.update(params)
    return out
