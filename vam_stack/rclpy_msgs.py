"""The control loop's messages built once, directly as rclpy messages: joint states and joint targets
(30 Hz each way), and the ros2_control outputs a target may also go out as.

`vam_stack.msgs` builds rosbags dataclasses (what the MCAP recorder and the tests without ROS use);
a node that published one had `vam_stack.ros.to_ros` copy it field by field into the rclpy class,
and read each message back through `from_ros` the same way. Here the rclpy message is built in one
step, checked by the very validators `msgs` uses (the same `MessageError` for the same bad value),
its numeric fields handed over as `array.array` (the form rclpy's generated setters store, so no
per-element check). Reading needs no copy class at all: `msgs.joint_state_to_numpy` reads any
message with JointState's fields, the rclpy one included. `vam-stack bench ros --messages-only` times both
paths side by side.

rclpy's message packages are imported on first use: importing this module does not need ROS.
"""
from __future__ import annotations

import array
from typing import Any, Sequence

import numpy as np

from .msg_base import MessageError
from .msgs import joint_names, vector
from .ros import ros_class as _cls


def _doubles(arr: np.ndarray) -> array.array:
    out = array.array("d")
    out.frombytes(np.ascontiguousarray(arr, dtype=np.float64).tobytes())
    return out


def _stamp(msg: Any, stamp_ns: int) -> None:
    """Set `msg.header.stamp` from integer nanoseconds (>= 0)."""
    if isinstance(stamp_ns, bool) or not isinstance(stamp_ns, (int, np.integer)) or stamp_ns < 0:
        raise MessageError(f"stamp must be integer nanoseconds >= 0, got {stamp_ns!r}")
    msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(int(stamp_ns), 1_000_000_000)


def _frame(msg: Any, frame_id: str) -> None:
    if not isinstance(frame_id, str):
        raise MessageError(f"frame_id must be a string, got {frame_id!r}")
    msg.header.frame_id = frame_id


def joint_state(names: Sequence[str], position: Any, velocity: Any = None, effort: Any = None, stamp_ns: int = 0,
                frame_id: str = "", unknown_nan: bool = False) -> Any:
    """sensor_msgs/msg/JointState (rclpy), as `msgs.joint_state_msg` builds it: velocity/effort may be
    omitted (sent empty); `unknown_nan` lets NaN stand for a value not measured this time."""
    names = joint_names(names)
    n = len(names)
    msg = _cls("sensor_msgs/msg/JointState")()
    _stamp(msg, stamp_ns)
    _frame(msg, frame_id)
    msg.name = names
    msg.position = _doubles(vector(position, n, "position", unknown_nan))
    msg.velocity = _doubles(vector(velocity, n, "velocity", unknown_nan))
    msg.effort = _doubles(vector(effort, n, "effort", unknown_nan))
    return msg


def joint_trajectory(names: Sequence[str], position: Any, reach_s: float, stamp_ns: int = 0,
                     frame_id: str = "") -> Any:
    """trajectory_msgs/msg/JointTrajectory (rclpy) of one point, `position` reached `reach_s` after
    the stamp (joint_trajectory_controller's `time_from_start`)."""
    names = joint_names(names)
    if not (isinstance(reach_s, (int, float, np.floating)) and np.isfinite(reach_s) and reach_s > 0):
        raise MessageError(f"trajectory time must be a finite number of seconds > 0, got {reach_s!r}")
    msg = _cls("trajectory_msgs/msg/JointTrajectory")()
    _stamp(msg, stamp_ns)
    _frame(msg, frame_id)
    msg.joint_names = names
    point = _cls("trajectory_msgs/msg/JointTrajectoryPoint")()
    point.positions = _doubles(vector(position, len(names), "trajectory position"))
    ns = int(round(float(reach_s) * 1e9))
    point.time_from_start.sec, point.time_from_start.nanosec = divmod(ns, 1_000_000_000)
    msg.points = [point]
    return msg


def float64_array(values: Any, label: str = "joint") -> Any:
    """std_msgs/msg/Float64MultiArray (rclpy) of a finite, non-empty vector (forward_command_controller)."""
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1 or arr.size == 0 or not np.all(np.isfinite(arr)):
        raise MessageError(f"Float64MultiArray commands must be a finite, non-empty vector, got {values!r}")
    dim = _cls("std_msgs/msg/MultiArrayDimension")(label=label, size=int(arr.size), stride=int(arr.size))
    msg = _cls("std_msgs/msg/Float64MultiArray")()
    msg.layout.dim = [dim]
    msg.data = _doubles(arr)
    return msg
