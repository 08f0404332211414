"""The simulated stack of launch/sim.launch.py in one process over rclpy:
libero_bridge -> vam_policy_node (tiny preset, realtime executor) -> libero_bridge, with
tr_monitor_node watching. Checks that the loop closes: the bridge's instruction starts the
episode, the policy's actions step the environment, TR telemetry reaches the monitor."""
from __future__ import annotations

import json

import numpy as np
import pytest
from rclpy.parameter import Parameter

from vam_sim.libero_mock.node import LiberoBridgeNode
from tr_monitor_node.node import TRMonitorNode
from vam_policy_node.node import VamPolicyNode
from vam_stack import msgs

pytestmark = [pytest.mark.sim, pytest.mark.slow]  # ~25 s on 2 cores: builds the tiny policy, 2 replans


def test_policy_drives_the_mocked_libero_over_ros_topics(ros_harness):
    h = ros_harness
    out = {k: h.capture(k) for k in ("joint_targets", "telemetry", "tr", "phase", "attention_overlay", "episode_status")}
    policy = h.add(VamPolicyNode(parameter_overrides=[Parameter("preset", value="tiny"), Parameter("seed", value=0)]))
    monitor = h.add(TRMonitorNode())
    bridge = h.add(LiberoBridgeNode(parameter_overrides=[Parameter("suite", value="goal"), Parameter("max_steps", value=400)]))
    def status_step() -> int:                # the env steps before its status message is delivered: wait for both
        return json.loads(out["episode_status"][-1].data)["step"] if out["episode_status"] else -1

    assert h.spin_until(lambda: len(out["tr"]) >= 2 and out["attention_overlay"] and bridge.env.steps >= 12
                        and status_step() >= 12, timeout=120)
    assert policy.core.policy.instruction == bridge.env.instruction
    tel = json.loads(out["telemetry"][-1].data)
    assert tel["tr"] > 0 and tel["tr0"] > 0 and tel["branches_computed"][0] == "cond"
    assert out["phase"] and len(out["telemetry"]) >= len(out["tr"])
    assert monitor.monitor.trace.replans[-1].tr == pytest.approx(out["tr"][-1].data, rel=1e-6)
    actions = np.array([msgs.joint_state_to_numpy(m).position for m in out["joint_targets"]])
    assert actions.shape[1] == 7 and np.isfinite(actions).all() and np.abs(actions).max() > 0
    assert status_step() >= 12
    assert not h.errors("vam_policy_node") and not h.errors("libero_bridge")
