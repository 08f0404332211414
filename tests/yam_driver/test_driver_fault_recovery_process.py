"""Issue 71 rows 0, 1 and 4 on the driver process as launch runs it: the `yam_driver` console script
(autostart, its bus thread at 30 Hz) on an emulated Damiao arm in a process of its own with i2rt's
400 ms motor command timeout (`EmulatedRigProcess`, owned by this test so that faults can be
injected and the emulator stopped with SIGSTOP, as the issue's probe did), operated from this
process over ROS: /joint_states, /diagnostics, ~/reset_faults and the lifecycle services.

- row 4: a joint without replies is published as NaN on /joint_states, never at its last reading;
- row 0: its motor keeps getting frames while faulted, so it never disables itself;
- row 1: the emulator stopped 0.25 s (faults on all 14 joints) recovers through ~/reset_faults and
  through deactivate -> activate, torque never off; a 1 s stop outlasts the motors' timeout (they
  disable themselves) and the reset says so and brings them back.
"""
from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import time

import numpy as np
import pytest
import yaml
from lifecycle_msgs.msg import Transition
from lifecycle_msgs.srv import ChangeState
from std_srvs.srv import Trigger

from vam_stack import msgs
from vam_stack.process_graph import find_executable
from yam_driver.can_socket import INTERFACE
from yam_driver.config import default_config_path, load_config
from yam_driver.emulators.process import EmulatedRigProcess

pytestmark = [pytest.mark.adapter, pytest.mark.slow]


def _call(h, srv_type, name, request, timeout=20.0):
    client = h.node.create_client(srv_type, name)
    assert client.wait_for_service(timeout_sec=timeout), f"{name} not available"
    future = client.call_async(request)
    h.executor.spin_until_future_complete(future, timeout_sec=timeout)
    assert future.done(), f"{name} did not answer"
    return future.result()


def _driver_file(tmp_path, rig) -> str:
    """The shipped Damiao driver file with its channels on the emulator's sockets."""
    data = yaml.safe_load(default_config_path("damiao").read_text())
    ports = {a.name: a.port for a in rig.config.arms}
    data["yam_driver"]["can_interface"] = INTERFACE
    data["yam_driver"]["reply_timeout_ms"] = 20.0            # a loaded host (the lifecycle test's setting)
    for arm in data["yam_driver"]["arms"]:
        arm["port"] = ports[arm["name"]]
    path = tmp_path / "driver.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_a_fault_on_the_running_driver_process_recovers_with_torque_on_and_unread_joints_are_nan(
        ros_harness, tmp_path):
    h = ros_harness
    names = load_config(bus="damiao").joint_names
    rig = EmulatedRigProcess(dataclasses.replace(load_config(bus="damiao")), gravity=True)
    states, diags = h.capture("joint_states"), h.capture("diagnostics")
    proc = subprocess.Popen([find_executable("yam_driver"), "--ros-args", "-p", f"config_file:={_driver_file(tmp_path, rig)}",
                             "-p", "diagnostic_updater.period:=0.2"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def status() -> dict:
        for m in reversed(diags):
            d = msgs.diagnostics_to_dict(m)
            if "yam_driver: driver" in d:
                return d["yam_driver: driver"]["values"]
        return {}

    def fresh_status(since: int) -> dict:
        return status() if len(diags) > since else {}

    def all_enabled() -> bool:
        return all(rig.torque_enabled(n) for n in names)

    def stop_emulator(seconds: float) -> None:
        os.kill(rig._proc.pid, signal.SIGSTOP)
        time.sleep(seconds)
        os.kill(rig._proc.pid, signal.SIGCONT)

    def faults_now(n: int) -> bool:
        mark = len(diags)
        return h.spin_until(lambda: fresh_status(mark).get("faults", "none").count("ticks in a row") + fresh_status(
            mark).get("faults", "none").count("hardware error") >= n, timeout=10)

    def reset() -> str:
        answer = _call(h, Trigger, "/yam_driver/reset_faults", Trigger.Request())
        assert answer.success, answer.message
        mark = len(diags)
        assert h.spin_until(lambda: fresh_status(mark).get("faults") == "none", timeout=10), status()
        return answer.message

    try:
        assert h.spin_until(lambda: states and status().get("torque") == "true", timeout=60), status()
        assert h.spin_until(lambda: status().get("mode") in ("holding", "ramping"), timeout=10), status()
        start = msgs.joint_state_to_numpy(states[-1]).position.copy()
        assert np.isfinite(start).all()

        # --- row 4: a joint without replies is NaN on /joint_states, not its last reading
        mark = len(states)
        rig.silence("left_joint2")
        assert faults_now(1), status()
        said = next(msgs.diagnostics_to_dict(m)["yam_driver: driver"]["message"] for m in reversed(diags)
                    if "yam_driver: driver" in msgs.diagnostics_to_dict(m))
        assert "torque on, every motor held" in said and "/yam_driver/reset_faults" in said, said
        h.spin_for(0.5)
        during = [msgs.joint_state_to_numpy(m).position for m in states[mark:]]
        unread = [p for p in during if np.isnan(p[1])]
        assert len(unread) >= 10, f"{len(unread)} of {len(during)} /joint_states had left_joint2 as NaN"
        assert all(np.isfinite(np.delete(p, 1)).all() for p in during), "other joints were published as NaN"
        # --- row 0: the faulted motor still gets a frame every tick: it never disables itself
        h.spin_for(1.2)                                      # three of its 400 ms command timeouts
        assert all_enabled(), "a motor disabled itself while the driver held it faulted"
        rig.silence("left_joint2", False)
        mark = len(states)
        assert h.spin_until(lambda: len(states) > mark + 5 and np.isfinite(
            msgs.joint_state_to_numpy(states[-1]).position).all(), timeout=5), "the joint is read again once it answers"
        # --- row 1: the operator's reset, torque on throughout
        assert "torque on, holding the measured pose" in reset()
        assert status()["torque"] == "true" and all_enabled()

        stop_emulator(0.25)                                  # the USB-CAN hiccup: all 14 joints latch
        assert faults_now(14), status()
        h.spin_for(0.5)
        assert all_enabled(), "a motor timed out while the driver held it"
        reset()
        h.spin_for(1.0)
        assert status()["faults"] == "none" and status()["mode"] in ("holding", "ramping") and all_enabled()
        now = msgs.joint_state_to_numpy(states[-1]).position
        assert np.abs(now - start)[np.arange(14) % 7 != 6].max() < 0.05, "the arm moved through the recovery"

        # activate from a fault: the same reset, never torque off
        assert _call(h, ChangeState, "/yam_driver/change_state",
                     ChangeState.Request(transition=Transition(id=Transition.TRANSITION_DEACTIVATE))).success
        stop_emulator(0.25)
        assert faults_now(14), status()
        assert _call(h, ChangeState, "/yam_driver/change_state",
                     ChangeState.Request(transition=Transition(id=Transition.TRANSITION_ACTIVATE))).success
        mark = len(diags)
        assert h.spin_until(lambda: fresh_status(mark).get("faults") == "none", timeout=10), status()
        assert all_enabled()

        # a stop longer than the motors' timeout: they disable themselves (0xd); the reset names it
        stop_emulator(1.0)
        assert faults_now(14), status()
        assert h.spin_until(lambda: not any(rig.torque_enabled(n) for n in names), timeout=5)
        message = reset()
        assert "latched communication loss" in message and "left_joint1" in message, message
        h.spin_for(0.5)
        assert all_enabled() and status()["faults"] == "none"
    finally:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=20)
        rig.close()
    assert proc.returncode == 0, out[-3000:]
    assert "Traceback" not in out, out[-3000:]
    assert "reset_faults: faults cleared" in out, out[-3000:]
    assert "driver shut down: arm held, torque off" in out                   # only the operator's Ctrl-C turned it off
