"""yam_leader node on real rclpy: an emulated leader arm drives the emulated follower's driver node."""
from __future__ import annotations

import numpy as np
import pytest
import yaml
from rclpy.parameter import Parameter
from std_srvs.srv import Trigger

from vam_stack import msgs
from yam_driver.config import default_config_path
from yam_driver.node import YamDriverNode
from yam_leader.node import YamLeaderNode

pytestmark = pytest.mark.adapter


@pytest.fixture
def graph(ros_harness, tmp_path):
    data = yaml.safe_load(default_config_path("damiao").read_text())
    data["yam_driver"].update(reply_timeout_ms=20.0)          # room for a loaded 2-core CI box
    path = tmp_path / "driver.yaml"
    path.write_text(yaml.safe_dump(data))
    driver = ros_harness.add(YamDriverNode(parameter_overrides=[
        Parameter("config_file", value=str(path)), Parameter("use_emulator", value=True)]))
    leader = ros_harness.add(YamLeaderNode(parameter_overrides=[Parameter("use_emulator", value=True)]))
    return ros_harness, driver, leader


def _last(msgs_list):
    return msgs.joint_state_to_numpy(msgs_list[-1])


def test_the_follower_tracks_the_leader_after_engage_and_holds_after_disengage(graph):
    h, driver, leader = graph
    states, commands, targets = h.capture("joint_states"), h.capture("teleop_command"), h.capture("joint_targets")
    assert h.spin_until(lambda: len(states) >= 3 and leader.follower is not None, timeout=30)
    assert not commands                                           # nothing is sent before ~/engage
    # both emulated arms start mid-range, so the poses match and engage is accepted
    r = h.call(Trigger, "/yam_leader/engage")
    assert r.success, r.message
    start = _last(states).position.copy()
    goal = start[0] + 0.2
    h.spin_for(0.2)
    leader.rig.move_by_hand("left_joint1", goal)                   # the operator moves the leader's first joint
    assert h.spin_until(lambda: commands and abs(_last(commands).position[0] - goal) < 0.01, timeout=20)
    assert _last(commands).frame_id == "teleop" and _last(targets).frame_id == "vam_safety_filter"
    # the follower's driver gets the filtered stream and reaches the leader's pose
    assert h.spin_until(lambda: abs(_last(states).position[0] - goal) < 0.02, timeout=30), (
        _last(states).position[0], driver.driver.mode, h.errors(), _last(targets).position[0], len(targets))
    assert not any(leader.rig.torque_enabled(n) for n in ("left_joint1", "right_joint6"))
    r = h.call(Trigger, "/yam_leader/disengage")
    assert r.success
    n = len(targets)
    h.spin_for(0.5)
    assert len(targets) <= n + 1                                  # at most one tick in flight when it answered
    assert not h.errors("yam_leader") and not h.errors("yam_driver")


def test_engage_is_refused_while_the_leader_is_far_from_the_follower(graph):
    h, driver, leader = graph
    states = h.capture("joint_states")
    assert h.spin_until(lambda: len(states) >= 3 and leader.follower is not None, timeout=30)
    start = _last(states).position
    leader.rig.move_by_hand("right_joint2", start[8] + 0.4)
    r = h.call(Trigger, "/yam_leader/engage")
    assert not r.success and "right_joint2" in r.message
    assert leader.core.state == "idle"
    assert np.isfinite(start).all()


def test_a_leader_bus_that_dies_while_engaged_disengages_with_an_error(graph):
    from yam_driver.bus import BusError

    h, driver, leader = graph
    states, targets = h.capture("joint_states"), h.capture("joint_targets")
    assert h.spin_until(lambda: len(states) >= 3 and leader.follower is not None, timeout=30)
    assert h.call(Trigger, "/yam_leader/engage").success
    assert h.spin_until(lambda: len(targets) >= 3, timeout=20)

    def gone(**kw):
        raise BusError("port /dev/ttyUSB2 vanished")

    leader.bus.read_state = gone
    assert h.spin_until(lambda: leader.core.state == "fault", timeout=20)
    assert "3 failed leader reads" in leader.core.reason
    assert any("leader read failed" in e for e in h.errors("yam_leader"))
    n = len(targets)
    h.spin_for(0.3)
    assert len(targets) == n                                        # nothing is sent after the fault


def test_an_engage_accepted_then_one_refused_both_answer_and_the_node_lives_on(graph):
    """Issue 58 row 5: the engage answer was logged from one call site at two severities
    (info when accepted, warning when refused); rclpy refuses a second severity from the same
    call site (`ValueError: Logger severity cannot be changed between calls`), and the node died."""
    h, driver, leader = graph
    states = h.capture("joint_states")
    assert h.spin_until(lambda: len(states) >= 3 and leader.follower is not None, timeout=30)
    first = h.call(Trigger, "/yam_leader/engage")
    assert first.success and first.message.startswith("engaged"), first.message
    assert h.call(Trigger, "/yam_leader/disengage").success
    start = _last(states).position
    leader.rig.move_by_hand("left_joint2", start[1] + 0.4)          # far from the follower now
    second = h.call(Trigger, "/yam_leader/engage")
    assert not second.success and "left_joint2" in second.message, second.message
    third = h.call(Trigger, "/yam_leader/engage")                     # and again: the node still answers
    assert not third.success and "left_joint2" in third.message
    leader.rig.move_by_hand("left_joint2", start[1])
    assert h.call(Trigger, "/yam_leader/engage").success              # accepted again once the poses match
    h.spin_for(0.3)
    assert leader.core.state == "engaged"


def test_a_malformed_joint_state_is_logged_not_fatal(graph):
    """A JointState whose names and positions differ in length (a bad publisher) is refused with
    an error; the node keeps the last good follower pose and keeps answering."""
    h, driver, leader = graph
    states = h.capture("joint_states")
    assert h.spin_until(lambda: len(states) >= 3 and leader.follower is not None, timeout=30)
    bad = msgs.joint_state_msg(leader.names, np.zeros(14), stamp_s=1.0)
    bad.position = bad.position[:13]
    h.publish("joint_states", bad)
    assert h.spin_until(lambda: any("JointState" in e for e in h.errors("yam_leader")), timeout=10), h.errors()
    assert h.call(Trigger, "/yam_leader/engage").success                # still alive, still answering
