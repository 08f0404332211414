"""The benchmarks' own ROS 2 node: an operator in another process (`vam-stack bench ros`).

It reads what the graph's nodes report (/diagnostics by status name, /vam/telemetry, /rosout
with stamps) and publishes the e-stop with the QoS of Jazzy's plain `ros2 topic pub` (reliable,
volatile, depth 1). Spun in its own thread; everything it collects is read under a lock.
"""
from __future__ import annotations

import json
import threading
import time

import rclpy
from rcl_interfaces.msg import Log
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import Bool

from vam_stack import msgs, ros


class ProbeNode(Node):
    def __init__(self, context=None):
        super().__init__("vam_bench_probe", context=context)
        self.lock = threading.Lock()
        self.status: dict[str, dict] = {}          # latest DiagnosticStatus by name
        self.telemetry: list[dict] = []
        self.logs: list[tuple[str, str, float]] = []   # (node, message, stamp [s])
        ros.subscription(self, "diagnostics", self._on_diagnostics)
        ros.subscription(self, "telemetry", self._on_telemetry)
        self.create_subscription(Log, "/rosout", self._on_log, QoSProfile(depth=1000))
        operator = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1, reliability=ReliabilityPolicy.RELIABLE,
                              durability=DurabilityPolicy.VOLATILE)
        self.estop_pub = self.create_publisher(Bool, "/vam/estop", operator)

    def _on_diagnostics(self, msg) -> None:
        parsed = msgs.diagnostics_to_dict(ros.from_ros(msg, "diagnostic_msgs/msg/DiagnosticArray"))
        with self.lock:
            self.status.update(parsed)

    def _on_telemetry(self, msg) -> None:
        with self.lock:
            self.telemetry.append(json.loads(msg.data))

    def _on_log(self, m) -> None:
        with self.lock:
            self.logs.append((m.name, m.msg, m.stamp.sec + 1e-9 * m.stamp.nanosec))

    def estop(self, on: bool) -> float:
        """Publish the e-stop; returns the wall time of the publish (the /rosout stamps' clock)."""
        t = time.time()
        self.estop_pub.publish(Bool(data=on))
        return t

    def values(self, status: str) -> dict[str, float]:
        """The numeric values of a diagnostics status (NaN for text)."""
        with self.lock:
            raw = dict(self.status.get(status, {}).get("values", {}))
        out = {}
        for k, v in raw.items():
            try:
                out[k] = float(v)
            except ValueError:
                out[k] = float("nan")
        return out

    def log_after(self, node: str, text: str, after_s: float) -> float | None:
        """Stamp of the first /rosout line of `node` containing `text` stamped after `after_s`."""
        with self.lock:
            hits = [t for n, m, t in self.logs if n.endswith(node) and text in m and t >= after_s]
        return min(hits) if hits else None


class Probe:
    """A ProbeNode spinning in a thread on its own context; a context manager."""

    def __enter__(self) -> ProbeNode:
        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = ProbeNode(context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._spin, name="bench-probe", daemon=True)
        self.thread.start()
        return self.node

    def _spin(self) -> None:
        while not self._stop.is_set():
            self.executor.spin_once(timeout_sec=0.05)

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self.thread.join(5)
        self.executor.shutdown()
        self.node.destroy_node()
        rclpy.try_shutdown(context=self.context)
