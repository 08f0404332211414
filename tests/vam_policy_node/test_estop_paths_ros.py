"""The e-stop arrives from any publisher a person would use, without a QoS warning, and a waiting
service never delays it.

- `ros2 topic pub /vam/estop ...` on Jazzy publishes volatile; the topic table's row is latched
  (transient-local). Both nodes read it volatile (`ros.subscription`), which matches a volatile
  and a latched publisher alike; a transient-local reader would make a volatile publisher warn
  "requesting incompatible QoS" on every e-stop.
- The policy node's start/reset services wait for the control thread (up to 10 s): they are
  coroutines, so the single-threaded executor every node's `main()` spins keeps serving the e-stop.
"""
from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import numpy as np
import pytest
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import Bool
from std_srvs.srv import Trigger

from vam_policy_node.node import VamPolicyNode
from vam_control.safety import load_safety_config
from vam_stack import msgs
from yam_driver.config import load_config

pytestmark = pytest.mark.adapter

NAMES = load_config().joint_names
LO, HI, _ = load_safety_config().bounds()
HOME = (LO + HI) / 2


class SlowStartPolicy:
    """Holds its position; `reset` takes `reset_s` (an instruction embedding on a busy machine)."""

    def __init__(self, reset_s: float = 0.0):
        self.spec = SimpleNamespace(chunk=10, execute=5, action_dim=14, proprio_dim=14, height=8,
                                    width=16, rate_hz=30.0, action_type="absolute_joint")
        self.reset_s = reset_s

    def reset(self, instruction: str) -> None:
        time.sleep(self.reset_s)

    def infer(self, obs: dict) -> dict:
        return {"actions": np.tile(obs["proprio"].astype(np.float64), (10, 1)), "tr": 1.0, "tr0": 1.0, "s": 0.0,
                "w_lang": 0.0, "w_plan": 0.0, "branches_computed": ["cond"], "latency_ms": 1.0}


def volatile_estop_publisher(node, incompatible: list | None = None):
    """What Jazzy's plain `ros2 topic pub /vam/estop std_msgs/msg/Bool` creates (its default event
    handler logs the incompatible-QoS warning an operator would see; `incompatible` collects them)."""
    from rclpy.event_handler import PublisherEventCallbacks

    qos = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1, reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.VOLATILE)
    events = PublisherEventCallbacks(incompatible_qos=incompatible.append) if incompatible is not None else None
    return node.create_publisher(Bool, "/vam/estop", qos, event_callbacks=events)


def test_a_volatile_publishers_estop_reaches_the_policy_and_the_driver(ros_harness, tmp_path):
    import yaml

    from yam_driver.config import default_config_path
    from yam_driver.node import YamDriverNode

    h = ros_harness
    policy = h.add(VamPolicyNode(policy=SlowStartPolicy()))
    data = yaml.safe_load(default_config_path("damiao").read_text())
    data["yam_driver"].update(reply_timeout_ms=20.0)
    (tmp_path / "d.yaml").write_text(yaml.safe_dump(data))
    driver = h.add(YamDriverNode(parameter_overrides=[Parameter("config_file", value=str(tmp_path / "d.yaml")),
                                                      Parameter("use_emulator", value=True)]))
    incompatible: list = []
    pub = volatile_estop_publisher(h.node, incompatible)
    assert h.spin_until(lambda: pub.get_subscription_count() >= 2, timeout=5)   # one volatile sub per node
    pub.publish(Bool(data=True))
    assert h.spin_until(lambda: policy.runtime.estopped and driver.estopped, timeout=5)
    pub.publish(Bool(data=False))
    assert h.spin_until(lambda: not policy.runtime.estopped and not driver.estopped, timeout=5)
    h.publish("estop", msgs.bool_msg(True))               # the latched publisher reaches both subscriptions
    assert h.spin_until(lambda: policy.runtime.estopped and driver.estopped, timeout=5)
    h.spin_for(0.5)                                       # let /rosout deliver the log lines
    warnings = [m for lvl, n, m in h.logs if n.endswith("vam_policy_node") and "e-stop: holding" in m]
    assert len(warnings) == 2, warnings                   # once per latch
    assert incompatible == [], "a volatile e-stop publisher met a subscription it cannot serve"


def test_a_waiting_service_does_not_delay_the_estop(ros_harness):  # noqa: ARG001 (rclpy.init)
    import rclpy
    from rclpy.executors import SingleThreadedExecutor

    # the harness owns rclpy.init; this test spins the node on one thread, as its main() does
    node = VamPolicyNode(policy=SlowStartPolicy(reset_s=3.0))
    operator = rclpy.create_node("operator")
    ex = SingleThreadedExecutor()
    ex.add_node(node)
    ex.add_node(operator)
    spin = threading.Thread(target=ex.spin, daemon=True)
    spin.start()
    try:
        client = operator.create_client(Trigger, "/vam_policy_node/start_episode")
        assert client.wait_for_service(timeout_sec=5.0)
        node.runtime.instruction = "wave"                  # the service restarts the last instruction
        node.runtime.set_state(NAMES, HOME)                # primes the filter: reset() then runs 3 s
        future = client.call_async(Trigger.Request())
        time.sleep(0.3)                                    # the service callback is now waiting
        pub = volatile_estop_publisher(operator)
        t0 = time.monotonic()
        pub.publish(Bool(data=True))
        while not node.runtime.estopped and time.monotonic() - t0 < 2.0:
            time.sleep(0.01)
        latency = time.monotonic() - t0
        assert node.runtime.estopped and latency < 1.0, f"e-stop took {latency:.2f} s behind a waiting service"
        assert not future.done(), "the service should still be waiting (the test did not exercise the overlap)"
        end = time.monotonic() + 10
        while not future.done() and time.monotonic() < end:
            time.sleep(0.05)
        assert future.done() and future.result().success is False, future.result()   # the e-stop refused the start
        assert "e-stop" in future.result().message and not node.runtime.executor.running
    finally:
        ex.shutdown()
        spin.join(5)
        node.destroy_node()
        operator.destroy_node()
