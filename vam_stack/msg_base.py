"""The base of the message layer: message classes (the ROS 2 Humble typestore), the error every
builder and reader raises, time stamps and headers, and the image encodings we read and write.

vam_stack.msgs (and image_msgs, beside it) build on this module; users import the names from
vam_stack.msgs, which re-exports them.
"""
from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import numpy as np
from rosbags.typesys import Stores, get_typestore

IMAGE_ENCODINGS = {"rgb8": 3, "bgr8": 3, "mono8": 1}  # 8-bit encodings we read/write -> channels
_INT32_MAX = 2**31 - 1


class MessageError(ValueError):
    """A value cannot become (or be read from) a ROS message; the text names the value."""


@lru_cache(maxsize=1)
def typestore():
    """The ROS 2 Humble typestore (built once; ~0.1 s)."""
    return get_typestore(Stores.ROS2_HUMBLE)


def msg_class(msgtype: str) -> type:
    """Message class for e.g. "sensor_msgs/msg/Image"."""
    try:
        return typestore().types[msgtype]
    except KeyError:
        raise MessageError(f"unknown ROS 2 message type {msgtype!r}") from None


def msgtype_of(msg: Any) -> str:
    """ROS 2 type name of a message instance."""
    name = getattr(msg, "__msgtype__", None)
    if not isinstance(name, str):
        raise MessageError(f"not a ROS message: {type(msg).__name__}")
    return name


# --- time and header ----------------------------------------------------------------------

def time_msg(seconds: float) -> Any:
    """builtin_interfaces/Time from seconds (rounded to the nanosecond)."""
    return time_from_ns(seconds_to_ns(seconds))


def seconds_to_ns(seconds: float) -> int:
    """Integer nanoseconds of a non-negative, finite time in seconds."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float, np.floating, np.integer)):
        raise MessageError(f"time must be a number of seconds, got {seconds!r}")
    s = float(seconds)
    if not math.isfinite(s) or s < 0 or s > _INT32_MAX:
        raise MessageError(f"time must be finite and in [0, {_INT32_MAX}] s, got {seconds!r}")
    whole = math.floor(s)  # split first: s * 1e9 alone loses nanoseconds beyond 2**53 ns
    return whole * 1_000_000_000 + int(round((s - whole) * 1e9))


def time_from_ns(ns: int) -> Any:
    sec, nanosec = divmod(int(ns), 1_000_000_000)
    return msg_class("builtin_interfaces/msg/Time")(sec=sec, nanosec=nanosec)


def time_to_seconds(msg: Any) -> float:
    return msg.sec + msg.nanosec * 1e-9


def time_to_ns(msg: Any) -> int:
    return msg.sec * 1_000_000_000 + msg.nanosec


def header(stamp_s: Any, frame_id: str = "") -> Any:
    """std_msgs/Header from a stamp (seconds, or a builtin_interfaces/Time) and a frame id.

    Every builder below that takes `stamp_s` accepts the same two forms; pass a Time built
    with `time_from_ns` where nanosecond exactness matters (float seconds near 1.7e9 carry
    ~0.2 us of rounding).
    """
    if not isinstance(frame_id, str):
        raise MessageError(f"frame_id must be a string, got {frame_id!r}")
    time_cls = msg_class("builtin_interfaces/msg/Time")
    stamp = stamp_s if isinstance(stamp_s, time_cls) else time_msg(stamp_s)
    return msg_class("std_msgs/msg/Header")(stamp=stamp, frame_id=frame_id)
