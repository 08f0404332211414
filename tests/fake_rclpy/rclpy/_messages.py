"""Message classes of the fake rclpy, generated from rosbags' ROS 2 Humble typestore.

Each class behaves like a rosidl-generated rclpy class where our nodes can tell the
difference: keyword-only construction with unknown names rejected, `__slots__`, constants as
class attributes, `get_fields_and_field_types()`, and setters that check types exactly as
rclpy's generated code does (a Python `float` for float fields, so `numpy.float32` fails; a
Python `int` in range for integer fields; numeric sequences stored as `array.array` and
given as array.array / sequence of the right Python type, so a bare numpy array fails; fixed
arrays stored as numpy arrays). `to_rosbags` / `from_rosbags` convert to and from rosbags'
dataclasses, which is how every publish goes through CDR.
"""
from __future__ import annotations

import array
import math
from collections import UserList, UserString
from collections.abc import Sequence, Set
from functools import lru_cache

import numpy as np
from rosbags.typesys import Stores, get_typestore
from rosbags.typesys.base import Nodetype

_INT_RANGES = {"int8": (-2**7, 2**7 - 1), "uint8": (0, 2**8 - 1), "int16": (-2**15, 2**15 - 1),
               "uint16": (0, 2**16 - 1), "int32": (-2**31, 2**31 - 1), "uint32": (0, 2**32 - 1),
               "int64": (-2**63, 2**63 - 1), "uint64": (0, 2**64 - 1), "char": (0, 255)}
_TYPECODES = {"int8": "b", "uint8": "B", "int16": "h", "uint16": "H", "int32": "i", "uint32": "I",
              "int64": "q", "uint64": "Q", "float32": "f", "float64": "d", "byte": "B", "char": "B"}
_DTYPES = {k: np.dtype(v) for k, v in _TYPECODES.items()}
_FLOAT_MAX = {"float32": 3.402823466e+38, "float64": 1.7976931348623157e+308}

# std_srvs is not in the Humble typestore: two of its services, as their .srv files define them
# (rosbags keeps every interface under <pkg>/msg/, so a service's halves live there too).
_EXTRA = {
    "std_srvs/msg/Trigger_Request": "",
    "std_srvs/msg/Trigger_Response": "bool success\nstring message\n",
    "std_srvs/msg/SetBool_Request": "bool data\n",
    "std_srvs/msg/SetBool_Response": "bool success\nstring message\n",
}


@lru_cache(maxsize=1)
def typestore():
    from rosbags.typesys import get_types_from_msg

    ts = get_typestore(Stores.ROS2_HUMBLE)
    add = {}
    for name, text in _EXTRA.items():
        add.update(get_types_from_msg(text, name))
    ts.register(add)
    return ts


def _ros_name(base: str) -> str:
    return {"float32": "float", "float64": "double", "bool": "boolean", "byte": "octet"}.get(base, base)


def _check_base(base: str, value, where: str) -> None:
    if base == "byte":  # rosidl "octet": a bytes object of length 1 in rclpy
        assert isinstance(value, bytes) and len(value) == 1, \
            f"The '{where}' field must be of type 'bytes' of length 1, got {value!r}"
    elif base == "bool":
        assert isinstance(value, bool), f"The '{where}' field must be of type 'bool', got {type(value).__name__}"
    elif base == "string":
        assert isinstance(value, str), f"The '{where}' field must be of type 'str', got {type(value).__name__}"
    elif base in _FLOAT_MAX:
        assert isinstance(value, float), f"The '{where}' field must be of type 'float', got {type(value).__name__}"
        lim = _FLOAT_MAX[base]
        assert not (value < -lim or value > lim) or math.isinf(value), \
            f"The '{where}' field must be a {_ros_name(base)} in [-{lim}, {lim}], got {value!r}"
    elif base in _INT_RANGES:
        lo, hi = _INT_RANGES[base]
        assert isinstance(value, int) and not isinstance(value, bool), \
            f"The '{where}' field must be of type 'int', got {type(value).__name__}"
        assert lo <= value <= hi, f"The '{where}' field must be an integer in [{lo}, {hi}], got {value!r}"
    else:
        raise TypeError(f"fake rclpy: unsupported base type {base!r} of field {where!r}")


def _is_seq(value) -> bool:
    return (isinstance(value, (Sequence, Set, UserList)) and not isinstance(value, (str, UserString)))


class _Field:
    """One field's type: kind in base | name | array (fixed) | sequence, element base/name."""

    def __init__(self, name: str, spec):
        node, detail = spec
        self.name = name
        self.size = 0
        if node == Nodetype.BASE:
            self.kind, self.elem = "base", detail[0]
        elif node == Nodetype.NAME:
            self.kind, self.elem = "name", detail
        else:
            (enode, edetail), size = detail
            self.kind = "array" if node == Nodetype.ARRAY else "sequence"
            self.size = size if node == Nodetype.ARRAY else 0
            self.bound = size if node == Nodetype.SEQUENCE else 0
            self.elem_is_msg = enode == Nodetype.NAME
            self.elem = edetail if self.elem_is_msg else edetail[0]

    @property
    def _byte_seq(self) -> bool:
        """A `byte` (octet) sequence: rclpy keeps a list of one-byte bytes objects."""
        return self.kind == "sequence" and not self.elem_is_msg and self.elem == "byte"

    def default(self):
        if self.kind == "base":
            return {"bool": False, "string": "", "byte": b"\x00"}.get(
                self.elem, 0.0 if self.elem in _FLOAT_MAX else 0)
        if self.kind == "name":
            return message_class(self.elem)()
        numeric = not self.elem_is_msg and self.elem in _TYPECODES and not self._byte_seq
        if self.kind == "array":
            if numeric:
                return np.zeros(self.size, _DTYPES[self.elem])
            return [message_class(self.elem)() if self.elem_is_msg else _Field(self.name, (Nodetype.BASE, (self.elem, 0))).default()
                    for _ in range(self.size)]
        return array.array(_TYPECODES[self.elem]) if numeric else []

    def coerce(self, value, where: str):
        """Check `value` as rclpy's setter does; return what the message stores."""
        if self.kind == "base":
            _check_base(self.elem, value, where)
            return value
        if self.kind == "name":
            cls = message_class(self.elem)
            assert isinstance(value, cls), f"The '{where}' field must be a sub message of type '{cls.__name__}'"
            return value
        numeric = not self.elem_is_msg and self.elem in _TYPECODES and not self._byte_seq
        if self.kind == "array" and numeric:
            if isinstance(value, np.ndarray):
                assert value.dtype == _DTYPES[self.elem] and value.size == self.size, \
                    f"The '{where}' numpy.ndarray() must have dtype {_DTYPES[self.elem]} and size {self.size}"
                return value
            assert _is_seq(value) and len(value) == self.size, f"The '{where}' field must be a sequence of size {self.size}"
            for v in value:
                _check_base(self.elem, v, where)
            return np.array(value, dtype=_DTYPES[self.elem])
        if numeric:
            tc = _TYPECODES[self.elem]
            if isinstance(value, array.array):
                assert value.typecode == tc, f"The '{where}' array.array() must have the type code of '{tc}'"
                return value
            assert _is_seq(value), (f"The '{where}' field must be a set or sequence of "
                                    f"'{_ros_name(self.elem)}' values (a numpy array is neither)")
            for v in value:
                _check_base(self.elem, v, where)
            return array.array(tc, value)
        assert _is_seq(value), f"The '{where}' field must be a set or sequence"
        if self.bound and self.kind == "sequence":
            assert len(value) <= self.bound, f"The '{where}' field must have at most {self.bound} items"
        if self.kind == "array":
            assert len(value) == self.size, f"The '{where}' field must have {self.size} items"
        for v in value:
            if self.elem_is_msg:
                assert isinstance(v, message_class(self.elem)), \
                    f"The '{where}' items must be of type '{message_class(self.elem).__name__}'"
            else:
                _check_base(self.elem, v, where)
        return list(value)


class FakeMessage:
    """Base of generated classes (what rclpy's metaclass-built classes provide)."""

    __slots__ = ()
    _TYPE: str = ""
    _FIELDS: dict = {}

    def __init__(self, **kwargs):
        unknown = [k for k in kwargs if k not in self._FIELDS]
        assert not unknown, f"Invalid arguments passed to constructor: {', '.join(unknown)}"
        for name, f in self._FIELDS.items():
            setattr(self, name, kwargs[name] if name in kwargs else f.default())

    @classmethod
    def get_fields_and_field_types(cls) -> dict[str, str]:
        out = {}
        for name, f in cls._FIELDS.items():
            el = f.elem.replace("/msg/", "/") if f.kind == "name" or getattr(f, "elem_is_msg", False) else _ros_name(f.elem)
            out[name] = {"base": el, "name": el, "array": f"{el}[{f.size}]", "sequence": f"sequence<{el}>"}[f.kind]
        return out

    def __eq__(self, other):
        if type(self) is not type(other):
            return False
        for name in self._FIELDS:
            a, b = getattr(self, name), getattr(other, name)
            if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
                if not np.array_equal(a, b):
                    return False
            elif a != b:
                return False
        return True

    def __repr__(self):
        inner = ", ".join(f"{k}={getattr(self, k)!r:.60}" for k in self._FIELDS)
        return f"{self._TYPE.replace('/', '.')}({inner})"


def _make_property(name: str, f: _Field):
    slot = "_" + name

    def get(self):
        return getattr(self, slot)

    def set_(self, value):
        object.__setattr__(self, slot, f.coerce(value, name))
    return property(get, set_)


@lru_cache(maxsize=None)
def message_class(msgtype: str) -> type:
    """The fake rclpy class of e.g. "sensor_msgs/msg/Image" (or "std_srvs/srv/Trigger_Request")."""
    ts = typestore()
    if msgtype not in ts.fielddefs:
        raise ImportError(f"fake rclpy: no interface {msgtype!r} in the typestore")
    consts, fields = ts.fielddefs[msgtype]
    fdefs = {name: _Field(name, spec) for name, spec in fields}
    ns = {"__slots__": tuple("_" + n for n in fdefs), "_TYPE": msgtype, "_FIELDS": fdefs,
          "__module__": msgtype.rsplit("/", 1)[0].replace("/", ".")}
    for cname, _ctype, cvalue in consts:
        ns[cname] = bytes([cvalue]) if _ctype == "byte" else cvalue
    for name, f in fdefs.items():
        ns[name] = _make_property(name, f)
    return type(msgtype.rsplit("/", 1)[1], (FakeMessage,), ns)


def to_rosbags(msg: FakeMessage):
    """The rosbags dataclass holding the same values (for CDR serialisation)."""
    cls = typestore().types[msg._TYPE]
    kwargs = {}
    for name, f in msg._FIELDS.items():
        v = getattr(msg, name)
        if f.kind == "base" and f.elem == "byte":
            v = v[0]
        elif f.kind == "name":
            v = to_rosbags(v)
        elif f.kind in ("array", "sequence"):
            if f._byte_seq:
                v = np.array([b[0] for b in v], dtype=np.uint8)
            elif not f.elem_is_msg and f.elem == "bool":
                v = np.array(v, dtype=bool)
            elif not f.elem_is_msg and f.elem in _TYPECODES:
                v = np.array(v, dtype=_DTYPES[f.elem])
            elif f.elem_is_msg:
                v = [to_rosbags(x) for x in v]
            else:
                v = list(v)
        kwargs[name] = v
    return cls(**kwargs)


def from_rosbags(obj, msgtype: str) -> FakeMessage:
    """A fake rclpy message from a rosbags dataclass (as a subscriber receives it)."""
    cls = message_class(msgtype)
    kwargs = {}
    for name, f in cls._FIELDS.items():
        v = getattr(obj, name)
        if f.kind == "base":
            v = (float(v) if f.elem in _FLOAT_MAX else bool(v) if f.elem == "bool"
                 else str(v) if f.elem == "string" else bytes([int(v)]) if f.elem == "byte" else int(v))
        elif f.kind == "name":
            v = from_rosbags(v, f.elem)
        elif f._byte_seq:
            v = [bytes([int(x)]) for x in v]
        elif not f.elem_is_msg and f.elem == "bool":
            v = [bool(x) for x in v]
        elif not f.elem_is_msg and f.elem in _TYPECODES:
            arr = np.asarray(v, dtype=_DTYPES[f.elem])
            v = arr.copy() if f.kind == "array" else array.array(_TYPECODES[f.elem], arr.tobytes())
        elif f.elem_is_msg:
            v = [from_rosbags(x, f.elem) for x in v]
        else:
            v = list(v)
        kwargs[name] = v
    return cls(**kwargs)


def serialize(msg: FakeMessage) -> bytes:
    return bytes(typestore().serialize_cdr(to_rosbags(msg), msg._TYPE))


def deserialize(data: bytes, msgtype: str) -> FakeMessage:
    return from_rosbags(typestore().deserialize_cdr(data, msgtype), msgtype)


def install(package: str, kind: str = "msg"):
    """Module-level __getattr__ for `<package>.<kind>` modules: classes made on first use."""
    def __getattr__(name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        if kind == "srv":
            return service_class(f"{package}/srv/{name}")
        try:
            return message_class(f"{package}/{kind}/{name}")
        except ImportError as e:
            raise AttributeError(str(e)) from None
    return __getattr__


@lru_cache(maxsize=None)
def service_class(srvtype: str) -> type:
    """A service type with nested Request/Response classes, like rosidl's."""
    try:
        base = srvtype.replace("/srv/", "/msg/")
        req, resp = message_class(base + "_Request"), message_class(base + "_Response")
    except ImportError as e:
        raise AttributeError(str(e)) from None
    return type(srvtype.rsplit("/", 1)[1], (), {"Request": req, "Response": resp, "_TYPE": srvtype,
                                                "__module__": srvtype.rsplit("/", 1)[0].replace("/", ".")})
