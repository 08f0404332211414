"""The cost of one control-loop message in the node process, before and after it was built directly
as an rclpy message (`vam_stack.rclpy_msgs`), measured side by side in one run: part of
`vam-stack bench ros` (its "messages" lines; alone with `--messages-only`, no graph started).

- send: a 14-joint target (or joint state) from a numpy vector to the rclpy message a publisher
  takes: before, `msgs.joint_state_msg` (a rosbags dataclass) then `ros.to_ros` (field by field into
  rclpy); now `rclpy_msgs.joint_state`.
- receive: an arrived rclpy JointState to names and numpy arrays: before, `ros.from_ros` (into
  rosbags) then `msgs.joint_state_to_numpy`; now `msgs.joint_state_to_numpy` on the message itself.
The two ways alternate in rounds, so a busy machine slows both alike; per message, p50 over the
rounds, in microseconds. Both ways give the same bytes on the wire (tests/vam_stack/test_rclpy_msgs.py).
"""
from __future__ import annotations

import time

import numpy as np

from vam_stack import msgs, rclpy_msgs, ros
from vam_stack.robot import load_robot

JOINT_STATE = "sensor_msgs/msg/JointState"


def _round_us(fn, n: int) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n * 1e6


def message_costs(rounds: int = 30, per_round: int = 200) -> dict:
    """{"send": {...}, "receive": {...}}, each with before_us, after_us (p50 per message) and the
    ratio before/after; the joint count is the robot description's."""
    if rounds < 1 or per_round < 1:
        raise ValueError(f"rounds and per_round must be >= 1, got {rounds!r}, {per_round!r}")
    names = list(load_robot().published_names())
    target = np.linspace(-0.5, 0.5, len(names))
    stamp_ns = time.time_ns()
    ways = {
        "send": (lambda: ros.to_ros(msgs.joint_state_msg(names, target, stamp_s=msgs.time_from_ns(stamp_ns),
                                                         frame_id="safety_filter")),
                 lambda: rclpy_msgs.joint_state(names, target, stamp_ns=stamp_ns, frame_id="safety_filter")),
    }
    arrived = ways["send"][1]()
    ways["receive"] = (lambda: msgs.joint_state_to_numpy(ros.from_ros(arrived, JOINT_STATE)),
                       lambda: msgs.joint_state_to_numpy(arrived))
    out = {}
    for key, (before, after) in ways.items():
        before(), after()                                     # first calls import and cache
        b, a = [], []
        for _ in range(rounds):
            b.append(_round_us(before, per_round))
            a.append(_round_us(after, per_round))
        bm, am = float(np.median(b)), float(np.median(a))
        out[key] = {"before_us": bm, "after_us": am, "ratio": bm / am, "joints": len(names)}
    return out


def format_costs(costs: dict) -> list[str]:
    return [f"  messages ({c['joints']}-joint JointState, in this process): {key} before {c['before_us']:.1f} us, "
            f"now {c['after_us']:.1f} us ({c['ratio']:.1f}x)" for key, c in costs.items()]
