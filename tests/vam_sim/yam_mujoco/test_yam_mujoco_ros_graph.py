"""The robot graph of `robot.launch.py sim:=mujoco` in one process over rclpy:
yam_mujoco_sim (the MuJoCo world on the host clock, with the unchanged camera_bridge and
yam_driver nodes on it) -> vam_policy_node (yam64: the robot-path policy, its safety filter) ->
yam_driver -> MuJoCo, tr_monitor_node watching. The policy acts on the simulated arm: the driver
follows the filtered targets, the arm moves, telemetry and TR flow, the world runs near real time."""
from __future__ import annotations

import json

import numpy as np
import pytest
import yaml
from rclpy.parameter import Parameter

from tr_monitor_node.node import TRMonitorNode
from vam_policy_node.node import VamPolicyNode
from vam_sim.yam_mujoco.tasks import TASKS
from vam_stack import image_msgs, msgs
from vam_stack.paths import config_dir

pytestmark = [pytest.mark.sim, pytest.mark.slow]


def _loose_sim_config(tmp_path):
    """config/yam_mujoco.yaml with a driver file whose watchdog leaves room for a loaded 2-core box."""
    driver = yaml.safe_load((config_dir() / "yam_driver_damiao.yaml").read_text())
    driver["yam_driver"]["watchdog_s"] = 1.0
    (tmp_path / "driver.yaml").write_text(yaml.safe_dump(driver))
    sim = yaml.safe_load((config_dir() / "yam_mujoco.yaml").read_text())
    sim["yam_mujoco"]["driver_config"] = str(tmp_path / "driver.yaml")
    (tmp_path / "sim.yaml").write_text(yaml.safe_dump(sim))
    return tmp_path / "sim.yaml"


def test_the_policy_drives_the_simulated_arm_over_ros(ros_harness, tmp_path, render_ok):
    from vam_sim.yam_mujoco.node import build_nodes

    h = ros_harness
    p = lambda **kw: [Parameter(k, value=v) for k, v in kw.items()]  # noqa: E731
    out = {k: h.capture(k) for k in ("joint_targets", "joint_states", "telemetry", "tr", "attention_overlay",
                                     "stacked_image", "diagnostics")}
    nodes = build_nodes([], parameter_overrides=p(sim_config=str(_loose_sim_config(tmp_path)), task="handover"))
    for n in nodes:
        h.add(n)
    world, camera, driver = nodes
    h.add(TRMonitorNode())
    policy = h.add(VamPolicyNode(parameter_overrides=p(preset="yam64", instruction=TASKS["handover"].instruction,
                                                       max_frame_age_s=0.5, max_state_age_s=0.5)))
    start = None

    def moving() -> bool:
        nonlocal start
        if out["joint_states"] and start is None:
            start = msgs.joint_state_to_numpy(out["joint_states"][0]).position
        return (start is not None and len(out["telemetry"]) >= 2 and out["attention_overlay"]
                and len(out["joint_targets"]) > 30 and driver.gate.last_stamp is not None)

    assert h.spin_until(moving, timeout=300)
    tel = json.loads(out["telemetry"][-1].data)
    assert tel["tr"] > 0 and policy.runtime.instruction == TASKS["handover"].instruction
    frame = image_msgs.image_to_numpy(out["stacked_image"][-1])
    assert frame.shape == (168, 672, 3) and frame.std() > 5             # three rendered views, not a blank
    target = msgs.joint_state_to_numpy(out["joint_targets"][-1])
    assert target.names == driver.names and np.isfinite(target.position).all()
    now = msgs.joint_state_to_numpy(out["joint_states"][-1])
    assert now.names == driver.names and np.abs(now.position - start).max() > 1e-3   # the arm moved
    rtf = world.monitor.real_time_factor
    assert world.sim.time > 1.0 and np.isfinite(rtf) and rtf > 0.05
    diag = [s for m in out["diagnostics"] for s in m.status if s.name == "yam_mujoco_sim: world"]
    assert diag, "the world publishes its real-time factor on /diagnostics"
    driver_errors = [e for e in h.errors("yam_driver") if "s old (>" not in e]
    assert not h.errors("vam_policy_node") and not driver_errors and not h.errors("camera_bridge")
    assert not h.errors("yam_mujoco_sim")
