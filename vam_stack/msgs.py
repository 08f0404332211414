"""The one place that converts numpy arrays and Python values to ROS 2 messages and back.

Message classes come from `rosbags`' ROS 2 Humble typestore, so field layouts are the real
ones and every message can be CDR-serialised exactly as rclpy would put it on the wire or
rosbag2 would store it. Nodes (through rclpy or the test fake), the simulation and the MCAP
recorder all build their messages here.

Every builder validates its input and raises `MessageError` naming the bad value; every
reader checks the message's own consistency (sizes, encodings) before trusting it.
"""
from __future__ import annotations

import json
import math
from typing import Any, Mapping, NamedTuple, Sequence

import numpy as np

from .msg_base import MessageError, header, msg_class, msgtype_of, time_from_ns, time_to_seconds, typestore
from .outputs import jsonable

DIAG_LEVELS = {"ok": 0, "warn": 1, "error": 2, "stale": 3}  # diagnostic_msgs/DiagnosticStatus
_FLOAT32_MAX = float(np.finfo(np.float32).max)


# --- serialisation ------------------------------------------------------------------------

def serialize(msg: Any) -> bytes:
    """CDR bytes of `msg` (little-endian, as rclpy/rosbag2 write them)."""
    return bytes(typestore().serialize_cdr(msg, msgtype_of(msg)))


def deserialize(data: bytes | memoryview, msgtype: str) -> Any:
    """Message of type `msgtype` from CDR bytes."""
    msg_class(msgtype)
    try:
        return typestore().deserialize_cdr(data, msgtype)
    except Exception as e:  # rosbags raises assorted errors on truncated/garbage input
        raise MessageError(f"cannot deserialize {len(data)} bytes as {msgtype}: {e}") from None


def roundtrip(msg: Any) -> Any:
    """`deserialize(serialize(msg))`: what a subscriber receives."""
    return deserialize(serialize(msg), msgtype_of(msg))


# --- joint states -------------------------------------------------------------------------

class JointStateData(NamedTuple):
    """Plain form of a sensor_msgs/JointState."""

    names: list[str]
    position: np.ndarray  # [n] float64
    velocity: np.ndarray  # [n] or [0] float64
    effort: np.ndarray  # [n] or [0] float64
    stamp_s: float
    frame_id: str


def vector(values: Any, n: int, what: str, unknown_nan: bool = False) -> np.ndarray:
    """`values` as a float64 [n] array (None: empty, as JointState allows), or MessageError naming the
    bad entry: non-finite refused (NaN allowed with `unknown_nan`, inf never)."""
    if values is None:
        return np.zeros(0, dtype=np.float64)
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise MessageError(f"{what} must be numbers, got {values!r}") from None
    if arr.ndim != 1 or arr.shape[0] != n:
        raise MessageError(f"{what} must have {n} entries (one per name), got shape {arr.shape}")
    bad = np.flatnonzero(np.isinf(arr) if unknown_nan else ~np.isfinite(arr))
    if bad.size:
        raise MessageError(f"{what}[{bad[0]}] is not finite: {arr[bad[0]]!r}")
    return arr


def joint_names(names: Sequence[str]) -> list[str]:
    """A non-empty list of unique, non-empty joint names, or MessageError naming the bad one."""
    if isinstance(names, str) or not isinstance(names, Sequence):
        raise MessageError(f"joint names must be a list of strings, got {names!r}")
    names = list(names)
    if not names:
        raise MessageError("joint names must not be empty")
    for i, nm in enumerate(names):
        if not isinstance(nm, str) or not nm:
            raise MessageError(f"joint name [{i}] must be a non-empty string, got {nm!r}")
    if len(set(names)) != len(names):
        dup = next(nm for nm in names if names.count(nm) > 1)
        raise MessageError(f"joint names must be unique, {dup!r} appears twice")
    return names


def joint_state_msg(names: Sequence[str], position: Any, velocity: Any = None,
                    effort: Any = None, stamp_s: float = 0.0, frame_id: str = "", unknown_nan: bool = False) -> Any:
    """sensor_msgs/JointState; velocity/effort may be omitted (sent empty, as ROS allows). `unknown_nan`:
    a NaN entry is a value the publisher could not measure this time (the ROS convention, the driver's
    unread joints) and is sent as NaN; without it, and for inf always, a non-finite value is refused."""
    names = joint_names(names)
    n = len(names)
    return msg_class("sensor_msgs/msg/JointState")(
        header=header(stamp_s, frame_id), name=names,
        position=vector(position, n, "position", unknown_nan),
        velocity=vector(velocity, n, "velocity", unknown_nan),
        effort=vector(effort, n, "effort", unknown_nan))


def joint_state_to_numpy(msg: Any) -> JointStateData:
    """Names and float64 arrays of a JointState, with size checks: a rosbags message or an rclpy one
    (read as it arrives, no conversion: the fields are the same)."""
    names = list(msg.name)
    n = len(names)
    pos = np.array(msg.position, dtype=np.float64)
    if pos.shape != (n,):
        raise MessageError(f"JointState has {n} names but {pos.size} positions")
    vel = np.array(msg.velocity, dtype=np.float64)
    eff = np.array(msg.effort, dtype=np.float64)
    for what, arr in (("velocity", vel), ("effort", eff)):
        if arr.size not in (0, n):
            raise MessageError(f"JointState has {n} names but {arr.size} {what} entries")
    return JointStateData(names, pos, vel, eff, time_to_seconds(msg.header.stamp),
                          msg.header.frame_id)


def clock_msg(seconds: float) -> Any:
    """rosgraph_msgs/Clock at `seconds` (finite, >= 0): a simulator's time on /clock."""
    if not (isinstance(seconds, (int, float, np.floating)) and math.isfinite(seconds) and seconds >= 0):
        raise MessageError(f"clock time must be a finite number of seconds >= 0, got {seconds!r}")
    return msg_class("rosgraph_msgs/msg/Clock")(clock=time_from_ns(int(round(float(seconds) * 1e9))))


# --- ros2_control command messages ---------------------------------------------------------

# --- std_msgs -----------------------------------------------------------------------------

def _finite32(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise MessageError(f"{what} must be a number, got {value!r}")
    v = float(value)
    if not math.isfinite(v) or abs(v) > _FLOAT32_MAX:
        raise MessageError(f"{what} must be a finite float32, got {value!r}")
    return v


def float32_msg(value: float) -> Any:
    return msg_class("std_msgs/msg/Float32")(data=_finite32(value, "Float32 value"))


def float32_value(msg: Any) -> float:
    return float(msg.data)


def float32_array_msg(values: Any, labels: Sequence[str] | None = None) -> Any:
    """std_msgs/Float32MultiArray; the layout records the array's shape (row-major)."""
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise MessageError(f"Float32MultiArray values must be numbers, got {values!r}") from None
    if arr.ndim == 0:
        raise MessageError(f"Float32MultiArray needs an array, got a scalar {values!r}")
    if not np.all(np.isfinite(arr)) or np.any(np.abs(arr) > _FLOAT32_MAX):
        raise MessageError("Float32MultiArray values must be finite float32")
    labels = list(labels) if labels is not None else [f"dim{i}" for i in range(arr.ndim)]
    if len(labels) != arr.ndim:
        raise MessageError(f"{len(labels)} labels for a {arr.ndim}-d array: {labels!r}")
    dim_cls = msg_class("std_msgs/msg/MultiArrayDimension")
    strides = [int(np.prod(arr.shape[i:])) for i in range(arr.ndim)]
    dims = [dim_cls(label=str(lb), size=int(sz), stride=st)
            for lb, sz, st in zip(labels, arr.shape, strides)]
    layout = msg_class("std_msgs/msg/MultiArrayLayout")(dim=dims, data_offset=0)
    return msg_class("std_msgs/msg/Float32MultiArray")(
        layout=layout, data=arr.astype(np.float32).reshape(-1))


def float32_array_to_numpy(msg: Any) -> np.ndarray:
    """float32 array shaped by the layout (1-d when the layout has no dims)."""
    data = np.array(msg.data, dtype=np.float32)
    off = int(msg.layout.data_offset)
    shape = tuple(int(d.size) for d in msg.layout.dim)
    if not shape:
        return data[off:]
    need = int(np.prod(shape))
    if data.size - off < need:
        raise MessageError(f"Float32MultiArray layout {shape} needs {need} values after offset "
                           f"{off}, message has {data.size}")
    return data[off: off + need].reshape(shape)


def string_msg(text: str) -> Any:
    if not isinstance(text, str):
        raise MessageError(f"String data must be str, got {type(text).__name__}: {text!r}")
    if "\x00" in text:
        raise MessageError("String data must not contain NUL characters")
    return msg_class("std_msgs/msg/String")(data=text)


def bool_msg(value: bool) -> Any:
    if not isinstance(value, (bool, np.bool_)):
        raise MessageError(f"Bool data must be True/False, got {value!r}")
    return msg_class("std_msgs/msg/Bool")(data=bool(value))


def json_msg(obj: Any) -> Any:
    """std_msgs/String holding `obj` as JSON (numpy scalars/arrays allowed; NaN rejected)."""
    try:
        text = json.dumps(obj, default=jsonable, allow_nan=False, sort_keys=True)
    except (TypeError, ValueError) as e:
        raise MessageError(f"cannot encode as JSON: {e}") from None
    return string_msg(text)


def json_from_msg(msg: Any) -> Any:
    try:
        return json.loads(msg.data)
    except json.JSONDecodeError as e:
        raise MessageError(f"String is not JSON: {e}: {msg.data[:80]!r}") from None


# --- diagnostics --------------------------------------------------------------------------

def _diag_value(v: Any) -> str:
    if isinstance(v, (float, np.floating)):
        return f"{float(v):.6g}"
    if isinstance(v, (bool, np.bool_)):
        return "true" if v else "false"
    return str(v)


def diagnostic_status(name: str, values: Mapping[str, Any], level: str = "ok",
                      message: str = "", hardware_id: str = "") -> Any:
    """diagnostic_msgs/DiagnosticStatus from a dict of key -> value (values become strings)."""
    if not isinstance(name, str) or not name:
        raise MessageError(f"diagnostic status name must be a non-empty string, got {name!r}")
    if level not in DIAG_LEVELS:
        raise MessageError(f"diagnostic level must be one of {list(DIAG_LEVELS)}, got {level!r}")
    if not isinstance(values, Mapping):
        raise MessageError(f"diagnostic values must be a mapping, got {values!r}")
    kv = msg_class("diagnostic_msgs/msg/KeyValue")
    pairs = []
    for k, v in values.items():
        if not isinstance(k, str) or not k:
            raise MessageError(f"diagnostic key must be a non-empty string, got {k!r}")
        pairs.append(kv(key=k, value=_diag_value(v)))
    return msg_class("diagnostic_msgs/msg/DiagnosticStatus")(
        level=DIAG_LEVELS[level], name=name, message=str(message),
        hardware_id=str(hardware_id), values=pairs)


def diagnostic_array_msg(statuses: Sequence[Any] | Mapping[str, Mapping[str, Any]],
                         stamp_s: float) -> Any:
    """diagnostic_msgs/DiagnosticArray from statuses, or from {name: {key: value}} (level ok)."""
    if isinstance(statuses, Mapping):
        statuses = [diagnostic_status(n, v) for n, v in statuses.items()]
    status_cls = msg_class("diagnostic_msgs/msg/DiagnosticStatus")
    for s in statuses:
        if not isinstance(s, status_cls):
            raise MessageError(f"expected DiagnosticStatus, got {type(s).__name__}")
    return msg_class("diagnostic_msgs/msg/DiagnosticArray")(
        header=header(stamp_s, ""), status=list(statuses))


def diagnostics_to_dict(msg: Any) -> dict[str, dict[str, Any]]:
    """{status name: {"level", "message", "hardware_id", "values": {key: value str}}}."""
    names = {v: k for k, v in DIAG_LEVELS.items()}
    out = {}
    for s in msg.status:
        out[s.name] = {"level": names.get(int(s.level), str(s.level)), "message": s.message,
                       "hardware_id": s.hardware_id,
                       "values": {kv.key: kv.value for kv in s.values}}
    return out
