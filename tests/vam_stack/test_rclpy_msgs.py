"""vam_stack.rclpy_msgs: the control loop's messages built directly as rclpy messages are, field for
field and through the wire, the ones the rosbags builder plus `ros.to_ros` made; they refuse the same bad
values with the same MessageError; and `msgs.joint_state_to_numpy` reads an rclpy JointState as it
arrives, equal to reading it through `ros.from_ros`. On real rclpy."""
from __future__ import annotations

import numpy as np
import pytest
from rclpy.serialization import deserialize_message, serialize_message

from vam_stack import msgs, rclpy_msgs, ros
from vam_stack.msg_base import MessageError
from rosbags_msgs import float64_array, trajectory  # tests/support: rosbags builders

pytestmark = pytest.mark.adapter

NAMES = ["left_joint1", "left_joint2", "left_gripper"]
STAMP_NS = 1_733_000_000_123_456_789


def _wire(msg) -> str:
    """What a subscriber gets, the message through CDR and back, written out field by field (repr: NaN
    reads as nan; the raw bytes are not compared, as rclpy leaves CDR's alignment padding unset)."""
    return repr(deserialize_message(serialize_message(msg), type(msg)))


def test_joint_state_is_on_the_wire_what_the_rosbags_path_sent():
    pos, vel, eff = [0.5, -1.25, 0.02], [0.1, np.nan, 0.0], [1.0, 2.0, np.nan]
    direct = rclpy_msgs.joint_state(NAMES, pos, vel, eff, stamp_ns=STAMP_NS, frame_id="safety_filter",
                                    unknown_nan=True)
    old = ros.to_ros(msgs.joint_state_msg(NAMES, pos, vel, eff, stamp_s=msgs.time_from_ns(STAMP_NS),
                                          frame_id="safety_filter", unknown_nan=True))
    assert type(direct) is type(old) and repr(direct) == repr(old)
    assert _wire(direct) == _wire(old) == repr(old)
    # position only: velocity and effort go out empty, as before
    assert _wire(rclpy_msgs.joint_state(NAMES, pos)) == _wire(ros.to_ros(msgs.joint_state_msg(NAMES, pos)))


def test_trajectory_and_forward_commands_match_the_rosbags_messages():
    target = np.array([0.1, -0.2, 0.03])
    direct = rclpy_msgs.joint_trajectory(NAMES, target, 1 / 30, STAMP_NS, "safety_filter")
    old = ros.to_ros(trajectory(NAMES, target[None], [1 / 30], msgs.time_from_ns(STAMP_NS), "safety_filter"))
    assert _wire(direct) == _wire(old)
    assert _wire(rclpy_msgs.float64_array(target)) == _wire(ros.to_ros(float64_array(target)))


@pytest.mark.parametrize("build, match", [
    (lambda: rclpy_msgs.joint_state(NAMES, [0.0, np.nan, 0.0]), r"position\[1\] is not finite"),
    (lambda: rclpy_msgs.joint_state(NAMES, [0.0, np.inf, 0.0], unknown_nan=True), r"position\[1\] is not finite"),
    (lambda: rclpy_msgs.joint_state(NAMES, [0.0, 1.0]), "position must have 3 entries"),
    (lambda: rclpy_msgs.joint_state(["a", "a"], [0.0, 1.0]), "'a' appears twice"),
    (lambda: rclpy_msgs.joint_state(NAMES, ["x", 0, 0]), "position must be numbers"),
    (lambda: rclpy_msgs.joint_state(NAMES, [0, 0, 0], stamp_ns=-1), "stamp must be integer nanoseconds"),
    (lambda: rclpy_msgs.joint_state(NAMES, [0, 0, 0], stamp_ns=1.5), "stamp must be integer nanoseconds"),
    (lambda: rclpy_msgs.joint_state(NAMES, [0, 0, 0], frame_id=3), "frame_id must be a string"),
    (lambda: rclpy_msgs.joint_trajectory(NAMES, [0, 0, 0], 0.0), "trajectory time must be"),
    (lambda: rclpy_msgs.joint_trajectory(NAMES, [0, np.nan, 0], 0.1), r"trajectory position\[1\]"),
    (lambda: rclpy_msgs.float64_array([0.0, np.inf]), "finite, non-empty vector"),
])
def test_bad_values_are_refused_naming_them(build, match):
    with pytest.raises(MessageError, match=match):
        build()


def test_an_rclpy_joint_state_is_read_as_it_arrives():
    msg = rclpy_msgs.joint_state(NAMES, [0.5, -1.25, 0.02], [0.1, 0.2, 0.3], stamp_ns=STAMP_NS, frame_id="f")
    direct = msgs.joint_state_to_numpy(msg)
    old = msgs.joint_state_to_numpy(ros.from_ros(msg, "sensor_msgs/msg/JointState"))
    assert direct.names == old.names == NAMES and direct.frame_id == "f"
    for a, b in zip(direct[1:4], old[1:4]):
        np.testing.assert_array_equal(a, b)
    assert direct.stamp_s == old.stamp_s == pytest.approx(STAMP_NS * 1e-9)
    msg.position = msg.position[:2]                 # a publisher's inconsistent message is still refused
    with pytest.raises(MessageError, match="3 names but 2 positions"):
        msgs.joint_state_to_numpy(msg)
