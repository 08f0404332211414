"""numpy <-> ROS 2 message conversions: CDR round trips and input validation."""
from __future__ import annotations

import numpy as np
import pytest

from vam_stack import msgs
from vam_stack.msgs import MessageError

pytestmark = pytest.mark.unit


def _rgb(h=224, w=448, seed=0):
    return np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)


def test_cdr_bytes_start_with_little_endian_encapsulation_header():
    data = msgs.serialize(msgs.float32_msg(1.0))
    assert data[:4] == b"\x00\x01\x00\x00"  # CDR_LE, as rclpy and rosbag2 write it
    assert np.frombuffer(data[4:8], "<f4")[0] == 1.0


def test_image_rgb8_roundtrip_keeps_pixels_stamp_and_frame():
    img = _rgb()
    back = msgs.roundtrip(msgs.image_msg(img, 12.25, "camera_stacked"))
    assert (back.height, back.width, back.step, back.encoding) == (224, 448, 448 * 3, "rgb8")
    assert back.header.frame_id == "camera_stacked"
    assert msgs.time_to_seconds(back.header.stamp) == 12.25
    out = msgs.image_to_numpy(back)
    assert out.dtype == np.uint8 and out.shape == img.shape
    np.testing.assert_array_equal(out, img)


def test_image_noncontiguous_input_is_copied_correctly():
    img = _rgb(32, 64)[:, ::2]  # a strided view
    np.testing.assert_array_equal(msgs.image_to_numpy(msgs.roundtrip(msgs.image_msg(img, 0.0))), img)


def test_bgr8_is_returned_as_rgb_and_mono8_as_2d():
    img = _rgb(8, 10)
    bgr = msgs.roundtrip(msgs.image_msg(img[:, :, ::-1].copy(), 0.0, encoding="bgr8"))
    np.testing.assert_array_equal(msgs.image_to_numpy(bgr), img)
    np.testing.assert_array_equal(msgs.image_to_numpy(bgr, rgb=False), img[:, :, ::-1])
    gray = img[:, :, 0].copy()
    np.testing.assert_array_equal(
        msgs.image_to_numpy(msgs.roundtrip(msgs.image_msg(gray, 0.0, encoding="mono8"))), gray)


def test_image_with_row_padding_is_unpadded():
    img = _rgb(4, 5)
    msg = msgs.image_msg(img, 0.0)
    padded = np.zeros((4, 5 * 3 + 1), np.uint8)
    padded[:, :15] = img.reshape(4, 15)
    msg.step, msg.data = 16, padded.reshape(-1)
    np.testing.assert_array_equal(msgs.image_to_numpy(msgs.roundtrip(msg)), img)


@pytest.mark.parametrize("bad, match", [
    (np.zeros((4, 4, 3), np.float32), "uint8"),
    (np.zeros((4, 4, 4), np.uint8), "HxWx3"),
    (np.zeros((4, 4), np.uint8), "HxWx3"),
    (np.zeros((0, 4, 3), np.uint8), "empty"),
    ([[1, 2, 3]], "numpy array"),
])
def test_bad_images_are_rejected(bad, match):
    with pytest.raises(MessageError, match=match):
        msgs.image_msg(bad, 0.0)


def test_bad_image_encoding_and_inconsistent_messages_are_rejected():
    with pytest.raises(MessageError, match="'rgba8'"):
        msgs.image_msg(_rgb(2, 2), 0.0, encoding="rgba8")
    msg = msgs.image_msg(_rgb(4, 4), 0.0)
    msg.height = 5
    with pytest.raises(MessageError, match="expected height\\*step"):
        msgs.image_to_numpy(msg)
    msg = msgs.image_msg(_rgb(4, 4), 0.0)
    msg.encoding = "16UC1"
    with pytest.raises(MessageError, match="16UC1"):
        msgs.image_to_numpy(msg)


def test_joint_state_roundtrip_with_and_without_velocity():
    names = [f"left_joint{i}" for i in range(7)]
    pos = np.linspace(-1, 1, 7)
    back = msgs.joint_state_to_numpy(msgs.roundtrip(msgs.joint_state_msg(names, pos, stamp_s=3.5)))
    assert back.names == names and back.stamp_s == 3.5
    np.testing.assert_array_equal(back.position, pos)
    assert back.velocity.size == 0 and back.effort.size == 0
    full = msgs.joint_state_to_numpy(msgs.roundtrip(
        msgs.joint_state_msg(names, pos, velocity=pos * 2, effort=-pos, frame_id="base")))
    np.testing.assert_array_equal(full.velocity, pos * 2)
    np.testing.assert_array_equal(full.effort, -pos)
    assert full.frame_id == "base"


@pytest.mark.parametrize("names, pos, kw, match", [
    (["a", "b"], [1.0], {}, "2 entries"),
    (["a", "b"], [1.0, float("nan")], {}, "position\\[1\\] is not finite"),
    (["a", "a"], [1.0, 2.0], {}, "'a' appears twice"),
    ([], [], {}, "must not be empty"),
    ("ab", [1.0, 2.0], {}, "list of strings"),
    (["a", ""], [1.0, 2.0], {}, "name \\[1\\]"),
    (["a", "b"], [1.0, 2.0], {"velocity": [1.0]}, "velocity must have 2"),
    (["a"], ["x"], {}, "position must be numbers"),
])
def test_bad_joint_states_are_rejected(names, pos, kw, match):
    with pytest.raises(MessageError, match=match):
        msgs.joint_state_msg(names, pos, **kw)


def test_joint_state_reader_checks_sizes():
    msg = msgs.joint_state_msg(["a", "b"], [1.0, 2.0])
    msg.position = np.array([1.0])
    with pytest.raises(MessageError, match="2 names but 1 positions"):
        msgs.joint_state_to_numpy(msg)


def test_float32_roundtrip_rounds_to_single_precision_and_rejects_nonfinite():
    assert msgs.float32_value(msgs.roundtrip(msgs.float32_msg(0.1))) == float(np.float32(0.1))
    for bad in (float("nan"), float("inf"), 1e39, True, "1.0", None):
        with pytest.raises(MessageError):
            msgs.float32_msg(bad)


def test_float32_array_keeps_shape_and_labels():
    arr = np.arange(12, dtype=np.float64).reshape(3, 4) / 7
    msg = msgs.roundtrip(msgs.float32_array_msg(arr, ["row", "col"]))
    assert [d.label for d in msg.layout.dim] == ["row", "col"]
    assert [d.stride for d in msg.layout.dim] == [12, 4]
    np.testing.assert_allclose(msgs.float32_array_to_numpy(msg), arr, rtol=1e-6)
    with pytest.raises(MessageError, match="finite"):
        msgs.float32_array_msg([1.0, float("nan")])
    with pytest.raises(MessageError, match="2 labels"):
        msgs.float32_array_msg([1.0, 2.0], ["a", "b"])


def test_string_json_and_bool_roundtrip():
    assert msgs.roundtrip(msgs.string_msg("planning")).data == "planning"
    obj = {"step": np.int64(10), "tr": np.float32(1.5), "tr_steps": np.array([1.0, 2.0]),
           "branches_computed": ["cond"]}
    back = msgs.json_from_msg(msgs.roundtrip(msgs.json_msg(obj)))
    assert back == {"step": 10, "tr": 1.5, "tr_steps": [1.0, 2.0], "branches_computed": ["cond"]}
    assert msgs.roundtrip(msgs.bool_msg(True)).data is True
    with pytest.raises(MessageError, match="JSON"):
        msgs.json_msg({"tr": float("nan")})
    with pytest.raises(MessageError, match="NUL"):
        msgs.string_msg("a\x00b")
    with pytest.raises(MessageError, match="True/False"):
        msgs.bool_msg(1)
    with pytest.raises(MessageError, match="not JSON"):
        msgs.json_from_msg(msgs.string_msg("{oops"))


def test_diagnostics_from_dict_roundtrip():
    status = msgs.diagnostic_status("tr_monitor: telemetry", {"rate_hz": 2.0, "ok": True,
                                                              "phase": "planning"},
                                    level="warn", message="slow", hardware_id="gpu0")
    msg = msgs.roundtrip(msgs.diagnostic_array_msg([status], 5.0))
    d = msgs.diagnostics_to_dict(msg)
    assert d == {"tr_monitor: telemetry": {
        "level": "warn", "message": "slow", "hardware_id": "gpu0",
        "values": {"rate_hz": "2", "ok": "true", "phase": "planning"}}}
    simple = msgs.diagnostics_to_dict(msgs.roundtrip(msgs.diagnostic_array_msg({"cam": {"fps": 30}}, 0.0)))
    assert simple["cam"]["level"] == "ok" and simple["cam"]["values"] == {"fps": "30"}
    with pytest.raises(MessageError, match="'fatal'"):
        msgs.diagnostic_status("x", {}, level="fatal")
    with pytest.raises(MessageError, match="non-empty string"):
        msgs.diagnostic_status("x", {"": 1})


def test_time_conversion_is_exact_and_validated():
    t = msgs.time_msg(1.5)
    assert (t.sec, t.nanosec) == (1, 500_000_000)
    assert msgs.time_to_ns(msgs.time_msg(1_700_000_000.25)) == 1_700_000_000_250_000_000
    assert msgs.time_to_ns(msgs.time_from_ns(123_456_789_012)) == 123_456_789_012
    for bad in (-0.1, float("inf"), float("nan"), "1", 2.0**31):
        with pytest.raises(MessageError):
            msgs.time_msg(bad)


def test_deserialize_rejects_garbage_and_unknown_types():
    with pytest.raises(MessageError, match="cannot deserialize"):
        msgs.deserialize(b"\x00\x01\x00\x00\x05", "sensor_msgs/msg/Image")
    with pytest.raises(MessageError, match="unknown ROS 2 message type"):
        msgs.deserialize(b"", "sensor_msgs/msg/NoSuch")
    with pytest.raises(MessageError, match="not a ROS message"):
        msgs.serialize({"data": 1.0})
