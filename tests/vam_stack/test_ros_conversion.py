"""vam_stack.ros: rosbags <-> rclpy message conversion for every type on the topic table,
QoS profiles from the table, parameter declaration; and the rclpy behaviour the nodes rely on
(typed fields under the strict checks the tests switch on, QoS matching, transient local, CDR
between publisher and subscriber), on real rclpy."""
from __future__ import annotations

import array

import numpy as np
import pytest
import rclpy
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_msgs.msg import Float32, String

from vam_stack import image_msgs, msgs, ros
from vam_stack.topics import TOPICS, camera_topic
from rosbags_msgs import float64_array, trajectory  # tests/support

pytestmark = pytest.mark.adapter

SAMPLES = {
    "sensor_msgs/msg/Image": lambda: image_msgs.image_msg(np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3), 1.25, "cam"),
    "sensor_msgs/msg/CompressedImage": lambda: image_msgs.compressed_image_msg(
        np.full((8, 16, 3), (10, 120, 240), np.uint8), 1.25, "cam", quality=90),
    "sensor_msgs/msg/JointState": lambda: msgs.joint_state_msg(["a", "b"], [0.5, -1.0], [0.1, 0.2], stamp_s=3.0),
    "std_msgs/msg/Float32": lambda: msgs.float32_msg(0.75),
    "std_msgs/msg/Float32MultiArray": lambda: msgs.float32_array_msg(np.ones((2, 3)), ["r", "c"]),
    "std_msgs/msg/String": lambda: msgs.json_msg({"tr": 1.5, "branches": ["cond"]}),
    "std_msgs/msg/Bool": lambda: msgs.bool_msg(True),
    "diagnostic_msgs/msg/DiagnosticArray": lambda: msgs.diagnostic_array_msg(
        [msgs.diagnostic_status("x", {"rate": 29.9}, "warn", "slow", "hw1")], 5.0),
    "trajectory_msgs/msg/JointTrajectory": lambda: trajectory(["a", "b"], [[0.5, -1.0], [0.6, -0.9]], [1 / 30, 2 / 30],
                                                              3.0, "vam_safety_filter"),
    "std_msgs/msg/Float64MultiArray": lambda: float64_array([0.5, -1.0, 0.25]),
    "rosgraph_msgs/msg/Clock": lambda: msgs.clock_msg(12.5),
}


def _same(a, b):
    assert type(a) is type(b)
    for name in a.__dataclass_fields__:
        if name == "__msgtype__":
            continue
        x, y = getattr(a, name), getattr(b, name)
        if hasattr(x, "__dataclass_fields__"):
            _same(x, y)
        elif isinstance(x, np.ndarray):
            np.testing.assert_array_equal(x, y)
        elif isinstance(x, list) and x and hasattr(x[0], "__dataclass_fields__"):
            for p, q in zip(x, y):
                _same(p, q)
        else:
            assert x == y, name


def test_every_table_type_converts_both_ways_exactly():
    types = {t.msgtype for t in TOPICS.values()} | {camera_topic("v").msgtype, camera_topic("v", compressed=True).msgtype}
    assert types == set(SAMPLES)
    for msgtype, make in SAMPLES.items():
        rb = make()
        r = ros.to_ros(rb)
        assert type(r) is ros.ros_class(msgtype)
        _same(rb, ros.from_ros(r, msgtype))
    image = ros.to_ros(SAMPLES["sensor_msgs/msg/Image"]())
    assert isinstance(image.data, array.array) and image.data.typecode == "B"
    assert ros.to_ros(SAMPLES["diagnostic_msgs/msg/DiagnosticArray"]()).status[0].level == b"\x01"
    jpeg = ros.to_ros(SAMPLES["sensor_msgs/msg/CompressedImage"]())
    assert isinstance(jpeg.data, array.array) and jpeg.data.typecode == "B" and jpeg.format == "rgb8; jpeg compressed bgr8"
    back = image_msgs.compressed_image_to_numpy(ros.from_ros(jpeg, "sensor_msgs/msg/CompressedImage"))
    assert np.abs(back.astype(int) - (10, 120, 240)).max() <= 3


def test_qos_profiles_follow_the_table():
    cam = ros.qos("stacked_image")
    assert cam.reliability == ReliabilityPolicy.BEST_EFFORT and cam.depth == 5
    latched = ros.qos("/vam/estop")
    assert latched.durability == DurabilityPolicy.TRANSIENT_LOCAL and latched.reliability == ReliabilityPolicy.RELIABLE


def test_config_path_finds_shipped_files_by_name():
    assert ros.config_path("", "cameras.yaml").endswith("config/cameras.yaml")
    assert ros.config_path("cameras_synthetic.yaml", "cameras.yaml").endswith("config/cameras_synthetic.yaml")
    assert ros.config_path("/nowhere/x.yaml", "cameras.yaml") == "/nowhere/x.yaml"


def test_message_fields_are_typed_as_rclpy_types_them():
    """Humble's generated setters always check these; Jazzy's only with ROS_PYTHON_CHECK_FIELDS=1,
    which tests/conftest.py sets: `to_ros` must pass them either way."""
    import os

    assert os.environ.get("ROS_PYTHON_CHECK_FIELDS") == "1"
    js = JointState()
    with pytest.raises(AssertionError):
        js.position = np.zeros(2)  # a numpy array is not a sequence for rclpy's setters
    with pytest.raises(AssertionError):
        Float32(data=np.float32(1.0))  # np.float32 is not a Python float
    with pytest.raises(AssertionError):
        js.header.stamp.sec = 2**40  # int32 range
    with pytest.raises(AssertionError):
        String(data=3)
    js.position = [1.0, 2.0]
    assert list(js.position) == [1.0, 2.0]


def test_middleware_matches_qos_keeps_latched_messages_and_round_trips(ros_harness):
    h = ros_harness
    node = h.node
    got = {"reliable_sub": [], "latched_late": []}
    best_effort = QoSProfile(depth=5, reliability=ReliabilityPolicy.BEST_EFFORT)
    pub = node.create_publisher(String, "/test/qos", best_effort)
    node.create_subscription(String, "/test/qos", got["reliable_sub"].append, QoSProfile(depth=5))
    pub.publish(String(data="lost"))
    latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
    lpub = node.create_publisher(String, "/test/latched", latched)
    lpub.publish(String(data="first"))
    lpub.publish(String(data="kept"))
    node.create_subscription(String, "/test/latched", got["latched_late"].append, latched)
    assert h.spin_until(lambda: got["latched_late"], timeout=5)
    h.spin_for(0.2)
    assert got["reliable_sub"] == [], "a best-effort writer must not reach a reliable reader"
    assert [m.data for m in got["latched_late"]] == ["kept"]
    sent = JointState(name=["j"], position=[0.25])
    received = []
    node.create_subscription(JointState, "/test/js", received.append, 10)
    node.create_publisher(JointState, "/test/js", 10).publish(sent)
    assert h.spin_until(lambda: received, timeout=5)
    assert received[0] is not sent and list(received[0].position) == [0.25]
    assert rclpy.ok()
