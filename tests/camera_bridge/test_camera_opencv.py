"""OpenCV source: video files written with cv2.VideoWriter, and a live camera behind a fake capture."""
from __future__ import annotations

import time

import cv2
import numpy as np
import pytest

from camera_bridge.bridge import CameraBridge
from camera_bridge.config import BridgeConfig, CameraConfig
from camera_bridge.sources import CameraDisconnected, CameraError, EndOfStream, OpenCVSource, decode_counter
from camera_bridge.sources.synthetic import PatternRenderer

pytestmark = pytest.mark.adapter
N_FRAMES = 24


@pytest.fixture(scope="module")
def video_file(tmp_path_factory) -> str:
    """A 24-frame 640x480 30 fps MJPG file of the synthetic pattern, counter k in frame k."""
    path = str(tmp_path_factory.mktemp("video") / "replay.avi")
    writer = cv2.VideoWriter(path, cv2.VideoWriter_fourcc(*"MJPG"), 30.0, (640, 480))
    assert writer.isOpened(), "OpenCV cannot write MJPG here"
    renderer = PatternRenderer(640, 480, seed=1)
    for k in range(N_FRAMES):
        writer.write(renderer.render(k))
    writer.release()
    return path


def _cam(path: str, **kw) -> CameraConfig:
    return CameraConfig("top", kind="opencv", device=path, **kw)


def test_realtime_replay_follows_the_clock(clock, video_file):
    with OpenCVSource(_cam(video_file), clock) as src:
        assert src.file_fps == pytest.approx(30.0)
        t0 = clock.t
        first = src.read_latest()
        assert first.seq == 0 and decode_counter(first.image) == 0
        assert first.image.shape == (480, 640, 3) and first.encoding == "bgr8"
        clock.advance(5.2 / 30)  # five frame periods later: frame 5 is due
        frame = src.read_latest()
        assert frame.seq == 5 and decode_counter(frame.image) == 5
        assert frame.stamp_s == pytest.approx(t0 + 5 / 30)
        assert src.stats.dropped == 4  # frames 1-4 were decoded past, never returned


def test_step_mode_returns_every_frame_then_ends(clock, video_file):
    with OpenCVSource(_cam(video_file, realtime=False, max_age_ms=1e6, reconnect_after_ms=2e6), clock) as src:
        counters = [decode_counter(src.read_latest().image) for _ in range(N_FRAMES)]
        assert counters == list(range(N_FRAMES))
        with pytest.raises(EndOfStream, match="end of video file"):
            src.read_latest()
        assert not src.is_connected
        with pytest.raises(CameraDisconnected, match="not reopened"):
            src.read_latest()  # a finished file is not reopened by itself


def test_loop_continues_the_time_line(clock, video_file):
    with OpenCVSource(_cam(video_file, realtime=False, loop=True, max_age_ms=1e6, reconnect_after_ms=2e6), clock) as src:
        frames = [src.read_latest() for _ in range(N_FRAMES + 3)]
    assert [decode_counter(f.image) for f in frames[N_FRAMES:]] == [0, 1, 2]
    stamps = np.array([f.stamp_s for f in frames])
    assert np.allclose(np.diff(stamps), 1 / 30)


def test_missing_file_and_absent_camera_are_reported(clock, tmp_path):
    with pytest.raises(CameraDisconnected, match="video file not found"):
        OpenCVSource(_cam(str(tmp_path / "nope.avi")), clock).connect()
    with pytest.raises(CameraDisconnected, match="could not open '/dev/video99'"):
        OpenCVSource(_cam("/dev/video99"), clock).connect()


def test_bridge_replays_three_files_into_a_window(clock, video_file):
    cams = tuple(CameraConfig(n, kind="opencv", device=video_file) for n in ("top", "left_wrist", "right_wrist"))
    cfg = BridgeConfig(cameras=cams, window_frames=5, frame_skip=3, buffer_frames=13)
    with CameraBridge(cfg, clock=clock) as bridge:
        for _ in range(2 * 20):  # 20 file frames at 30 Hz, ticked at 60 Hz
            bridge.tick()
            clock.advance(1 / 60)
        clock.advance(-1 / 60)
        win = bridge.window()
    assert win.ready, win.reasons
    assert win.frames.shape == (5, 168, 672, 3)
    counters = [decode_counter(f[:, 448:]) for f in win.frames]
    assert np.all(np.diff(counters) == 3) and counters[-1] == 19


def test_opencv_rejects_rgb_config():
    with pytest.raises(Exception, match="OpenCV delivers bgr8"):
        OpenCVSource(CameraConfig("top", kind="opencv", device="0", encoding="rgb8"))


class FakeCapture:
    """Stands in for a USB camera behind cv2.VideoCapture: read() blocks ~5 ms per frame;
    `FakeCapture.unplugged` makes reads fail and opening impossible."""

    unplugged = False
    opened: list = []

    def __init__(self, target):
        self.target, self.k, self.props = target, 0, {}
        self.renderer = PatternRenderer(640, 480, seed=3)
        FakeCapture.opened.append(self)

    def isOpened(self):
        return not FakeCapture.unplugged

    def set(self, prop, value):
        self.props[prop] = value
        return True

    def read(self):
        time.sleep(0.005)
        if FakeCapture.unplugged:
            return False, None
        self.k += 1
        return True, self.renderer.render(self.k)

    def release(self):
        self.released = True


def _wait_for(src, predicate, timeout_s=5.0):
    """Read until `predicate(frame)` holds (wall-clock wait for the reader thread)."""
    end = time.monotonic() + timeout_s
    last_error = None
    while time.monotonic() < end:
        try:
            frame = src.read_latest(max_age_ms=1e6)
            if predicate(frame):
                return frame
        except CameraError as e:
            last_error = e
        time.sleep(0.002)
    raise AssertionError(f"condition never met on {src.name!r}; last error {last_error}")


def test_live_camera_thread_unplug_and_return(monkeypatch):
    monkeypatch.setattr(cv2, "VideoCapture", FakeCapture)
    FakeCapture.unplugged, FakeCapture.opened = False, []
    cfg = CameraConfig("left_wrist", kind="opencv", device="2", reconnect_interval_s=0.05)
    src = OpenCVSource(cfg)  # wall clock: the reader thread stamps frames when read() returns
    with src:
        first = _wait_for(src, lambda f: True)
        later = _wait_for(src, lambda f: f.seq >= first.seq + 3)
        assert later.stamp_s > first.stamp_s and decode_counter(later.image) == later.seq + 1
        cap = FakeCapture.opened[0]
        assert cap.target == 2 and cap.props[cv2.CAP_PROP_BUFFERSIZE] == 1
        assert cap.props[cv2.CAP_PROP_FRAME_WIDTH] == 640
        FakeCapture.unplugged = True
        with pytest.raises(CameraDisconnected, match="read\\(\\) failed on '2'"):
            end = time.monotonic() + 5.0
            while time.monotonic() < end:
                src.read_latest(max_age_ms=1e6)
                time.sleep(0.002)
        assert getattr(cap, "released", False)  # the reader thread released its capture
        FakeCapture.unplugged = False
        back = _wait_for(src, lambda f: True)
        assert src.stats.reconnects == 1 and len(FakeCapture.opened) >= 2
        assert back.stamp_s > later.stamp_s
