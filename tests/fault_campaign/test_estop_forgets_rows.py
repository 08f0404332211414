"""Fault campaign (issue 71 row 2): an e-stop that forgets. After a release nothing moves until an
instruction or a start arrives after the release. Each test fails on the behaviour before the fix: a
start queued while the control thread waited for an inference in flight at the e-stop, or an
instruction waiting in the node's mailbox, started the episode once the e-stop was released (2.0
rad at joint 1 in 213 targets). The graph version (the policy node process as launch runs it) is
tests/vam_policy_node/test_estop_release_graph.py."""
from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import numpy as np
import pytest

from vam_control.schedule import robot_config
from vam_control.runtime import PolicyRuntime, RuntimeConfig
from vam_control.safety import SafetyFilter, load_safety_config

pytestmark = pytest.mark.unit

NAMES = [f"j{i}" for i in range(14)]
LO, HI, _ = load_safety_config().bounds()
HOME = (LO + HI) / 2


class SlowPolicy:
    """Heads for the upper limits; each inference takes `infer_s` (a CPU replan of the real preset)."""

    spec = SimpleNamespace(chunk=10, execute=5, action_dim=14, proprio_dim=14, height=4, width=6, rate_hz=30.0,
                           action_type="absolute_joint")

    def __init__(self, infer_s: float):
        self.infer_s, self.inferring, self.resets = infer_s, threading.Event(), []

    def reset(self, instruction):
        self.resets.append(instruction)

    def infer(self, obs):
        self.inferring.set()
        time.sleep(self.infer_s)
        self.inferring.clear()
        return {"actions": np.tile(HI, (10, 1)), "tr": 1.0}


def _wait(cond, timeout=10.0, every=None) -> bool:
    end = time.monotonic() + timeout
    while not cond() and time.monotonic() < end:
        if every is not None:
            every()
        time.sleep(0.02)
    return bool(cond())


def test_a_start_queued_behind_the_estops_stop_does_not_begin_at_the_release():
    policy = SlowPolicy(infer_s=1.0)
    sent: list = []
    rt = PolicyRuntime(policy, robot_config(chunk=10, execute=5, rate_hz=30.0), RuntimeConfig(), NAMES,
                       sent.append, lambda tel: None, safety=SafetyFilter(load_safety_config()))

    def feed():
        rt.add_frame(np.zeros((4, 6, 3), np.uint8))
        rt.set_state(NAMES, HOME)
    try:
        feed()
        assert rt.request_start("wave", wait=True)[0]
        assert _wait(policy.inferring.is_set, every=feed), "no inference in flight"
        rt.estop(True)                            # the control thread now waits for the inference in flight
        answers: list = []
        rt.request_start("put the bowl on the plate", on_done=lambda ok, m: answers.append((ok, m)))
        time.sleep(0.1)
        rt.estop(False)                           # released before the control thread reached the start
        assert _wait(lambda: answers, timeout=5, every=feed)
        ok, message = answers[0]
        assert not ok and "before the e-stop was released" in message, answers
        n = len(sent)
        t_end = time.monotonic() + 2.0
        while time.monotonic() < t_end:
            feed()
            time.sleep(0.02)
        assert not rt.executor.running and len(sent) == n, f"{len(sent) - n} targets after the release"
        assert rt.request_start("put the bowl on the plate", wait=True)[0]   # asked after the release: starts
    finally:
        rt.close()


def test_an_instruction_waiting_in_the_mailbox_at_an_estop_never_starts(ros_harness):
    """Instructions start at most every 0.5 s; one that arrived within 0.5 s of the last start waits for
    its turn in the node's mailbox. An e-stop latched and released meanwhile must forget it."""
    from std_msgs.msg import Bool, String

    from vam_policy_node.node import VamPolicyNode

    class HoldPolicy(SlowPolicy):
        def infer(self, obs):
            return {"actions": np.tile(obs["proprio"].astype(np.float64), (10, 1)), "tr": 1.0, "tr0": 1.0,
                    "s": 0.0, "w_lang": 0.0, "w_plan": 0.0, "branches_computed": ["cond"], "latency_ms": 1.0}

    h = ros_harness
    node = h.add(VamPolicyNode(policy=HoldPolicy(0.0)))
    names = node.runtime.state_names
    feed = lambda: node.runtime.set_state(names, HOME) or node.runtime.add_frame(   # noqa: E731
        np.zeros((node.runtime.spec.height, node.runtime.spec.width, 3), np.uint8))
    instruction = h.node.create_publisher(String, "/vam/instruction", 10)
    estop = h.node.create_publisher(Bool, "/vam/estop", 10)
    assert h.spin_until(lambda: instruction.get_subscription_count() and estop.get_subscription_count(), timeout=5)
    feed()
    instruction.publish(String(data="wave"))
    assert h.spin_until(lambda: node.runtime.executor.running, every=feed)
    instruction.publish(String(data="put the bowl on the plate"))          # within 0.5 s: waits its turn
    assert h.spin_until(lambda: node.core.mailbox.waiting == "put the bowl on the plate", timeout=2)
    estop.publish(Bool(data=True))
    assert h.spin_until(lambda: node.runtime.estopped and not node.runtime.executor.running, every=feed)
    estop.publish(Bool(data=False))
    assert h.spin_until(lambda: not node.runtime.estopped, every=feed)
    h.spin_for(1.5, every=feed)                                            # past the mailbox's 0.5 s
    assert not node.runtime.executor.running, f"an episode started after the release: {node.runtime.instruction!r}"
    instruction.publish(String(data="put the bowl on the plate"))          # sent after the release: starts
    assert h.spin_until(lambda: node.runtime.executor.running, every=feed)
