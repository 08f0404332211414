"""The topic table: valid ROS names, real message types, known QoS profiles."""
from __future__ import annotations

import re

import pytest

from vam_stack import msg_base, msgs, topics

pytestmark = pytest.mark.unit

# ROS 2 topic name rules (absolute form): /-separated tokens of [A-Za-z0-9_], no token starting
# with a digit, no double underscores or slashes, no trailing slash.
_ROS_NAME = re.compile(r"^(/[A-Za-z_][A-Za-z0-9_]*)+$")


def test_every_row_has_a_valid_name_type_qos_and_frame():
    names = [t.name for t in topics.TOPICS.values()]
    assert len(names) == len(set(names)), "topic names must be unique"
    for key, t in topics.TOPICS.items():
        assert _ROS_NAME.match(t.name) and "__" not in t.name, t.name
        msg_base.msg_class(t.msgtype)  # exists in the ROS 2 Humble typestore
        assert t.qos in topics.QOS_PROFILES, (key, t.qos)
        assert t.description and t.publisher
        stamped = "header" in dict(msgs.typestore().fielddefs[t.msgtype][1])
        assert stamped or t.frame_id == "", f"{key}: frame_id on an unstamped type"


def test_issue_topics_are_present_with_plottable_types():
    for key in ("tr", "tr0", "s", "w_lang", "w_plan", "latency_ms"):
        assert topics.topic(key).msgtype == "std_msgs/msg/Float32"  # rqt_plot-able
    assert topics.topic("stacked_image").name == "/camera/stacked/image_raw"
    assert topics.topic("stacked_image").qos == "sensor_data"
    assert topics.topic("diagnostics").name == "/diagnostics"
    assert topics.topic("phase").qos_spec.durability == "transient_local"


def test_lookup_by_key_name_and_camera_view():
    assert topics.resolve("/vam/tr") is topics.TOPICS["tr"]
    assert topics.resolve("w_plan").name == "/vam/w_plan"
    cam = topics.resolve("/camera/agentview/image_raw")
    assert cam.frame_id == "agentview_camera" and cam.msgtype == "sensor_msgs/msg/Image"
    assert topics.camera_topic("eye_in_hand").name == "/camera/eye_in_hand/image_raw"


def test_compressed_twins_follow_image_transports_naming_with_the_raw_rows_qos_and_frame():
    raw, jpeg = topics.topic("stacked_image"), topics.topic("stacked_image_compressed")
    assert jpeg.name == raw.name + "/compressed" == "/camera/stacked/image_raw/compressed"
    assert jpeg.msgtype == "sensor_msgs/msg/CompressedImage"
    assert (jpeg.qos, jpeg.frame_id) == (raw.qos, raw.frame_id) == ("sensor_data", "camera_stacked")
    view = topics.resolve("/camera/wrist/image_raw/compressed")
    assert view == topics.camera_topic("wrist", compressed=True)
    assert (view.msgtype, view.qos, view.frame_id) == ("sensor_msgs/msg/CompressedImage", "sensor_data", "wrist_camera")
    assert topics.resolve("/camera/stacked/image_raw/compressed") is jpeg
    with pytest.raises(KeyError):
        topics.by_name("/camera/wrist/image_raw/theora")


def test_unknown_keys_and_names_are_rejected_with_hints():
    with pytest.raises(KeyError, match="did you mean 'w_plan'"):
        topics.topic("w_plam")
    with pytest.raises(KeyError, match="did you mean '/vam/tr0'"):
        topics.by_name("/vam/tr00")
    for bad in ("Agent View", "stacked", "", "1cam"):
        with pytest.raises(ValueError):
            topics.camera_topic(bad)


def test_markdown_table_lists_every_topic():
    table = topics.markdown_table()
    for t in topics.TOPICS.values():
        assert f"`{t.name}`" in table
    assert "/camera/<view>/image_raw" in table and "/camera/<view>/image_raw/compressed" in table


def test_libero_joint_names_fit_the_proprio_and_action_sizes():
    assert len(topics.LIBERO_PROPRIO_NAMES) == 8 and len(set(topics.LIBERO_PROPRIO_NAMES)) == 8
    assert len(topics.LIBERO_ACTION_NAMES) == 7 and len(set(topics.LIBERO_ACTION_NAMES)) == 7
    msgs.joint_state_msg(topics.LIBERO_PROPRIO_NAMES, [0.0] * 8)  # valid JointState names
