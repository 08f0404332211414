"""The managed yam_driver as its own process (installed console script, emulated Damiao arm,
`autostart:=false`), driven through the real lifecycle services from this process: configure
(connected, torque off, /joint_states flows), activate (torque on, follows the filtered stream),
deactivate (holds, targets ignored), the ~/home service (only while active), cleanup (torque off,
disconnected), shutdown, and SIGINT exits 0."""
from __future__ import annotations

import signal
import subprocess
import time

import numpy as np
import pytest
import yaml
from lifecycle_msgs.msg import Transition
from lifecycle_msgs.srv import ChangeState, GetState
from std_srvs.srv import Trigger

from vam_stack import msgs
from vam_stack.process_graph import find_executable
from vam_stack.topics import JOINT_TARGETS_SOURCE
from yam_driver.config import default_config_path

pytestmark = [pytest.mark.adapter, pytest.mark.slow]


def _call(h, srv_type, name, request, timeout=20.0):
    client = h.node.create_client(srv_type, name)
    assert client.wait_for_service(timeout_sec=timeout), f"{name} not available"
    future = client.call_async(request)
    h.executor.spin_until_future_complete(future, timeout_sec=timeout)
    assert future.done(), f"{name} did not answer"
    return future.result()


def _state(h) -> str:
    return _call(h, GetState, "/yam_driver/get_state", GetState.Request()).current_state.label


def _transition(h, transition_id: int) -> bool:
    return _call(h, ChangeState, "/yam_driver/change_state",
                 ChangeState.Request(transition=Transition(id=transition_id))).success


def test_the_lifecycle_from_another_process(ros_harness, tmp_path):
    h = ros_harness
    data = yaml.safe_load(default_config_path("damiao").read_text())
    data["yam_driver"].update(reply_timeout_ms=20.0)
    (tmp_path / "d.yaml").write_text(yaml.safe_dump(data))
    states, diags = h.capture("joint_states"), h.capture("diagnostics")
    proc = subprocess.Popen([find_executable("yam_driver"), "--ros-args", "-p", "use_emulator:=true",
                             "-p", "emulated_gravity:=true",
                             "-p", "autostart:=false", "-p", f"config_file:={tmp_path / 'd.yaml'}",
                             "-p", "diagnostic_updater.period:=0.2"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def driver_status():
        for m in reversed(diags):
            d = msgs.diagnostics_to_dict(m)
            if "yam_driver: driver" in d:                     # diagnostic_updater's naming
                return d["yam_driver: driver"]["values"]
        return {}

    def positions():
        return msgs.joint_state_to_numpy(states[-1]).position

    try:
        assert _state(h) == "unconfigured"
        h.spin_for(0.5)
        assert not states, "an unconfigured driver publishes no joint states"
        assert not _call(h, Trigger, "/yam_driver/home", Trigger.Request()).success

        assert _transition(h, Transition.TRANSITION_CONFIGURE) and _state(h) == "inactive"
        assert h.spin_until(lambda: len(states) > 5 and driver_status().get("mode") == "connected")
        assert driver_status()["torque"] == "false"
        named = next(s for m in reversed(diags) for s in m.status if s.name == "yam_driver: driver")
        assert named.hardware_id == "damiao: can_left, can_right"
        start = positions().copy()

        assert _transition(h, Transition.TRANSITION_ACTIVATE) and _state(h) == "active"
        assert h.spin_until(lambda: driver_status().get("torque") == "true")
        # the gravity feed-forward each MIT command carries, per joint, and the gripper force limit's state
        assert h.spin_until(lambda: abs(float(driver_status().get("gravity_ff_left_joint2_nm", 0.0))) > 0.1)
        assert driver_status()["gripper_force_limited"] == "none"
        goal = start.copy()
        goal[0] += 0.2

        def send(target):
            return lambda: h.publish("joint_targets", msgs.joint_state_msg(
                list(msgs.joint_state_to_numpy(states[-1]).names), target, stamp_s=time.time(),
                frame_id=JOINT_TARGETS_SOURCE))
        assert h.spin_until(lambda: abs(positions()[0] - goal[0]) < 0.01, every=send(goal), timeout=20)

        assert _transition(h, Transition.TRANSITION_DEACTIVATE) and _state(h) == "inactive"
        held = positions().copy()
        further = goal.copy()
        further[0] += 0.2
        h.spin_for(1.5, every=send(further))
        assert abs(positions()[0] - held[0]) < 0.01, "an inactive driver followed a target"
        assert driver_status()["torque"] == "true"                 # deactivate holds with torque on
        assert not _call(h, Trigger, "/yam_driver/home", Trigger.Request()).success

        assert _transition(h, Transition.TRANSITION_ACTIVATE)
        answer = _call(h, Trigger, "/yam_driver/home", Trigger.Request())
        assert answer.success and "home pose" in answer.message
        home = np.array(data["yam_driver"]["home_pose"])
        lower = np.array([j["lower"] for a in data["yam_driver"]["arms"] for j in a["joints"]])
        home = np.maximum(home, lower)
        t0 = time.monotonic()
        assert h.spin_until(lambda: np.abs(positions() - home).max() < 0.02, timeout=30)
        travel = np.abs(start - home).max()
        assert time.monotonic() - t0 >= travel / 1.5 * 0.9, "home faster than the bounded speed allows"
        assert h.spin_until(lambda: driver_status().get("mode") == "holding")

        assert _transition(h, Transition.TRANSITION_DEACTIVATE)
        assert _transition(h, Transition.TRANSITION_CLEANUP) and _state(h) == "unconfigured"
        assert h.spin_until(lambda: "not connected" in str(msgs.diagnostics_to_dict(diags[-1]).get(
            "yam_driver: driver", {}).get("message", "")))
        assert _transition(h, Transition.TRANSITION_UNCONFIGURED_SHUTDOWN) and _state(h) == "finalized"
    finally:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=20)
    assert proc.returncode == 0, out[-3000:]
    assert "Traceback" not in out, out[-3000:]
    assert "cleaned up: torque off, disconnected" in out
