"""Config files load; bad values are rejected with messages quoting them."""
from __future__ import annotations

import pytest

from camera_bridge.config import BridgeConfig, CameraConfig, load_bridge_config
from vam_stack.config import ConfigError, from_dict
from vam_stack.paths import config_dir

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("name, shape, span", [
    ("cameras.yaml", (168, 672, 3), 49),
    ("cameras_synthetic.yaml", (168, 672, 3), 49),
    ("cameras_libero.yaml", (224, 448, 3), 33),
])
def test_shipped_configs_load(name, shape, span):
    cfg = load_bridge_config(config_dir() / name)
    assert cfg.stacked_shape == shape
    assert cfg.span_frames == span
    assert cfg.buffer_frames >= cfg.span_frames


def test_robot_config_is_the_paper_geometry():
    cfg = load_bridge_config()
    assert [c.name for c in cfg.cameras] == ["top", "left_wrist", "right_wrist"]
    assert all(c.kind == "realsense" and c.fps == 30.0 for c in cfg.cameras)
    assert (cfg.window_frames, cfg.frame_skip, cfg.buffer_frames) == (17, 3, 51)


@pytest.mark.parametrize("field, value, fragment", [
    ("kind", "webcam", "'webcam'"),
    ("encoding", "yuyv", "'yuyv'"),
    ("width", 4, "4"),
    ("max_age_ms", -1.0, "-1.0"),
    ("name", "top view", "'top view'"),
])
def test_camera_config_rejects_bad_values(field, value, fragment):
    with pytest.raises(ConfigError, match=fragment):
        CameraConfig(**{"name": "top", field: value})


def test_realsense_needs_serial_and_opencv_needs_device():
    with pytest.raises(ConfigError, match="serial"):
        CameraConfig("top", kind="realsense")
    with pytest.raises(ConfigError, match="device"):
        CameraConfig("top", kind="opencv")


def test_bridge_config_rejects_inconsistent_window():
    with pytest.raises(ConfigError, match="buffer_frames .40."):
        BridgeConfig(buffer_frames=40)  # 17 frames with skip 3 need 49
    with pytest.raises(ConfigError, match="unique"):
        BridgeConfig(cameras=(CameraConfig("top"), CameraConfig("top")))
    with pytest.raises(ConfigError, match="fps 15.0"):
        BridgeConfig(cameras=(CameraConfig("top", fps=15.0),))


def test_unknown_yaml_key_gets_a_hint():
    with pytest.raises(ConfigError, match="did you mean 'frame_skip'"):
        from_dict(BridgeConfig, {"frame_skips": 3})
