"""vam_policy_node through real rclpy: frames and joint
states in, joint targets through the safety filter out, telemetry, e-stop, bad input, shutdown.

A scripted policy stands in for the networks (the node's wiring is what is tested); its
chunks aim at a far-away target so the safety filter's velocity limit is visible.
"""
from __future__ import annotations

import json
import threading
from types import SimpleNamespace

import numpy as np
import pytest
from rclpy.exceptions import InvalidParameterValueException
from rclpy.parameter import Parameter
from std_srvs.srv import Trigger

from vam_policy_node.node import VamPolicyNode
from vam_control.safety import load_safety_config
from vam_stack import image_msgs, msg_base, msgs, ros
from vam_stack.topics import LIBERO_ACTION_NAMES, LIBERO_PROPRIO_NAMES
from yam_driver.config import load_config

pytestmark = pytest.mark.adapter

H, W = 8, 16
NAMES = load_config().joint_names
LO, HI, STEP = load_safety_config().bounds()
HOME = (LO + HI) / 2


class ScriptedPolicy:
    """Chunks of constant targets `goal`; counts calls; telemetry like VamPolicy's."""

    def __init__(self, absolute: bool = True):
        dim = 14 if absolute else 7
        self.spec = SimpleNamespace(chunk=10, execute=5, action_dim=dim, proprio_dim=14 if absolute else 8,
                                    height=H, width=W, rate_hz=30.0 if absolute else 10.0,
                                    action_type="absolute_joint" if absolute else "eef_delta")
        self.goal = HI.copy() if absolute else np.full(7, 0.5)
        self.calls, self.instructions, self.obs = 0, [], []
        self.lock = threading.Lock()

    def reset(self, instruction: str) -> None:
        if not instruction.strip():
            raise ValueError("empty instruction")
        self.instructions.append(instruction)

    def infer(self, obs: dict) -> dict:
        with self.lock:
            self.calls += 1
            self.obs.append(obs)
        return {"actions": np.tile(self.goal, (self.spec.chunk, 1)), "replan": self.calls - 1, "tr": 1.2,
                "tr_steps": [1.2, 1.1], "tr0": float("nan"), "s": 0.0, "w_lang": 0.0, "w_plan": 0.0,
                "branches_computed": ["cond"], "latency_ms": 3.0, "attention": np.ones((10, 6), np.float32) / 6}


def feed(h, names=NAMES, position=HOME):
    def every():
        h.publish("stacked_image", image_msgs.image_msg(np.full((H, W, 3), 7, np.uint8), 0.0, "camera_stacked"))
        h.publish("joint_states", msgs.joint_state_msg(names, position))
    return every


def start(h, policy, **params):
    params.setdefault("warm_up", False)      # the scripted policy counts calls; warm-up has its own test
    overrides = [Parameter(k, value=v) for k, v in params.items()]
    node = h.add(VamPolicyNode(policy=policy, parameter_overrides=overrides))
    out = {k: h.capture(k) for k in ("joint_targets", "telemetry", "attention", "diagnostics")}
    return node, out


def test_targets_go_through_the_safety_filter_with_names(ros_harness):
    h, policy = ros_harness, ScriptedPolicy()
    node, out = start(h, policy)
    h.publish("instruction", msgs.string_msg("put the cube in the bowl"))
    assert h.spin_until(lambda: len(out["joint_targets"]) >= 20 and out["telemetry"], every=feed(h))
    assert policy.instructions == ["put the cube in the bowl"]
    obs = policy.obs[0]
    assert obs["frame"].shape == (H, W, 3) and obs["frame"].dtype == np.uint8 and "frames" not in obs
    np.testing.assert_allclose(obs["proprio"], HOME.astype(np.float32))
    pos = np.array([msgs.joint_state_to_numpy(m).position for m in out["joint_targets"]])
    assert all(list(m.name) == NAMES for m in out["joint_targets"])
    assert np.all(pos >= LO - 1e-9) and np.all(pos <= HI + 1e-9)
    steps = np.abs(np.diff(np.vstack([HOME, pos]), axis=0))
    assert np.all(steps <= STEP + 1e-9), "a target moved faster than the safety filter allows"
    assert np.any(pos[-1] != HOME), "the arm never moved toward the policy's goal"
    tel = json.loads(out["telemetry"][0].data)
    assert tel["tr"] == pytest.approx(1.2) and tel["tr0"] is None and isinstance(tel["step"], int)
    assert "attention" not in tel and msgs.float32_array_to_numpy(out["attention"][0]).shape == (10, 6)
    assert not h.errors("vam_policy_node")


def test_qos_and_types_come_from_the_topic_table(ros_harness):
    h = ros_harness
    start(h, ScriptedPolicy())
    info = h.node.get_publishers_info_by_topic("/vam/joint_targets")
    assert [i.topic_type for i in info] == ["sensor_msgs/msg/JointState"]
    assert info[0].qos_profile.reliability == ros.qos("joint_targets").reliability
    names = dict(h.node.get_topic_names_and_types())
    assert names["/vam/estop"] == ["std_msgs/msg/Bool"] and names["/vam/attention"] == ["std_msgs/msg/Float32MultiArray"]


def test_estop_holds_stops_the_policy_and_blocks_restart_until_released(ros_harness):
    h, policy = ros_harness, ScriptedPolicy()
    node, out = start(h, policy)
    h.publish("instruction", msgs.string_msg("stack the blocks"))
    assert h.spin_until(lambda: len(out["joint_targets"]) >= 10, every=feed(h))
    h.publish("estop", msgs.bool_msg(True))
    assert h.spin_until(lambda: not node.runtime.executor.running, every=feed(h))
    n_targets, calls = len(out["joint_targets"]), policy.calls
    h.spin_for(0.5, every=feed(h))
    assert len(out["joint_targets"]) == n_targets and policy.calls == calls, "policy kept running under e-stop"
    assert node.runtime.safety.estopped
    np.testing.assert_array_equal(msgs.joint_state_to_numpy(out["joint_targets"][-1]).position, node.runtime.safety.last_sent)
    refused = h.call(Trigger, "/vam_policy_node/start_episode")
    assert not refused.success and "e-stop" in refused.message
    h.publish("estop", msgs.bool_msg(False))
    h.spin_for(0.2, every=feed(h))
    assert not node.runtime.executor.running, "releasing the e-stop must not restart motion by itself"
    ok = h.call(Trigger, "/vam_policy_node/start_episode")
    assert ok.success, ok.message
    assert h.spin_until(lambda: len(out["joint_targets"]) > n_targets + 5, every=feed(h))
    assert h.call(Trigger, "/vam_policy_node/reset").success and not node.runtime.executor.running


def test_bad_messages_are_rejected_logged_and_the_arm_held(ros_harness):
    h, policy = ros_harness, ScriptedPolicy()
    node, out = start(h, policy, max_state_age_s=0.2)
    h.publish("instruction", msgs.string_msg("open the drawer"))
    assert h.spin_until(lambda: len(out["joint_targets"]) >= 5, every=feed(h))
    bad_state = msgs.joint_state_msg(NAMES[:-1], HOME[:-1])  # a joint missing

    def bad():
        h.publish("joint_states", bad_state)
        h.publish("stacked_image", image_msgs.image_msg(np.zeros((H + 1, W, 3), np.uint8), 0.0))
    assert h.spin_until(lambda: node.runtime.executor.last_info.reason == "error", every=bad)
    n = len(out["joint_targets"])
    h.spin_for(1.0, every=bad)
    errors = " ".join(h.errors("vam_policy_node"))
    assert "joint state refused" in errors and "lacks joints" in errors and "camera frame refused" in errors
    held = np.array([msgs.joint_state_to_numpy(m).position for m in out["joint_targets"][n:]])
    assert len(held) > 0 and np.all(held == held[0]), "stale inputs must hold the last target"


def test_compressed_transport_takes_jpeg_frames_and_counts_their_arrival(ros_harness):
    h, policy = ros_harness, ScriptedPolicy()
    node, out = start(h, policy, image_transport="compressed", instruction="put the cube in the bowl")
    colour = np.full((H, W, 3), (10, 120, 240), np.uint8)
    stamp = msgs.time_from_ns(1_234_567_890)

    def every():
        h.publish("stacked_image_compressed", image_msgs.compressed_image_msg(colour, stamp, "camera_stacked", quality=90))
        h.publish("joint_states", msgs.joint_state_msg(NAMES, HOME))
    assert h.spin_until(lambda: len(out["joint_targets"]) >= 5 and policy.obs, every=every)
    frame = policy.obs[0]["frame"]
    assert frame.shape == (H, W, 3) and frame.dtype == np.uint8
    assert np.abs(frame.astype(int) - colour).max() <= 3, "decoded frame is not the published one (RGB order?)"
    assert node.frames_in.count > 0                       # arrivals recorded with the header stamp, as for raw
    assert h.node.get_subscriptions_info_by_topic("/camera/stacked/image_raw") == []
    subs = h.node.get_subscriptions_info_by_topic("/camera/stacked/image_raw/compressed")
    assert [i.topic_type for i in subs] == ["sensor_msgs/msg/CompressedImage"]
    assert not h.errors("vam_policy_node")

    garbage = image_msgs.compressed_image_msg(colour, 0.0)
    garbage.data = garbage.data[:20]

    def bad():
        h.publish("stacked_image_compressed", garbage)
        h.publish("joint_states", msgs.joint_state_msg(NAMES, HOME))
    assert h.spin_until(lambda: any("cannot decode 20 bytes of jpeg" in e for e in h.errors("vam_policy_node")), every=bad)
    assert "camera frame refused" in " ".join(h.errors("vam_policy_node"))
    calls = policy.calls
    assert h.spin_until(lambda: policy.calls > calls, every=every), "the node stopped after a bad frame"
    with pytest.raises(ros.ParameterError, match="image_transport.*'theora'"):
        VamPolicyNode(policy=ScriptedPolicy(), parameter_overrides=[Parameter("image_transport", value="theora")])


def test_delta_policy_uses_libero_names_and_estop_sends_zero_motion(ros_harness):
    h, policy = ros_harness, ScriptedPolicy(absolute=False)
    node, out = start(h, policy, instruction="pick up the bowl")
    every = feed(h, list(LIBERO_PROPRIO_NAMES), np.zeros(8))
    assert h.spin_until(lambda: len(out["joint_targets"]) >= 3, every=every)
    first = out["joint_targets"][0]
    assert list(first.name) == list(LIBERO_ACTION_NAMES)
    pos = msgs.joint_state_to_numpy(first).position              # the chunk's 0.5 displacements, gripper 0.5
    assert node.runtime.executor.cfg.reanchor and pos[6] == 0.5   # displacements installed d ticks late get back
    assert np.allclose(pos[:6], 0.5) or np.allclose(pos[:6], 1.0)  # the d x 0.5 the arm held for, over d actions
    h.publish("estop", msgs.bool_msg(True))
    n = len(out["joint_targets"])
    assert h.spin_until(lambda: not node.runtime.executor.running, every=every)
    for m in out["joint_targets"][n:]:
        np.testing.assert_allclose(msgs.joint_state_to_numpy(m).position, [0, 0, 0, 0, 0, 0, 0.5])


def test_parameters_are_declared_with_descriptors_and_validated(ros_harness):
    h = ros_harness
    node, _ = start(h, ScriptedPolicy())
    d = node.describe_parameter("max_frame_age_s")
    assert d.read_only and d.floating_point_range[0].to_value == 10.0 and "[s]" in d.description
    assert not node.set_parameters([Parameter("seed", value=3)])[0].successful  # read-only
    with pytest.raises(InvalidParameterValueException):
        VamPolicyNode(policy=ScriptedPolicy(), parameter_overrides=[Parameter("max_state_age_s", value=-1.0)])
    with pytest.raises(ros.ParameterError, match="guidance"):
        VamPolicyNode(policy=ScriptedPolicy(), parameter_overrides=[Parameter("guidance", value="sometimes")])


def test_guidance_parameters_reach_the_policy_config(monkeypatch):
    import vam_model.policy
    from vam_policy_node import params

    built = []
    monkeypatch.setattr(vam_model.policy, "build_policy", lambda *a, **kw: built.append(kw) or ScriptedPolicy())
    p = {q.name: q.default for q in params.PARAMS} | {"tr_baseline": "running_min", "tr_every_step": True,
                                                       "w_lang_base": 0.2, "w_plan_base": 0.5, "s_max": 3.0}
    params.policy_from_params(p)
    g = built[-1]["config"].guidance
    assert built[-1]["guidance"] == "tr_adaptive+running_min"
    assert (g.schedule, g.tr_baseline, g.tr_every_step, g.w_lang_base, g.w_plan_base, g.s_max) == \
        ("tr_adaptive", "running_min", True, 0.2, 0.5, 3.0)
    with pytest.raises(ros.ParameterError, match="tr_baseline 'running_min'.*'flat' never reads it"):
        params.policy_from_params(p | {"guidance": "flat"})
    params.policy_from_params(p | {"guidance": "none", "tr_baseline": "first"})
    assert built[-1]["guidance"] == "none" and built[-1]["config"].guidance.tr_every_step
    # a real-time process must keep the inference in its child (its threads would inherit SCHED_FIFO)
    with pytest.raises(ros.ParameterError, match="process_rt_priority 40 needs policy_process: true"):
        params.policy_from_params(p | {"process_rt_priority": 40, "policy_process": False})


def test_destroy_node_stops_sending_targets(ros_harness):
    h, policy = ros_harness, ScriptedPolicy()
    node, out = start(h, policy, instruction="close the microwave")
    assert h.spin_until(lambda: len(out["joint_targets"]) >= 5, every=feed(h))
    runtime = node.runtime
    h.remove(node)
    node.destroy_node()
    assert not runtime.executor.running and node.runtime is None
    n = len(out["joint_targets"])
    h.spin_for(0.3)
    assert len(out["joint_targets"]) == n


def test_an_inference_finishing_after_destroy_node_publishes_nothing(ros_harness, caplog):
    """The worker thread can still be inside `infer` when the node is destroyed (the executor's stop
    waits a bounded time, 5 s): its telemetry must not reach a destroyed publisher."""
    h, policy = ros_harness, ScriptedPolicy()
    entered, release = threading.Event(), threading.Event()
    infer = policy.infer

    def slow_infer(obs):
        if policy.calls >= 1:
            entered.set()
            release.wait(20)
        return infer(obs)

    policy.infer = slow_infer
    node, out = start(h, policy, instruction="close the microwave")
    stop = node.runtime.executor.stop
    node.runtime.executor.stop = lambda timeout=5.0, abandon=False: stop(timeout=0.2, abandon=abandon)   # gives up sooner
    assert h.spin_until(lambda: entered.is_set(), every=feed(h), timeout=30)
    h.remove(node)
    stopper = threading.Thread(target=node.destroy_node)
    with caplog.at_level("ERROR"):
        stopper.start()
        stopper.join(5)                                   # destroy_node gave up waiting for the worker
        release.set()                                     # the inference ends; its result comes back
        stopper.join(30)
        h.spin_for(0.3)
    assert not stopper.is_alive()
    failed = [r.getMessage() for r in caplog.records if "callback failed" in r.getMessage() or r.exc_info]
    assert not failed, failed


def test_ros2_control_outputs_carry_the_same_filtered_targets(ros_harness):
    """command_outputs:=both: each tick's safety-filtered target also as a one-point JointTrajectory
    (reached one period later, joint names, the filter's frame id) and a Float64MultiArray."""
    h, policy = ros_harness, ScriptedPolicy()
    node, out = start(h, policy, command_outputs="both")
    out.update({k: h.capture(k) for k in ("joint_trajectory", "forward_commands")})
    h.publish("instruction", msgs.string_msg("put the cube in the bowl"))
    assert h.spin_until(lambda: len(out["joint_trajectory"]) >= 10 and len(out["forward_commands"]) >= 10,
                        every=feed(h))
    targets = {msg_base.time_to_ns(m.header.stamp): msgs.joint_state_to_numpy(m).position for m in out["joint_targets"]}
    traj = out["joint_trajectory"][-1]
    assert list(traj.joint_names) == NAMES and traj.header.frame_id == "vam_safety_filter" and len(traj.points) == 1
    point = traj.points[0]
    assert point.time_from_start.sec == 0 and point.time_from_start.nanosec == pytest.approx(1e9 / 30, abs=1)
    np.testing.assert_allclose(point.positions, targets[msg_base.time_to_ns(traj.header.stamp)])
    cmds = np.array([m.data for m in out["forward_commands"]])
    assert cmds.shape[1] == 14 and np.all(cmds >= LO - 1e-9) and np.all(cmds <= HI + 1e-9)
    assert any(np.allclose(cmds[-1], p) for p in targets.values())


def test_ros2_control_outputs_need_absolute_joint_targets(ros_harness):
    from vam_stack.ros import ParameterError

    with pytest.raises(ParameterError, match="command_outputs 'joint_trajectory' needs absolute joint targets"):
        VamPolicyNode(policy=ScriptedPolicy(absolute=False),
                      parameter_overrides=[Parameter("command_outputs", value="joint_trajectory")])


def test_configure_warms_the_policy_up_with_every_branch_and_restarts_its_noise(ros_harness):
    h = ros_harness

    class Tunable(ScriptedPolicy):
        def __init__(self):
            super().__init__()
            self.configured, self.seeds = [], []

        def configure(self, guidance=None, action_temperature=None):
            self.configured.append(None if guidance is None else guidance.schedule)

        def reseed(self, seed):
            self.seeds.append(seed)

    policy = Tunable()
    node, _ = start(h, policy, warm_up=True, guidance="tr_adaptive", seed=7)
    assert policy.instructions == ["warm up"] and policy.calls == 3
    assert policy.configured == ["flat", "tr_adaptive"] and policy.seeds == [7]
    assert set(node.core.warm_up_times) == {"reset", "first_replan", "all_branches_replan", "steady_replan"}
