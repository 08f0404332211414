"""The policy node's plain-Python side (`vam_policy_node.core`) without ROS: the e-stop latch kept
across configure, instructions offered through the mailbox, release idempotent, the telemetry and
diagnostics the node publishes."""
from __future__ import annotations

import logging
from types import SimpleNamespace

import numpy as np
import pytest

from vam_control.safety import load_safety_config
from vam_policy_node.core import PolicyCore, telemetry_messages
from vam_policy_node.params import PARAMS
from vam_stack import msgs
from vam_stack.arrivals import ArrivalStats
from vam_stack.topics import JOINT_TARGETS_SOURCE

pytestmark = pytest.mark.unit

LO, HI, _ = load_safety_config().bounds()


class Policy:
    spec = SimpleNamespace(chunk=10, execute=5, action_dim=14, proprio_dim=14, height=4, width=6, rate_hz=30.0,
                           action_type="absolute_joint")

    def __init__(self):
        self.instructions, self.closed = [], 0

    def reset(self, instruction):
        self.instructions.append(instruction)

    def infer(self, obs):
        return {"actions": np.tile(HI, (10, 1))}

    def close(self):
        self.closed += 1


def configured(estop_first: bool = False) -> tuple[PolicyCore, Policy]:
    core, policy = PolicyCore(), Policy()
    if estop_first:
        core.estop(True)                         # before the runtime exists: latched, applied at configure
    params = {**{q.name: q.default for q in PARAMS}, "warm_up": False}
    core.configure(policy, params, lambda sent: None, lambda tel: None, logging.getLogger("test"))
    return core, policy


def test_an_estop_before_configure_latches_the_runtime_it_builds():
    core, _ = configured(estop_first=True)
    try:
        assert core.estop_latched and core.runtime.estopped
        core.estop(False)
        assert not core.estop_latched and not core.runtime.estopped
    finally:
        core.release(1.0)


def test_instructions_reach_the_runtime_only_while_active_and_release_is_idempotent():
    core, policy = configured()
    assert core.active_runtime() is None                          # configured, not active: services refuse
    core.activate("")
    assert core.active_runtime() is core.runtime
    assert core.takes_instructions()
    with pytest.raises(ValueError):
        core.instruct("   ")                                      # refused before the mailbox sees it
    assert core.instruct("stack the cups") is None                # nothing ran before it: nothing to say
    assert core.mailbox.offered == core.mailbox.started == 1      # handed to the runtime (it starts on inputs)
    assert core.release(1.0) and policy.closed == 1
    assert core.runtime is None and core.mailbox is None and core.policy is None and not core.active
    assert core.release(1.0) and policy.closed == 1               # again: nothing left to release
    assert core.control is not None                               # its names outlive the runtime


def test_diagnostics_count_refusals_by_kind_and_say_unconfigured():
    core = PolicyCore()
    frames = ArrivalStats(30.0)
    (status,) = core.diagnostics({"camera frame": 2}, "cpu", frames)
    assert status["level"] == "stale" and status["values"] == {"estop": False}
    core, _ = configured()
    try:
        executor, camera = core.diagnostics({"camera frame": 2, "joint state": 0}, "cpu", frames)
        assert executor["values"]["refused_camera_frames"] == 2 and executor["values"]["refused_joint_states"] == 0
        assert executor["values"]["instructions_coalesced"] == 0 and executor["hardware_id"] == "cpu"
        assert camera["task"] == "camera input" and camera["level"] == "stale"
    finally:
        core.release(1.0)


def test_telemetry_goes_out_as_json_without_the_private_keys_and_attention_on_its_own_topic():
    att = np.ones((3, 4), np.float32)
    out = telemetry_messages({"tr": 1.5, "actions": np.zeros((2, 14)), "origin_tick": 3, "latency_s": 0.1,
                              "attention": att})
    assert [key for key, _ in out] == ["telemetry", "attention"]
    assert msgs.json_from_msg(out[0][1]) == {"tr": 1.5}
    assert list(out[1][1].layout.dim[i].label for i in range(2)) == ["action", "video_token"]
    assert [key for key, _ in telemetry_messages({"tr": 1.0, "attention": None})] == ["telemetry"]


def test_targets_become_rclpy_messages_named_tagged_and_stamped_strictly_increasing():
    # issue 69 row 2: built once, as rclpy messages, in the node's core (not in vam_control)
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray
    from trajectory_msgs.msg import JointTrajectory
    core, _ = configured()
    try:
        sent = (LO + HI) / 2
        first = dict(core.target_messages(sent, 5_000_000_000, ("joint_trajectory", "forward_commands")))
        again = dict(core.target_messages(sent, 5_000_000_000, ()))      # one clock reading, two ticks
        js = first["joint_targets"]
        assert isinstance(js, JointState) and list(js.name) == list(core.control.action_names)
        np.testing.assert_array_equal(np.asarray(js.position), sent)
        assert js.header.frame_id == core.control.target_source == JOINT_TARGETS_SOURCE
        assert (js.header.stamp.sec, js.header.stamp.nanosec) == (5, 0)
        assert set(again) == {"joint_targets"}
        assert again["joint_targets"].header.stamp.nanosec > js.header.stamp.nanosec
        traj = first["joint_trajectory"]
        assert isinstance(traj, JointTrajectory) and len(traj.points) == 1
        assert traj.points[0].time_from_start.nanosec == round(1e9 / 30)
        assert isinstance(first["forward_commands"], Float64MultiArray)
        np.testing.assert_array_equal(np.asarray(first["forward_commands"].data), sent)
    finally:
        core.release(1.0)
