"""numpy <-> ROS 2 message conversions: CDR round trips and input validation."""
from __future__ import annotations

import numpy as np
import pytest

from vam_stack import image_msgs, msg_base, msgs
from vam_stack.msg_base import MessageError

pytestmark = pytest.mark.unit


def _rgb(h=224, w=448, seed=0):
    return np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)


def test_cdr_bytes_start_with_little_endian_encapsulation_header():
    data = msgs.serialize(msgs.float32_msg(1.0))
    assert data[:4] == b"\x00\x01\x00\x00"  # CDR_LE, as rclpy and rosbag2 write it
    assert np.frombuffer(data[4:8], "<f4")[0] == 1.0


def test_image_rgb8_roundtrip_keeps_pixels_stamp_and_frame():
    img = _rgb()
    back = msgs.roundtrip(image_msgs.image_msg(img, 12.25, "camera_stacked"))
    assert (back.height, back.width, back.step, back.encoding) == (224, 448, 448 * 3, "rgb8")
    assert back.header.frame_id == "camera_stacked"
    assert msgs.time_to_seconds(back.header.stamp) == 12.25
    out = image_msgs.image_to_numpy(back)
    assert out.dtype == np.uint8 and out.shape == img.shape
    np.testing.assert_array_equal(out, img)


def test_image_noncontiguous_input_is_copied_correctly():
    img = _rgb(32, 64)[:, ::2]  # a strided view
    np.testing.assert_array_equal(image_msgs.image_to_numpy(msgs.roundtrip(image_msgs.image_msg(img, 0.0))), img)


def test_bgr8_is_returned_as_rgb_and_mono8_as_2d():
    img = _rgb(8, 10)
    bgr = msgs.roundtrip(image_msgs.image_msg(img[:, :, ::-1].copy(), 0.0, encoding="bgr8"))
    np.testing.assert_array_equal(image_msgs.image_to_numpy(bgr), img)
    np.testing.assert_array_equal(image_msgs.image_to_numpy(bgr, rgb=False), img[:, :, ::-1])
    gray = img[:, :, 0].copy()
    np.testing.assert_array_equal(
        image_msgs.image_to_numpy(msgs.roundtrip(image_msgs.image_msg(gray, 0.0, encoding="mono8"))), gray)


def test_image_with_row_padding_is_unpadded():
    img = _rgb(4, 5)
    msg = image_msgs.image_msg(img, 0.0)
    padded = np.zeros((4, 5 * 3 + 1), np.uint8)
    padded[:, :15] = img.reshape(4, 15)
    msg.step, msg.data = 16, padded.reshape(-1)
    np.testing.assert_array_equal(image_msgs.image_to_numpy(msgs.roundtrip(msg)), img)


@pytest.mark.parametrize("bad, match", [
    (np.zeros((4, 4, 3), np.float32), "uint8"),
    (np.zeros((4, 4, 4), np.uint8), "HxWx3"),
    (np.zeros((4, 4), np.uint8), "HxWx3"),
    (np.zeros((0, 4, 3), np.uint8), "empty"),
    ([[1, 2, 3]], "numpy array"),
])
def test_bad_images_are_rejected(bad, match):
    with pytest.raises(MessageError, match=match):
        image_msgs.image_msg(bad, 0.0)


def test_bad_image_encoding_and_inconsistent_messages_are_rejected():
    with pytest.raises(MessageError, match="'rgba8'"):
        image_msgs.image_msg(_rgb(2, 2), 0.0, encoding="rgba8")
    msg = image_msgs.image_msg(_rgb(4, 4), 0.0)
    msg.height = 5
    with pytest.raises(MessageError, match="expected height\\*step"):
        image_msgs.image_to_numpy(msg)
    msg = image_msgs.image_msg(_rgb(4, 4), 0.0)
    msg.encoding = "16UC1"
    with pytest.raises(MessageError, match="16UC1"):
        image_msgs.image_to_numpy(msg)


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
    t = msg_base.time_msg(1.5)
    assert (t.sec, t.nanosec) == (1, 500_000_000)
    assert msg_base.time_to_ns(msg_base.time_msg(1_700_000_000.25)) == 1_700_000_000_250_000_000
    assert msg_base.time_to_ns(msgs.time_from_ns(123_456_789_012)) == 123_456_789_012
    for bad in (-0.1, float("inf"), float("nan"), "1", 2.0**31):
        with pytest.raises(MessageError):
            msg_base.time_msg(bad)


def test_deserialize_rejects_garbage_and_unknown_types():
    with pytest.raises(MessageError, match="cannot deserialize"):
        msgs.deserialize(b"\x00\x01\x00\x00\x05", "sensor_msgs/msg/Image")
    with pytest.raises(MessageError, match="unknown ROS 2 message type"):
        msgs.deserialize(b"", "sensor_msgs/msg/NoSuch")
    with pytest.raises(MessageError, match="not a ROS message"):
        msgs.serialize({"data": 1.0})


# --- compressed images (image_transport's compressed transport) -----------------------------

def _scene(h=168, w=672):
    """A smooth camera-like RGB frame (gradients, a ripple, a flat red block): what JPEG is for."""
    y, x = np.mgrid[0:h, 0:w]
    img = np.stack([255 * x / (w - 1), 255 * y / (h - 1), 128 + 60 * np.sin(x / 17.0) * np.cos(y / 11.0)], -1)
    img[h // 4: h // 2, w // 5: w // 3] = (200, 30, 30)
    return img.astype(np.uint8)


def test_compressed_image_roundtrip_is_close_and_keeps_stamp_frame_and_format():
    img = _scene()
    msg = msgs.roundtrip(image_msgs.compressed_image_msg(img, 12.25, "camera_stacked", quality=90))
    assert msg_base.msgtype_of(msg) == "sensor_msgs/msg/CompressedImage"
    assert msg.format == "rgb8; jpeg compressed bgr8"       # compressed_image_transport's string for rgb8
    assert msg.header.frame_id == "camera_stacked" and msgs.time_to_seconds(msg.header.stamp) == 12.25
    assert bytes(msg.data[:3]) == b"\xff\xd8\xff" and msg.data.size < img.size / 10
    out = image_msgs.compressed_image_to_numpy(msg)
    assert out.dtype == np.uint8 and out.shape == img.shape
    err = np.abs(out.astype(int) - img)
    assert err.mean() < 2.0 and np.percentile(err, 99) <= 8, "colours swapped or JPEG far off"
    assert abs(int(out[60, 180, 0]) - 200) < 8 and out[60, 180, 2] < 40   # red stays red (RGB order)
    assert image_msgs.compressed_image_to_numpy(msg, rgb=False).shape == img.shape


def test_quality_trades_size_for_error_and_is_validated():
    img = _scene()
    small, big = (image_msgs.compressed_image_msg(img, 0.0, quality=q) for q in (20, 95))
    assert small.data.size < big.data.size
    err = [np.abs(image_msgs.compressed_image_to_numpy(m).astype(int) - img).mean() for m in (small, big)]
    assert err[1] < err[0]
    assert image_msgs.JPEG_QUALITY_DEFAULT == 95                   # compressed_image_transport's jpeg_quality default
    for bad in (0, 101, 90.0, True, "90"):
        with pytest.raises(MessageError, match="JPEG quality must be an integer in \\[1, 100\\]"):
            image_msgs.compressed_image_msg(img, 0.0, quality=bad)


def test_compress_image_copies_the_raw_header_and_bgr8_mono8_keep_their_order():
    img = _scene(24, 32)
    stamp = msgs.time_from_ns(1_700_000_000_123_456_789)
    raw = image_msgs.image_msg(img, stamp, "wrist_camera")
    jpeg = image_msgs.compress_image(raw, 95)
    assert jpeg.header == raw.header and jpeg.format == "rgb8; jpeg compressed bgr8"
    bgr = image_msgs.compress_image(image_msgs.image_msg(img[:, :, ::-1].copy(), 0.0, encoding="bgr8"))
    assert bgr.format == "bgr8; jpeg compressed bgr8"
    assert np.abs(image_msgs.compressed_image_to_numpy(bgr).astype(int) - img).mean() < 3
    assert np.abs(image_msgs.compressed_image_to_numpy(bgr, rgb=False).astype(int) - img[:, :, ::-1]).mean() < 3
    gray = image_msgs.compressed_image_msg(img[:, :, 0].copy(), 0.0, encoding="mono8")
    assert gray.format == "mono8; jpeg compressed mono8"
    assert image_msgs.compressed_image_to_numpy(gray).shape == (24, 32)
    legacy = image_msgs.compressed_image_msg(img, 0.0)
    legacy.format = "jpeg"                                  # older publishers: BGR inside, no encoding named
    assert np.abs(image_msgs.compressed_image_to_numpy(legacy).astype(int) - img).mean() < 3
    np.testing.assert_array_equal(image_msgs.jpeg_roundtrip(img), image_msgs.compressed_image_to_numpy(image_msgs.compress_image(
        image_msgs.image_msg(img, 0.0))))


@pytest.mark.parametrize("fmt", ["rgb8", "rgb8; jpeg", "rgba8; jpeg compressed bgr8", "rgb8; jpeg compressed mono8",
                                 "16UC1; jpeg compressed bgr8", "rgb8; h264 compressed bgr8", "", "JPEG"])
def test_bad_format_strings_are_rejected_by_name(fmt):
    msg = image_msgs.compressed_image_msg(_scene(8, 8), 0.0)
    msg.format = fmt
    with pytest.raises(MessageError, match=f"unsupported CompressedImage format {fmt!r}"):
        image_msgs.compressed_image_to_numpy(msg)


def test_undecodable_data_and_unexpected_shapes_are_rejected():
    good = image_msgs.compressed_image_msg(_scene(16, 24), 0.0)
    cases = [(np.zeros(0, np.uint8), "has no data"),
             (np.arange(64, dtype=np.uint8), "starting 00010203\\) is not jpeg data"),
             (good.data[:40], "cannot decode 40 bytes of jpeg data"),
             (np.concatenate([good.data[:3], np.zeros(200, np.uint8)]), "cannot decode 203 bytes")]
    for data, match in cases:
        msg = image_msgs.compressed_image_msg(_scene(16, 24), 0.0)
        msg.data = data
        with pytest.raises(MessageError, match=match):
            image_msgs.compressed_image_to_numpy(msg)
    png = image_msgs.compressed_image_msg(_scene(16, 24), 0.0)
    png.format = "rgb8; png compressed bgr8"                # says PNG, holds a JPEG
    with pytest.raises(MessageError, match="is not png data"):
        image_msgs.compressed_image_to_numpy(png)
    gray = image_msgs.compressed_image_msg(_scene(16, 24)[:, :, 0].copy(), 0.0, encoding="mono8")
    gray.format = "rgb8; jpeg compressed bgr8"              # one channel inside, the format says three
    with pytest.raises(MessageError, match="shape \\(16, 24\\); format 'rgb8; jpeg compressed bgr8' says bgr8"):
        image_msgs.compressed_image_to_numpy(gray)
    with pytest.raises(MessageError, match="shape \\(16, 24, 3\\), expected \\(24, 16, 3\\)"):
        image_msgs.compressed_image_to_numpy(good, shape=(24, 16, 3))
    with pytest.raises(MessageError, match="HxWx3"):
        image_msgs.compressed_image_msg(np.zeros((4, 4), np.uint8), 0.0)
