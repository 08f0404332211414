"""record.launch.py's graph as OS processes over DDS on real rclpy: the scripted teleoperator drives the
simulated arm through the safety filter and the driver, the demo recorder writes the episode, and the MCAP
imports into a training set. The test process is the operator calling the services."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from std_srvs.srv import Trigger

from vam_data.contract import contract_for
from vam_data.mcap_import import McapMapping, import_mcap
from vam_stack import msgs
from vam_stack.process_graph import ProcessGraph, driver_refusals
from vam_stack.recording import read_info
from vam_data.dataset import Dataset

pytestmark = [pytest.mark.adapter, pytest.mark.slow]


def test_a_teleoperated_episode_is_recorded_through_the_graph_and_imports(ros_harness, tmp_path, mujoco_renders):
    h = ros_harness
    targets, commands, diagnostics = h.capture("joint_targets"), h.capture("teleop_command"), h.capture("diagnostics")
    out = tmp_path / "rec"
    graph = ProcessGraph("record", {"sim_task": "handover", "seed": "5", "teleop": "expert", "out_dir": str(out)},
                         log_dir=tmp_path / "logs")
    with graph:
        try:
            started = h.call(Trigger, "/demo_recorder/start", timeout=120, resend_every=10.0)
        except AssertionError as e:
            raise AssertionError(f"{e}; exited: {graph.exited()}; recorder's log:\n{graph.log('demo_recorder')}")
        # an answer to a resent start (the first answer lost): the recorder says which file it records
        assert started.message.endswith("episode_000.mcap") and (
            started.success or started.message.startswith("already recording")), started.message
        def teleop_started() -> bool:      # refused until the world is ready; "already started" answers a resend
            r = h.call(Trigger, "/yam_mujoco_sim/start_teleop", timeout=60, resend_every=10.0)
            return r.success or "already started" in r.message
        ok = h.spin_until(teleop_started, timeout=120, period=0.5)
        assert ok, graph.exited()
        again = h.call(Trigger, "/yam_mujoco_sim/start_teleop")
        assert not again.success and "already started" in again.message
        assert h.spin_until(lambda: len(targets) >= 90, timeout=60), len(targets)   # 75 gave 56 steps under load
        stopped = h.call(Trigger, "/demo_recorder/stop")
        assert stopped.success, stopped.message
        assert not h.call(Trigger, "/demo_recorder/stop").success
        h.spin_for(1.5)                                  # the driver's next /diagnostics
        refused = driver_refusals(diagnostics)           # the teleop's targets: none refused (stamps on /clock)
        assert refused and not any(refused.values()), refused
        codes = graph.stop()
    assert codes == {"yam_mujoco_sim": 0, "demo_recorder": 0}, codes
    print("exit after SIGINT [s]:", {k: round(t, 2) for k, t in graph.stop_times.items()})
    assert max(graph.stop_times.values()) <= 2.0, graph.stop_times
    t = msgs.joint_state_to_numpy(targets[-1])
    assert t.frame_id == "vam_safety_filter" and len(t.names) == 14      # the driver follows only the filter
    info = read_info(out / "episode_000.mcap")
    assert {"/joint_states", "/teleop/joint_command", "/vam/joint_targets", "/camera/stacked/image_raw",
            "/vam/instruction", "/vam/phase"} <= set(info.topics)
    assert msgs.joint_state_to_numpy(commands[-1]).frame_id == "teleop"
    assert info.counts["/vam/instruction"] == 1
    # The simulated world stamps wall time, and on this 2-core host under the whole suite it has run at
    # 26-30 Hz, paused 124 ms and left a frame 118 ms old at a tick: looser rate, gap and age checks here.
    # The real-data defaults (5 %, 2.5 periods, 0.1 s) are tested on exact recordings in test_mcap_import.py.
    # Beside two busy workers it ran at 22.9 Hz (31 % off): the rate tolerance here is wide on purpose.
    loaded_host = replace(McapMapping(), rate_tolerance=0.5, max_gap_ticks=10.0, max_age_s=0.5)
    result = import_mcap(out, contract_for("yam64"), tmp_path / "demos", mapping=loaded_host, task="handover")
    ds = Dataset(tmp_path / "demos")
    ep = ds.episodes[0]
    assert result["total_episodes"] == 1 and len(ep) >= 60
    assert ep.meta["instruction"].startswith("pick up the blue block")
    assert np.isfinite(ep.actions).all() and ep.decode_all().shape[1:] == (48, 192, 3)
    assert (ep.phase == 0).any()                       # the expert's planning phase was labelled
