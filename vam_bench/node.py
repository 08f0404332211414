"""The bare rclpy transfer's publisher of `vam-stack bench ros` (`python -m vam_bench.node <kind>`,
its own process); the probe that reads the graph (and this publisher) is vam_stack/probe.py.
"""
from __future__ import annotations

import signal
import sys
import threading
import time

import numpy as np
import rclpy
from rclpy.node import Node

from vam_stack import image_msgs, msgs, ros
from vam_stack.probe import BARE_TOPIC, BARE_TYPES

from camera_bridge.sources.synthetic import PatternRenderer


def bare_publisher(kind: str, rate_hz: float = 30.0) -> None:
    """The bare rclpy transfer's publisher (its own process): the stacked frame's image (672x168 rgb8
    of the synthetic cameras, raw or as its JPEG) at `rate_hz` on BARE_TOPIC/<kind>, sensor-data QoS,
    the header stamped with the wall clock just before each publish call; nothing else. The probe's
    subscription measures publish call -> callback. Runs until SIGINT/SIGTERM."""
    rclpy.init()
    node = Node("vam_bench_bare_publisher")
    pub = node.create_publisher(ros.ros_class(BARE_TYPES[kind]), BARE_TOPIC + "/" + kind, ros.qos("stacked_image"))
    frame = np.ascontiguousarray(np.concatenate([PatternRenderer(224, 168, seed=i).render(i) for i in range(3)], axis=1))
    build = image_msgs.image_msg if kind == "raw" else image_msgs.compressed_image_msg
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *a: stop.set())
    signal.signal(signal.SIGINT, lambda *a: stop.set())
    period, t_next = 1.0 / rate_hz, time.monotonic()
    try:
        while not stop.is_set():
            t_next += period
            stop.wait(max(0.0, t_next - time.monotonic()))
            m = ros.to_ros_bytes(build(frame, msgs.time_from_ns(0), "camera_stacked"))
            m.header.stamp = ros.to_ros(msgs.time_from_ns(time.time_ns()))
            pub.publish(m)
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == "__main__":
    bare_publisher(sys.argv[1] if len(sys.argv) > 1 else "raw")
