"""Simulated views through the camera interface and the unchanged camera bridge."""
import numpy as np
import pytest

from camera_bridge.config import CameraConfig
from camera_bridge.sources.base import CameraError, NoFrameYet
from vam_sim.yam_mujoco.camera import MujocoCameraSource


@pytest.mark.adapter
def test_each_view_renders_at_the_configured_size(robot, render_ok):
    images = {v: robot.sim.render(v) for v in robot.sim.cfg.cameras}
    assert list(images) == ["top", "left_wrist", "right_wrist"]
    for view, img in images.items():
        assert img.shape == (168, 224, 3) and img.dtype == np.uint8, view
        assert img.std() > 5, f"{view} is blank"
    assert not np.array_equal(images["left_wrist"], images["right_wrist"])


@pytest.mark.adapter
def test_source_delivers_one_frame_per_simulated_period(robot, render_ok):
    cam = robot.bridge_cfg.cameras[0]
    src = MujocoCameraSource(cam, robot.sim)
    with src:
        first = src.read_latest()
        assert (first.seq, first.stamp_s, first.encoding) == (0, 0.0, "rgb8")
        assert src.read_latest() is first  # no new simulated time: no new render
        robot.sim.step_control()
        second = src.read_latest()
        assert second.seq == 1 and second.stamp_s == pytest.approx(1 / 30)
        src.paused = True
        for _ in range(4):
            robot.sim.step_control()
        with pytest.raises(CameraError, match="stale"):
            src.read_latest()


@pytest.mark.adapter
def test_bridge_stacks_three_views_into_the_policy_frame(robot, render_ok):
    bridge = robot.bridge()
    with bridge:
        for _ in range(49):
            assert bridge.tick().appended
            robot.sim.step_control()
        assert bridge.tick().appended
        w = bridge.window()
    assert w.ready, w.reasons
    assert w.frames.shape == (17, 168, 672, 3)
    assert np.allclose(np.diff(w.stamps_s), 0.1)  # frame-skip 3 at 30 Hz
    top = robot.sim.render("top")
    assert np.array_equal(w.frames[-1][:, :224], top)  # native size: no resampling of the view


@pytest.mark.unit
def test_source_rejects_mismatched_config(robot):
    with pytest.raises(CameraError, match="640x480"):
        MujocoCameraSource(CameraConfig("top", kind="push", width=640, height=480, encoding="rgb8"), robot.sim)
    with pytest.raises(CameraError, match="'bgr8'"):
        MujocoCameraSource(CameraConfig("top", kind="push", width=224, height=168), robot.sim)
    with pytest.raises(CameraError, match="not 'front'"):
        MujocoCameraSource(CameraConfig("front", kind="push", width=224, height=168, encoding="rgb8"), robot.sim)
    src = MujocoCameraSource(CameraConfig("top", kind="push", width=224, height=168, encoding="rgb8"), robot.sim)
    src.paused = True
    with src, pytest.raises(NoFrameYet):
        src.read_latest()
