"""yam_driver node on emulated Damiao buses, through rclpy."""
from __future__ import annotations

import time

import pytest
import yaml
from rclpy.parameter import Parameter

from vam_stack import msgs
from vam_stack.topics import JOINT_TARGETS_SOURCE
from yam_driver.config import default_config_path
from yam_driver.faults import Mode
from yam_driver.node import YamDriverNode

pytestmark = pytest.mark.adapter


@pytest.fixture
def driver_node(ros_harness, tmp_path):
    data = yaml.safe_load(default_config_path("damiao").read_text())
    data["yam_driver"].update(reply_timeout_ms=20.0, rate_hz=20.0)  # room for a loaded 2-core CI box
    path = tmp_path / "driver.yaml"
    path.write_text(yaml.safe_dump(data))
    node = ros_harness.add(YamDriverNode(parameter_overrides=[
        Parameter("config_file", value=str(path)), Parameter("use_emulator", value=True)]))
    return ros_harness, node


def latest(states):
    return msgs.joint_state_to_numpy(states[-1])


def filtered(names, position):
    """A target as the policy node's safety filter sends it: its frame_id, stamped now."""
    return msgs.joint_state_msg(names, position, stamp_s=time.time(), frame_id=JOINT_TARGETS_SOURCE)


def test_follows_targets_by_name_and_publishes_joint_states(driver_node):
    h, node = driver_node
    states = h.capture("joint_states")
    assert h.spin_until(lambda: len(states) >= 3)
    js = latest(states)
    assert js.names == node.names and js.velocity.shape == (14,)
    target = js.position.copy()
    target[0] += 0.05
    order = list(range(13, -1, -1))  # names reversed: matching is by name, not by position
    send = lambda: h.publish("joint_targets", filtered([node.names[i] for i in order], target[order]))  # noqa: E731
    assert h.spin_until(lambda: abs(latest(states).position[0] - target[0]) < 0.01, every=send, timeout=30)
    assert node.driver.mode in (Mode.RUNNING, Mode.RAMPING)
    assert not h.errors("yam_driver")


def test_bad_targets_rejected_and_estop_holds(driver_node):
    h, node = driver_node
    states = h.capture("joint_states")
    assert h.spin_until(lambda: len(states) >= 3)
    start = latest(states).position.copy()
    h.publish("joint_targets", filtered(node.names[:-1], start[:-1]))
    assert h.spin_until(lambda: any("lack joints" in e for e in h.errors("yam_driver")))
    hold_here = lambda: h.publish("joint_targets", filtered(node.names, start))  # noqa: E731
    assert h.spin_until(lambda: node.driver.mode == Mode.RUNNING, every=hold_here)
    h.publish("estop", msgs.bool_msg(True))
    assert h.spin_until(lambda: node.estopped)  # topics are not ordered against each other
    far = start.copy()
    far[0] += 0.3
    send = lambda: h.publish("joint_targets", filtered(node.names, far))  # noqa: E731
    h.spin_for(1.0, every=send)
    assert abs(latest(states).position[0] - start[0]) < 0.02, "the arm followed targets under e-stop"
    assert node.driver.mode == Mode.HOLDING


def test_destroy_node_holds_and_turns_torque_off(driver_node):
    h, node = driver_node
    assert h.spin_until(lambda: node.driver.tick >= 3)
    assert all(node.rig.torque_enabled(n) for n in node.names)
    h.remove(node)
    node.destroy_node()
    assert node.driver.mode == Mode.STOPPED and not node.driver.shutdown_errors
    assert not any(node.rig.torque_enabled(n) for n in node.names)


def test_autostart_that_cannot_configure_releases_and_says_why(ros_harness, tmp_path):
    data = yaml.safe_load(default_config_path("damiao").read_text())
    data["yam_driver"].update(connect_retries=1)
    for arm in data["yam_driver"]["arms"]:
        arm["port"] = "vcan_absent_" + arm["port"]          # no such CAN interface on this machine
    path = tmp_path / "driver.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(RuntimeError, match="autostart could not configure the driver: .*vcan_absent_"):
        YamDriverNode(parameter_overrides=[Parameter("config_file", value=str(path))])
