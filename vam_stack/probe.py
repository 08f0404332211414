"""The operator's probe: a ROS 2 node in the caller's process that reads what the graph's nodes
report (/diagnostics by status name, /vam/telemetry, /rosout with stamps, the latency records,
the bare transfer's images) and publishes the e-stop with the QoS of Jazzy's plain
`ros2 topic pub` (reliable, volatile, depth 1). `Probe` spins it in its own thread on its own
context; everything it collects is read under a lock. Used by `vam-stack bench ros`,
`vam-stack record` and `vam-stack ros-eval`; it lives in the shared base (it imports only
vam_stack) and is, with ros.py, one of the base's two rclpy modules (tests/test_layout.py).
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
from std_msgs.msg import Bool, String

from vam_stack import msgs, ros
from vam_stack.latency import LATENCY_TOPIC, parse, stamp_key

BARE_TOPIC = "/vam/debug/bare_image"          # + /raw or /compressed: the bare rclpy transfer's image
BARE_TYPES = {"raw": "sensor_msgs/msg/Image", "compressed": "sensor_msgs/msg/CompressedImage"}


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
        self.latency: dict[str, list[dict]] = {}     # source node -> its per-frame stage records
        self.create_subscription(String, LATENCY_TOPIC, self._on_latency, QoSProfile(depth=50))
        self.bare_ms: list[float] = []               # bare transfer: publish call -> this callback [ms]
        self.bare_received = 0
        for kind in ("raw", "compressed"):
            self.create_subscription(ros.ros_class(BARE_TYPES[kind]), BARE_TOPIC + "/" + kind, self._on_bare,
                                     ros.qos("stacked_image", reader=True))

    def _on_diagnostics(self, msg) -> None:
        parsed = msgs.diagnostics_to_dict(ros.from_ros(msg, "diagnostic_msgs/msg/DiagnosticArray"))
        with self.lock:
            self.status.update(parsed)

    def _on_telemetry(self, msg) -> None:
        with self.lock:
            self.telemetry.append(json.loads(msg.data))

    def _on_latency(self, msg) -> None:
        source, records = parse(msg.data)
        with self.lock:
            self.latency.setdefault(source, []).extend(records)

    def _on_bare(self, msg) -> None:
        received = time.time_ns()
        with self.lock:
            self.bare_ms.append((received - stamp_key(msg.header.stamp)) / 1e6)
            self.bare_received += 1

    def take_latency(self) -> tuple[dict[str, list[dict]], list[float]]:
        """The stage records and bare-transfer latencies collected since the last call."""
        with self.lock:
            out, bare = self.latency, self.bare_ms
            self.latency, self.bare_ms = {}, []
        return out, bare

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
