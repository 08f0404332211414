"""The RealSense source end to end through pyrealsense2, with `rs.software_device()` cameras.

Frames with known pixels, hardware timestamps and frame numbers are injected through a
software sensor; the source under test finds the device by serial, opens the colour profile
on the sensor and reads through an `rs.syncer`, exactly as with a camera on USB.
"""
from __future__ import annotations

import time

import numpy as np
import pytest

from camera_bridge.config import BridgeConfig, CameraConfig
from camera_bridge.sources import CameraDisconnected, CameraError, EndOfStream, NoFrameYet, decode_counter
from camera_bridge.sources.synthetic import PatternRenderer

try:
    from camera_bridge.sources.realsense import RealSenseSource, import_pyrealsense2
    rs = import_pyrealsense2()
    SKIP_REASON = ""
except ImportError as e:  # the reason says what is missing (e.g. libusb-1.0-0)
    rs = None
    SKIP_REASON = str(e)

pytestmark = [pytest.mark.adapter, pytest.mark.skipif(rs is None, reason=SKIP_REASON)]
W, H = 640, 480


class FakeRealSense:
    """A software device with one colour sensor; `inject(k)` sends frame k."""

    def __init__(self, serial: str, device_clock_ms: float, fmt: str = "bgr8", fps: int = 30):
        self.serial = serial
        self.base_ms = device_clock_ms  # each device's hardware clock starts elsewhere
        self.device = rs.software_device()
        self.device.register_info(rs.camera_info.serial_number, serial)
        self.device.register_info(rs.camera_info.name, "Software RealSense")
        self.sensor = self.device.add_sensor("RGB Camera")
        intr = rs.intrinsics()
        intr.width, intr.height, intr.fx, intr.fy, intr.ppx, intr.ppy = W, H, 600.0, 600.0, W / 2, H / 2
        intr.model, intr.coeffs = rs.distortion.none, [0.0] * 5
        stream = rs.video_stream()
        stream.type, stream.index, stream.uid = rs.stream.color, 0, 0
        stream.width, stream.height, stream.fps, stream.bpp = W, H, fps, 3
        stream.fmt, stream.intrinsics = getattr(rs.format, fmt), intr
        self.profile = self.sensor.add_video_stream(stream).as_video_stream_profile()
        self.renderer = PatternRenderer(W, H, seed=int(serial[-1]))

    def inject(self, k: int) -> np.ndarray:
        image = self.renderer.render(k)  # BGR with counter k
        f = rs.software_video_frame()
        f.pixels, f.bpp, f.stride = image, 3, W * 3
        f.timestamp, f.domain = self.base_ms + k * 1000.0 / 30, rs.timestamp_domain.hardware_clock
        f.frame_number, f.profile = k, self.profile
        self.sensor.on_video_frame(f)
        return image


class Finder:
    """Device lookup by serial that a test can unplug and plug back."""

    def __init__(self, fakes):
        self.fakes = {f.serial: f for f in fakes}
        self.unplugged: set[str] = set()

    def __call__(self, serial: str):
        if serial not in self.fakes or serial in self.unplugged:
            raise CameraError("?", f"no RealSense with serial {serial!r}")
        return self.fakes[serial].device


def _cfg(name: str, serial: str, **kw) -> CameraConfig:
    return CameraConfig(name, kind="realsense", serial=serial, **kw)


def _read_until(src, seq: int, timeout_s: float = 5.0):
    """Poll until the SDK's thread has delivered frame `seq` (wall-clock wait, not a timing check)."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        try:
            frame = src.read_latest()
            if frame.seq == seq:
                return frame
        except NoFrameYet:
            pass
        time.sleep(0.002)
    raise AssertionError(f"frame {seq} never arrived from {src.name!r}")


def test_frames_pixels_timestamps_and_drops(clock):
    fake = FakeRealSense("900000000001", device_clock_ms=123_456.0)
    with RealSenseSource(_cfg("top", fake.serial), clock, find_device=Finder([fake])) as src:
        sent = fake.inject(0)
        first = _read_until(src, 0)
        assert np.array_equal(first.image, sent) and first.encoding == "bgr8"
        assert first.device_stamp_ms == pytest.approx(123_456.0)
        assert src.timestamp_domain == "hardware_clock"
        clock.advance(3 / 30 + 0.004)  # 4 ms later than the device clock says: latency
        fake.inject(3)  # frames 1 and 2 lost on the cable
        third = _read_until(src, 3)
        assert decode_counter(third.image) == 3
        assert third.stamp_s - first.stamp_s == pytest.approx(3 / 30)  # hardware spacing kept
        assert src.stats.dropped == 2


def test_unknown_serial_and_missing_profile_are_named(clock):
    fake = FakeRealSense("900000000002", device_clock_ms=0.0)
    with pytest.raises(CameraDisconnected, match="'wrong'.*no RealSense with serial '000'"):
        RealSenseSource(_cfg("wrong", "000"), clock, find_device=Finder([fake])).connect()
    with pytest.raises(CameraError, match=r"no colour profile 640x480@30 rgb8; available: \['640x480@30 bgr8'\]"):
        RealSenseSource(_cfg("top", fake.serial, encoding="rgb8"), clock, find_device=Finder([fake])).connect()


def test_camera_that_disappears_is_reopened(clock):
    fake = FakeRealSense("900000000003", device_clock_ms=50.0)
    finder = Finder([fake])
    src = RealSenseSource(_cfg("left_wrist", fake.serial), clock, find_device=finder)
    with src:
        fake.inject(0)
        _read_until(src, 0)
        finder.unplugged.add(fake.serial)
        clock.advance(1.2)  # no frames for longer than reconnect_after_ms
        with pytest.raises(CameraDisconnected, match="no frame for 1200 ms"):
            src.read_latest()
        with pytest.raises(CameraDisconnected, match="no RealSense with serial"):
            src.read_latest()  # reopening fails while unplugged
        finder.unplugged.clear()
        clock.advance(1.0)  # next attempt after reconnect_interval_s
        fake.base_ms = 0.0  # a re-enumerated camera restarts its clock
        deadline = time.monotonic() + 5.0
        while not src.is_connected and time.monotonic() < deadline:
            with pytest.raises((NoFrameYet, CameraDisconnected)):
                src.read_latest()
        fake.inject(0)
        frame = _read_until(src, 0)
        assert src.stats.reconnects == 1 and decode_counter(frame.image) == 0


def test_three_software_cameras_through_the_bridge(clock):
    from camera_bridge.bridge import CameraBridge

    names = ("top", "left_wrist", "right_wrist")
    fakes = [FakeRealSense(f"90000000001{i}", device_clock_ms=1e6 * (i + 1)) for i in range(3)]
    finder = Finder(fakes)
    cams = tuple(_cfg(n, f.serial) for n, f in zip(names, fakes))
    cfg = BridgeConfig(cameras=cams, window_frames=5, frame_skip=3, buffer_frames=15)
    sources = [RealSenseSource(c, clock, find_device=finder) for c in cams]
    with CameraBridge(cfg, sources=sources, clock=clock) as bridge:
        for k in range(16):
            for fake in fakes:
                fake.inject(k)
            deadline = time.monotonic() + 5.0
            while not bridge.tick().appended:  # wait for the SDK threads to deliver all three
                assert time.monotonic() < deadline, f"set {k} never matched: {bridge.tick().reason}"
                time.sleep(0.002)
            clock.advance(1 / 30)
        clock.advance(-1 / 30)
        win = bridge.window()
    assert win.ready, win.reasons
    assert win.frames.shape == (5, 168, 672, 3)
    for v in range(3):
        assert [decode_counter(f[:, v * 224:(v + 1) * 224]) for f in win.frames] == [3, 6, 9, 12, 15]
    assert np.all(win.skew_ms < 1.0)  # three device clocks mapped onto one host clock


def test_record_then_play_back_the_sdk_file(clock, tmp_path):
    fake = FakeRealSense("900000000004", device_clock_ms=7_000.0)
    path = tmp_path / "top.db3"
    live = RealSenseSource(_cfg("top", fake.serial, record_to=str(path)), clock, find_device=Finder([fake]))
    with live:
        next_due = time.monotonic()
        for k in range(8):  # the recorder keeps arrival times: inject at the camera's 30 Hz
            next_due += 1 / 30
            fake.inject(k)
            _read_until(live, k)
            clock.advance(1 / 30)
            time.sleep(max(next_due - time.monotonic(), 0.0))
    assert live.recordings == [str(path)] and path.stat().st_size > 0

    cfg = _cfg("top", fake.serial, device=str(path), max_age_ms=1e6, reconnect_after_ms=2e6)
    seen = {}
    with RealSenseSource(cfg, clock) as replay:
        deadline = time.monotonic() + 10.0
        with pytest.raises(EndOfStream, match="end of recording"):
            while time.monotonic() < deadline:  # the SDK replays at the recorded rate, then stops
                try:
                    frame = replay.read_latest()
                    seen[frame.seq] = (decode_counter(frame.image), frame.device_stamp_ms)
                except NoFrameYet:
                    pass
                time.sleep(0.002)
    # A loaded machine may skip a frame (the syncer keeps the newest); what arrives is exact.
    assert len(seen) >= 4 and max(seen) == 7, f"replayed frames {sorted(seen)}"
    for k, (counter, device_ms) in seen.items():
        assert counter == k and device_ms == pytest.approx(7_000.0 + k * 1000 / 30)


def test_recording_of_another_camera_is_refused(clock, tmp_path):
    fake = FakeRealSense("900000000005", device_clock_ms=0.0)
    path = tmp_path / "other.db3"
    with RealSenseSource(_cfg("top", fake.serial, record_to=str(path)), clock, find_device=Finder([fake])) as src:
        fake.inject(0)
        _read_until(src, 0)
    with pytest.raises(CameraError, match="is of serial '900000000005', config says '123'"):
        RealSenseSource(_cfg("top", "123", device=str(path)), clock).connect()
