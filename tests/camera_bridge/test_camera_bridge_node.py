"""camera_bridge node through rclpy: pushed camera frames in, stacked and
per-view Images (sensor-data QoS) and per-camera diagnostics out; a failed camera stops the
stacked stream and is named in the diagnostics."""
from __future__ import annotations

import numpy as np
import pytest
from rclpy.parameter import Parameter
from rclpy.qos import ReliabilityPolicy

from camera_bridge.bridge import CameraBridge
from camera_bridge.config import BridgeConfig, CameraConfig
from camera_bridge.node import CameraBridgeNode
from vam_stack import image_msgs, msgs
from vam_stack.topics import camera_topic

pytestmark = pytest.mark.adapter

VIEWS = ("agentview", "eye_in_hand")


def push_bridge() -> CameraBridge:
    cams = tuple(CameraConfig(n, kind="push", width=32, height=24, fps=20.0, encoding="rgb8", max_age_ms=150.0)
                 for n in VIEWS)
    return CameraBridge(BridgeConfig(cameras=cams, view_width=32, view_height=24, source_fps=20.0,
                                     frame_skip=1, window_frames=5, buffer_frames=5, max_gap_ms=75.0,
                                     max_window_age_ms=150.0, tick_hz=40.0))


@pytest.fixture
def camera_node(ros_harness):
    node = ros_harness.add(CameraBridgeNode(bridge=push_bridge(), parameter_overrides=[
        Parameter("diagnostic_updater.period", value=0.2)]))
    return ros_harness, node


def pusher(node, which=VIEWS):
    count = [0]

    def every():
        count[0] += 1
        for i, src in enumerate(node.bridge.sources):
            if src.name in which:
                src.push(np.full((24, 32, 3), 40 * (i + 1) + count[0] % 10, np.uint8))
    return every


def test_publishes_stacked_and_views_with_frame_ids_and_qos(camera_node):
    h, node = camera_node
    stacked = h.capture("stacked_image")
    views = {v: h.capture(camera_topic(v).name) for v in VIEWS}
    assert h.spin_until(lambda: len(stacked) >= 3 and all(len(v) >= 3 for v in views.values()), every=pusher(node))
    img = stacked[-1]
    assert (img.width, img.height, img.encoding, img.header.frame_id) == (64, 24, "rgb8", "camera_stacked")
    frame = image_msgs.image_to_numpy(img)
    for i, v in enumerate(VIEWS):
        assert views[v][-1].header.frame_id == f"{v}_camera"
        last = [m for m in views[v] if m.header.stamp == img.header.stamp]
        np.testing.assert_array_equal(image_msgs.image_to_numpy(last[0]), frame[:, 32 * i:32 * (i + 1)])
    info = h.node.get_publishers_info_by_topic("/camera/stacked/image_raw")
    assert info[0].qos_profile.reliability == ReliabilityPolicy.BEST_EFFORT
    assert not h.errors("camera_bridge")


def test_publish_compressed_adds_jpeg_twins_with_the_raw_header(ros_harness):
    h = ros_harness
    node = h.add(CameraBridgeNode(bridge=push_bridge(), parameter_overrides=[
        Parameter("publish_compressed", value=True), Parameter("jpeg_quality", value=80),
        Parameter("diagnostic_updater.period", value=0.2)]))
    raw, jpeg = h.capture("stacked_image"), h.capture("stacked_image_compressed")
    views = {v: h.capture(camera_topic(v, compressed=True).name) for v in VIEWS}
    diags = h.capture("diagnostics")
    assert h.spin_until(lambda: len(jpeg) >= 3 and all(len(v) >= 3 for v in views.values()) and diags,
                        every=pusher(node))
    img = jpeg[-1]
    assert img.format == "rgb8; jpeg compressed bgr8" and img.header.frame_id == "camera_stacked"
    same = [m for m in raw if m.header.stamp == img.header.stamp]
    assert same, "a compressed frame without its raw frame (stamps must be copied)"
    frame = image_msgs.image_to_numpy(same[0])
    decoded = image_msgs.compressed_image_to_numpy(img, shape=frame.shape)
    assert np.abs(decoded.astype(int) - frame).max() <= 4       # flat colours survive JPEG almost exactly
    assert img.data.size < frame.size
    for i, v in enumerate(VIEWS):
        m = [x for x in views[v] if x.header.stamp == img.header.stamp][0]
        assert m.header.frame_id == f"{v}_camera" and m.format == "rgb8; jpeg compressed bgr8"
        assert np.abs(image_msgs.compressed_image_to_numpy(m).astype(int) - frame[:, 32 * i:32 * (i + 1)]).max() <= 4
    info = h.node.get_publishers_info_by_topic("/camera/stacked/image_raw/compressed")
    assert info[0].topic_type == "sensor_msgs/msg/CompressedImage"
    assert info[0].qos_profile.reliability == ReliabilityPolicy.BEST_EFFORT

    def jpeg_bytes():
        found = [msgs.diagnostics_to_dict(d).get("camera_bridge: stacked") for d in diags]
        return [int(f["values"]["jpeg_bytes"]) for f in found if f and "jpeg_bytes" in f["values"]]
    assert h.spin_until(lambda: any(b > 0 for b in jpeg_bytes()), every=pusher(node))
    assert not h.errors("camera_bridge")


def test_no_compressed_topics_unless_asked(camera_node):
    h, node = camera_node
    stacked = h.capture("stacked_image")
    assert h.spin_until(lambda: len(stacked) >= 2, every=pusher(node))
    assert node.get_parameter("publish_compressed").value is False and node.get_parameter("jpeg_quality").value == 95
    assert h.node.get_publishers_info_by_topic("/camera/stacked/image_raw/compressed") == []


def test_a_silent_camera_stops_the_stream_and_is_named_in_diagnostics(camera_node):
    h, node = camera_node
    stacked, diags = h.capture("stacked_image"), h.capture("diagnostics")
    assert h.spin_until(lambda: len(stacked) >= 2, every=pusher(node))

    def camera(name):
        found = [msgs.diagnostics_to_dict(d) for d in diags if f"camera_bridge: {name}" in msgs.diagnostics_to_dict(d)]
        return found[-1][f"camera_bridge: {name}"] if found else None
    assert h.spin_until(lambda: camera("agentview") is not None and float(camera("agentview")["values"]["rate_hz"]) > 0,
                        every=pusher(node))
    diags.clear()
    only_one = pusher(node, which=("agentview",))
    assert h.spin_until(lambda: camera("eye_in_hand") is not None and camera("eye_in_hand")["level"] == "error",
                        every=only_one)
    assert camera("agentview")["level"] == "ok"
    n = len(stacked)
    h.spin_for(0.5, every=only_one)
    assert len(stacked) == n, "stacked frames kept coming with a camera silent"
    assert h.spin_until(lambda: camera("stacked") is not None and camera("stacked")["level"] == "warn", every=only_one)
    assert "eye_in_hand" in camera("stacked")["message"]


def test_destroy_node_releases_the_cameras(camera_node):
    h, node = camera_node
    assert h.spin_until(lambda: node.bridge._thread is not None)
    h.remove(node)
    node.destroy_node()
    assert node.bridge._thread is None and not any(s.is_connected for s in node.bridge.sources)
