"""The launch files' node graphs as OS processes over Fast DDS, on real rclpy.

Each node starts from its installed console script with exactly the ROS arguments the launch
file gives it (`vam_stack.process_graph.ProcessGraph` over the table of vam_stack/launch_args.py:
the params file, the argument-typed overrides written as launch_ros writes them), on this test
run's own ROS_DOMAIN_ID with discovery limited to this machine (tests/conftest.py). The test
process is the operator: it publishes with default QoS, as `ros2 topic pub` does, and reads the
graph's topics and /rosout. Every graph is stopped as launch stops it (SIGINT) and every process
must exit 0 with nothing left over in its log that a user should not see.
"""
from __future__ import annotations

import json
import time

import numpy as np
import pytest
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import Bool, String

from vam_stack import image_msgs, msgs
from vam_stack.process_graph import ProcessGraph, driver_refusals, wait_until_busy

pytestmark = [pytest.mark.adapter, pytest.mark.slow]

HANDOVER = "pick up the blue block with the left arm and hand it to the right arm"
# what a user must never see in a node's output on a normal run and a clean Ctrl-C
BAD_OUTPUT = ("Traceback", "Failed to publish", "context is invalid", "telemetry refused", "attention refused",
              "never retrieved", "incompatible QoS")


def operator_publisher(node, msg_type, topic):
    """Jazzy's `ros2 topic pub` QoS: reliable, volatile, depth 1."""
    qos = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1, reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.VOLATILE)
    return node.create_publisher(msg_type, topic, qos)


def set_parameters(h, node: str, **values) -> list:
    """Call `<node>/set_parameters` (rcl_interfaces/SetParameters) from the test process."""
    from rclpy.parameter import Parameter
    from rcl_interfaces.srv import SetParameters

    client = h.node.create_client(SetParameters, f"{node}/set_parameters")
    assert client.wait_for_service(timeout_sec=10.0)
    request = SetParameters.Request(parameters=[Parameter(k, value=v).to_parameter_msg() for k, v in values.items()])
    future = client.call_async(request)
    h.executor.spin_until_future_complete(future, timeout_sec=10.0)
    assert future.done(), f"{node}/set_parameters did not answer"
    return list(future.result().results)


STOP_WITHIN_S = 2.0     # every process exits this soon after SIGINT (launch: SIGTERM at 5 s)


def stop_cleanly(graph: ProcessGraph, mid_inference: bool = False, diagnostics: list | None = None) -> None:
    """Stop the graph as a terminal's Ctrl-C under launch does (SIGINT to the process group), with
    `mid_inference` while the policy's worker is inferring: every process exits 0 within
    STOP_WITHIN_S, prints nothing a user should not see; with the graph's `diagnostics`, the
    driver refused no target (a healthy graph)."""
    if diagnostics is not None:
        refused = driver_refusals(diagnostics)
        assert refused and not any(refused.values()), f"the driver refused targets in a healthy graph: {refused}"
    if mid_inference:
        assert wait_until_busy(graph.pid("vam_policy_node"), timeout_s=120), "no inference to stop"
    codes = graph.stop()
    logs = {label: graph.log(label) for label in codes}
    assert codes == {label: 0 for label in codes}, {k: logs[k][-3000:] for k, c in codes.items() if c != 0}
    print("exit after SIGINT [s]:", {k: round(t, 2) for k, t in graph.stop_times.items()})
    slow = {k: t for k, t in graph.stop_times.items() if t > STOP_WITHIN_S}
    assert not slow, f"exited more than {STOP_WITHIN_S} s after SIGINT: {slow}"
    for label, text in logs.items():
        bad = [b for b in BAD_OUTPUT if b in text]
        assert not bad, f"{label} printed {bad}:\n{text[-4000:]}"


def test_mujoco_arm_graph_runs_the_shipped_policy_and_the_monitor_traces_every_replan(ros_harness, tmp_path,
                                                                                      mujoco_renders):
    """`robot.launch.py sim:=mujoco preset:=yam64 instruction:=...`: the world with its camera bridge
    and driver, the policy node (its policy in a child process), the monitor with no per-preset grid."""
    h = ros_harness
    out = {k: h.capture(k) for k in ("telemetry", "tr", "trace_image", "attention_overlay", "joint_states",
                                     "joint_targets", "diagnostics", "clock")}
    graph = ProcessGraph("robot", {"sim": "mujoco", "preset": "yam64", "instruction": HANDOVER},
                         log_dir=tmp_path / "logs")
    with graph:
        assert h.spin_until(lambda: len(out["telemetry"]) >= 8 and out["trace_image"] and out["attention_overlay"],
                            timeout=240), {k: len(v) for k, v in out.items()} | {"exited": graph.exited()}
        h.spin_for(1.0)                                    # the monitor's answer to the last replan
        steps = [json.loads(m.data)["step"] for m in out["telemetry"]]
        assert len(out["tr"]) >= len(steps) - 1, f"{len(out['tr'])} TR values for {len(steps)} replans"
        tel = json.loads(out["telemetry"][-1].data)
        assert tel["token_grid"] == [3, 12]                # yam64's head grid (192x48 stacked views)
        overlay = image_msgs.image_to_numpy(out["attention_overlay"][-1])
        assert overlay.ndim == 3 and overlay.shape[2] == 3
        js = msgs.joint_state_to_numpy(out["joint_states"][-1])
        assert len(js.names) == 14 and np.isfinite(js.position).all()
        target = msgs.joint_state_to_numpy(out["joint_targets"][-1])
        assert target.frame_id == "vam_safety_filter"
        # use_sim_time: stamps are the world's time (seconds since the world started), not the epoch
        assert 0 < target.stamp_s < 3600 and 0 < msgs.joint_state_to_numpy(out["joint_states"][-1]).stamp_s < 3600
        assert out["clock"] and 0 < msgs.time_to_seconds(out["clock"][-1].clock) < 3600
        world = [msgs.diagnostics_to_dict(d).get("yam_mujoco_sim: world") for d in out["diagnostics"]]
        assert any(w is not None for w in world)
        assert not h.errors("tr_monitor_node"), h.errors("tr_monitor_node")
        stop_cleanly(graph, mid_inference=True, diagnostics=out["diagnostics"])
    assert "driver shut down: arm held, torque off" in graph.log("yam_mujoco_sim")


def test_operator_drives_the_emulated_arm_graph_with_default_qos(ros_harness, tmp_path):
    """`robot.launch.py preset:=tiny_real camera_config:=cameras_synthetic.yaml use_emulated_driver:=true`,
    operated from another process as `ros2 topic pub` would: an instruction starts an episode and the
    arm moves; an e-stop holds it (latency bounded); a release waits for the next episode; SIGINT
    to every process leaves the arm held and its torque off."""
    h = ros_harness
    out = {k: h.capture(k) for k in ("joint_states", "joint_targets", "telemetry", "diagnostics")}
    graph = ProcessGraph("robot", {"preset": "tiny_real", "camera_config": "cameras_synthetic.yaml",
                                   "use_emulated_driver": "true"}, log_dir=tmp_path / "logs")
    instruction = operator_publisher(h.node, String, "/vam/instruction")
    estop = operator_publisher(h.node, Bool, "/vam/estop")
    with graph:
        assert h.spin_until(lambda: len(out["joint_states"]) > 10 and instruction.get_subscription_count() >= 2
                            and estop.get_subscription_count() >= 2, timeout=120), graph.exited()
        assert not out["joint_targets"], "the arm moved before any instruction"
        instruction.publish(String(data="fold the towel"))
        assert h.spin_until(lambda: len(out["telemetry"]) >= 2 and len(out["joint_targets"]) > 30, timeout=120)
        moving = np.array([msgs.joint_state_to_numpy(m).position for m in out["joint_states"][-30:]])
        assert np.ptp(moving, axis=0).max() > 1e-3, "the emulated arm did not move"

        # live tuning through the real SetParameters service, as rqt's parameter editor does
        results = set_parameters(h, "/vam_policy_node", guidance="flat", w_plan_base=0.5)
        assert all(r.successful for r in results), [r.reason for r in results]
        n_tel = len(out["telemetry"])
        assert h.spin_until(lambda: any(json.loads(m.data)["guidance"] == "flat" for m in out["telemetry"][n_tel:]),
                            timeout=60)
        tuned = next(json.loads(m.data) for m in out["telemetry"][n_tel:] if json.loads(m.data)["guidance"] == "flat")
        assert tuned["w_plan"] == pytest.approx(0.5) and tuned["w_lang"] == pytest.approx(0.1)
        for bad, why in ((dict(guidance="bogus"), "guidance.schedule must be one of"), (dict(s_max=-1.0), ""),
                         (dict(preset="real"), "read-only"), (dict(w_lang_base="high"), "")):
            (r,) = set_parameters(h, "/vam_policy_node", **bad)
            assert not r.successful and why in r.reason, (bad, r.reason)

        t_pub = time.time()
        estop.publish(Bool(data=True))
        assert h.spin_until(lambda: any("e-stop: holding" in m for n, m, _ in h.log_stamps
                                        if n.endswith("yam_driver")), timeout=5)
        held_at = min(t for n, m, t in h.log_stamps if n.endswith("yam_driver") and "e-stop: holding" in m)
        latency = held_at - t_pub
        print(f"e-stop publish -> driver hold: {latency * 1e3:.1f} ms")
        assert 0 <= latency < 0.3, f"e-stop reached the driver after {latency:.3f} s"
        h.spin_for(0.5)                                    # the emulated joints settle on the hold
        n0 = len(out["joint_states"])
        h.spin_for(1.0)
        held = np.array([msgs.joint_state_to_numpy(m).position for m in out["joint_states"][n0:]])
        assert len(held) > 10 and np.ptp(held, axis=0).max() < 1e-3, "the arm moved during the e-stop"

        estop.publish(Bool(data=False))
        assert h.spin_until(lambda: any("e-stop released" in m for n, m, _ in h.log_stamps
                                        if n.endswith("yam_driver")), timeout=5)
        n_targets = len(out["joint_targets"])
        h.spin_for(1.5)
        assert len(out["joint_targets"]) - n_targets < 5, "motion resumed before a new episode was asked for"
        instruction.publish(String(data="fold the towel again"))
        assert h.spin_until(lambda: len(out["joint_targets"]) - n_targets > 30, timeout=60)
        stop_cleanly(graph, diagnostics=out["diagnostics"])
    assert "driver shut down: arm held, torque off" in graph.log("yam_driver")


def test_sim_launch_graph_closes_the_loop_on_the_mocked_libero(ros_harness, tmp_path):
    """`sim.launch.py episodes:=1`: the bridge announces its episode once the policy listens, the
    libero64 policy steps it, the monitor traces the replans."""
    h = ros_harness
    out = {k: h.capture(k) for k in ("episode_status", "tr", "telemetry", "trace_image")}
    graph = ProcessGraph("sim", {"episodes": "1"}, log_dir=tmp_path / "logs")
    with graph:
        def step() -> int:
            return json.loads(out["episode_status"][-1].data)["step"] if out["episode_status"] else -1

        assert h.spin_until(lambda: len(out["tr"]) >= 3 and step() >= 20 and out["trace_image"], timeout=240), (
            {k: len(v) for k, v in out.items()}, graph.exited())
        assert json.loads(out["telemetry"][-1].data)["token_grid"] == [4, 8]    # libero64's head grid
        stop_cleanly(graph, mid_inference=True)


def test_a_managed_policy_node_takes_instructions_only_once_configured_and_active(ros_harness, tmp_path):
    """`vam_policy_node autostart: false` in the robot graph (emulated arm): an instruction before
    activation is ignored; configure loads and warms up the policy (its time logged); activate
    takes the next instruction (and, with command_outputs: both, the filtered targets also go out
    for ros2_control); deactivate stops the episode."""
    import yaml
    from lifecycle_msgs.msg import Transition
    from lifecycle_msgs.srv import ChangeState

    from vam_stack.paths import config_dir

    h = ros_harness
    params = yaml.safe_load((config_dir() / "vam_stack.params.yaml").read_text())
    params["vam_policy_node"]["ros__parameters"].update(autostart=False, command_outputs="both")
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    out = {k: h.capture(k) for k in ("joint_states", "joint_targets", "telemetry", "joint_trajectory",
                                     "forward_commands")}
    graph = ProcessGraph("robot", {"preset": "tiny_real", "camera_config": "cameras_synthetic.yaml",
                                   "use_emulated_driver": "true", "params_file": str(tmp_path / "params.yaml")},
                         log_dir=tmp_path / "logs")
    instruction = operator_publisher(h.node, String, "/vam/instruction")

    def change(transition_id):
        client = h.node.create_client(ChangeState, "/vam_policy_node/change_state")
        assert client.wait_for_service(timeout_sec=60.0)
        future = client.call_async(ChangeState.Request(transition=Transition(id=transition_id)))
        h.executor.spin_until_future_complete(future, timeout_sec=120.0)
        return future.done() and future.result().success

    with graph:
        assert h.spin_until(lambda: len(out["joint_states"]) > 10 and instruction.get_subscription_count() >= 2,
                            timeout=120), graph.exited()
        instruction.publish(String(data="fold the towel"))
        h.spin_for(2.0)
        assert not out["telemetry"] and not out["joint_targets"], "an unconfigured policy acted"
        assert change(Transition.TRANSITION_CONFIGURE)
        # the node logs before it answers; the line reaches the log file through a pipe and a reader thread
        assert h.spin_until(lambda: "warmed up: reset" in graph.log("vam_policy_node"), timeout=10.0), \
            graph.log("vam_policy_node")[-2000:]
        assert change(Transition.TRANSITION_ACTIVATE)
        instruction.publish(String(data="fold the towel"))
        assert h.spin_until(lambda: len(out["telemetry"]) >= 2 and len(out["joint_targets"]) > 10, timeout=120)
        # ros2_control's command topics carry the same filtered targets (command_outputs: both)
        assert h.spin_until(lambda: len(out["joint_trajectory"]) > 5 and len(out["forward_commands"]) > 5)
        assert len(out["joint_trajectory"][-1].points) == 1 and len(out["forward_commands"][-1].data) == 14
        assert change(Transition.TRANSITION_DEACTIVATE)
        n = len(out["telemetry"])
        h.spin_for(2.0)
        assert len(out["telemetry"]) - n <= 1, "a deactivated policy kept replanning"
        stop_cleanly(graph)
