"""Policy node -> yam_driver node over ROS topics (real rclpy), emulated motors:
the driver's /joint_states prime the policy's safety filter, the policy's named 30 Hz
targets move the emulated arm, and the e-stop stops both. A scripted policy stands in for
the networks (it asks for joint 1 of the left arm to move by 0.1 rad)."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import yaml
from rclpy.parameter import Parameter

from vam_policy_node.node import VamPolicyNode
from vam_stack import image_msgs, msgs
from yam_driver.config import default_config_path
from yam_driver.node import YamDriverNode

pytestmark = pytest.mark.adapter


class ReachPolicy:
    def __init__(self):
        self.spec = SimpleNamespace(chunk=10, execute=5, action_dim=14, proprio_dim=14, height=8, width=16,
                                    rate_hz=30.0, action_type="absolute_joint")
        self.goal = None

    def reset(self, instruction):
        self.goal = None

    def infer(self, obs):
        if self.goal is None:
            self.goal = obs["proprio"].astype(np.float64) + np.eye(14)[0] * 0.1
        return {"actions": np.tile(self.goal, (10, 1)), "tr": 1.0, "tr_steps": [1.0], "tr0": 1.0, "s": 0.0,
                "w_lang": 0.0, "w_plan": 0.0, "branches_computed": ["cond"], "latency_ms": 1.0}


def test_policy_targets_move_the_emulated_arm_and_estop_stops_both(ros_harness, tmp_path):
    h = ros_harness
    data = yaml.safe_load(default_config_path("damiao").read_text())
    data["yam_driver"].update(reply_timeout_ms=20.0)
    (tmp_path / "driver.yaml").write_text(yaml.safe_dump(data))
    states = h.capture("joint_states")
    driver = h.add(YamDriverNode(parameter_overrides=[Parameter("config_file", value=str(tmp_path / "driver.yaml")),
                                                      Parameter("use_emulator", value=True)]))
    policy = ReachPolicy()
    node = h.add(VamPolicyNode(policy=policy, parameter_overrides=[Parameter("instruction", value="reach")]))
    frames = lambda: h.publish("stacked_image", image_msgs.image_msg(np.zeros((8, 16, 3), np.uint8), 0.0))  # noqa: E731
    assert h.spin_until(lambda: len(states) > 3, every=frames)
    start = msgs.joint_state_to_numpy(states[-1]).position.copy()
    assert h.spin_until(lambda: abs(driver.rig.positions()[0] - start[0] - 0.1) < 0.01, every=frames, timeout=30)
    np.testing.assert_allclose(driver.rig.positions()[1:], start[1:], atol=0.01)
    h.publish("estop", msgs.bool_msg(True))
    assert h.spin_until(lambda: driver.estopped and not node.runtime.executor.running, every=frames)
    assert not h.errors("vam_policy_node") and not h.errors("yam_driver")
