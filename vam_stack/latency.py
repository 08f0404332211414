"""Per-frame stage stamps for `vam-stack bench ros`'s latency budget, off the control path.

A node on the image path notes, per stacked frame, the wall-clock time (`time.time_ns()`: one
clock for every process on the machine, whatever ROS clock a node runs on) at which the frame
passed each of its stages, keyed by the frame's header stamp (`note`: a dict into a bounded
deque, about a microsecond). A timer publishes what was noted since the last one as one JSON
std_msgs/String on LATENCY_TOPIC (`flush`, every `period_s`; nothing when nothing was noted),
so the per-frame cost on the path is the note alone (and nothing is sent while no one subscribes). The bench pairs the records of the camera
bridge and the policy node by stamp and reports each stage's p50/p99.

Stages (record keys): the bridge's `capture`, `arrival` (host), `stacked`, `published` (the
raw publish call began), `published_jpeg` (the compressed one began, after its encoding);
the policy node's `received` (the callback began) and `input` (the frame stored as the
policy's next input).
"""
from __future__ import annotations

import json
import time
from collections import deque
from typing import Any

LATENCY_TOPIC = "/vam/debug/latency"
FLUSH_PERIOD_S = 0.5


def stamp_key(stamp: Any) -> int:
    """A header stamp (builtin_interfaces/Time, rclpy or rosbags) as integer nanoseconds."""
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


class LatencyTrace:
    """Stage stamps of a node's frames; `publisher(node)` makes the debug topic's publisher."""

    def __init__(self, source: str, maxlen: int = 2000):
        self.source = source
        self._records: deque[dict] = deque(maxlen=maxlen)

    @staticmethod
    def now_ns() -> int:
        return time.time_ns()

    def note(self, stamp_ns: int, **stages_ns: int) -> None:
        """One frame's stages (wall-clock ns), keyed by its header stamp [ns]."""
        self._records.append({"stamp": stamp_ns, **stages_ns})

    def take(self) -> list[dict]:
        out = []
        while self._records:
            out.append(self._records.popleft())
        return out

    @staticmethod
    def publisher(node: Any) -> Any:
        """The debug topic's publisher on `node` (std_msgs/String, reliable, volatile, depth 50)."""
        from vam_stack import ros

        return node.create_publisher(ros.ros_class("std_msgs/msg/String"), LATENCY_TOPIC, 50)

    def flush(self, pub: Any) -> None:
        """Publish the records noted since the last flush (timer callback; nothing when there are none
        or no one subscribes)."""
        records = self.take()
        if records and pub.get_subscription_count() > 0:
            from vam_stack import ros

            pub.publish(ros.ros_class("std_msgs/msg/String")(data=json.dumps({"source": self.source,
                                                                              "records": records})))


def parse(text: str) -> tuple[str, list[dict]]:
    d = json.loads(text)
    return d["source"], d["records"]
