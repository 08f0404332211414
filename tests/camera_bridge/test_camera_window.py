"""Frame-skip selection and order, geometry, colour order, buffer readiness."""
from __future__ import annotations

import cv2
import numpy as np
import pytest

from camera_bridge.bridge import CameraBridge
from camera_bridge.config import BridgeConfig, CameraConfig, load_bridge_config
from camera_bridge.preprocess import ViewWriter
from camera_bridge.sources import Frame, PushSource, SyntheticSource, decode_counter
from camera_bridge.window import FrameRing
from vam_stack.paths import config_dir


@pytest.mark.unit
def test_ring_indices_are_oldest_first_with_skip():
    ring = FrameRing(51, (2, 2, 3))
    for k in range(60):  # wraps around the 51 slots
        ring.next_slot()[...] = k % 256
        ring.commit(stamp_s=k / 30.0, skew_ms=0.0)
    idx = ring.indices(17, 3)
    values = ring.frames[idx, 0, 0, 0].astype(int)
    assert list(values) == list(range(59 - 48, 60, 3))  # 11, 14, ..., 59: newest last
    assert np.all(np.diff(ring.stamps[idx]) > 0)
    gap, _, _ = ring.largest_gap(17, 3)
    assert gap == pytest.approx(1000 / 30.0)


@pytest.mark.unit
def test_window_has_17_frames_every_third_source_frame(clock, synthetic_config, run_ticks):
    cfg = synthetic_config()
    with CameraBridge(cfg, clock=clock) as bridge:
        run_ticks(bridge, clock, 1.0)
        early = bridge.window()
        assert not early.ready and early.frames is None
        assert any("buffer holds" in r for r in early.reasons)
        run_ticks(bridge, clock, 1.5)
        win = bridge.window()
    assert win.ready, win.reasons
    assert win.frames.shape == (17, 168, 672, 3) and win.frames.dtype == np.uint8
    for view in range(3):
        counters = [decode_counter(f[:, view * 224:(view + 1) * 224]) for f in win.frames]
        assert np.all(np.diff(counters) == 3), counters
    newest_source_frame = int(np.floor((clock.t - 1.0 / 60 - 1000.0) * 30 + 1e-9))
    assert counters[-1] == newest_source_frame  # the newest frame is in the clip
    assert np.allclose(np.diff(win.stamps_s), 0.1)  # 10 Hz clip
    assert np.all(win.skew_ms == 0.0)


@pytest.mark.unit
@pytest.mark.parametrize("interpolation", ["pyramid", "area", "linear"])
def test_views_are_rgb_and_in_config_order(clock, interpolation):
    cams = tuple(CameraConfig(n, kind="push") for n in ("top", "left_wrist", "right_wrist"))
    cfg = BridgeConfig(cameras=cams, interpolation=interpolation, window_frames=5, frame_skip=1, buffer_frames=5)
    sources = [PushSource(c, clock) for c in cams]
    bgr = {"top": (255, 0, 0), "left_wrist": (0, 255, 0), "right_wrist": (0, 0, 255)}  # blue, green, red
    with CameraBridge(cfg, sources=sources, clock=clock) as bridge:
        for _ in range(5):
            for s in sources:
                s.push(np.full((480, 640, 3), bgr[s.name], np.uint8))
            assert bridge.tick().appended
            clock.advance(1 / 30)
        clock.advance(-1 / 30)
        win = bridge.window()
    assert win.ready, win.reasons
    frame = win.frames[-1]
    assert tuple(frame[80, 100]) == (0, 0, 255)  # top was blue in BGR: RGB blue
    assert tuple(frame[80, 224 + 100]) == (0, 255, 0)
    assert tuple(frame[80, 448 + 100]) == (255, 0, 0)  # right_wrist was red


@pytest.mark.unit
def test_libero_geometry_two_views_224(clock):
    cfg = load_bridge_config(config_dir() / "cameras_libero.yaml")
    sources = [PushSource(c, clock) for c in cfg.cameras]
    rng = np.random.default_rng(0)
    with CameraBridge(cfg, sources=sources, clock=clock) as bridge:
        last = None
        for k in range(40):
            last = [rng.integers(0, 256, (224, 224, 3), dtype=np.uint8) for _ in sources]
            for s, img in zip(sources, last):
                s.push(img)
            assert bridge.tick().appended
            clock.advance(1 / 20)
        clock.advance(-1 / 20)
        win = bridge.window()
    assert win.ready, win.reasons
    assert win.frames.shape == (17, 224, 448, 3)
    assert np.array_equal(win.frames[-1, :, :224], last[0])  # rgb8 at view size: copied unchanged
    assert np.array_equal(win.frames[-1, :, 224:], last[1])
    assert np.allclose(np.diff(win.stamps_s), 0.1)


@pytest.mark.unit
def test_counter_survives_resize():
    src = SyntheticSource(CameraConfig("top"), clock=lambda: 0.0)
    for k in (0, 1, 1234, 65535):
        img = src._renderer.render(k)
        small = cv2.resize(img, (224, 168), interpolation=cv2.INTER_AREA)
        assert decode_counter(img) == k and decode_counter(small) == k


@pytest.mark.unit
def test_window_frames_are_a_copy(clock, synthetic_config, run_ticks):
    cfg = synthetic_config(window_frames=5, frame_skip=3, buffer_frames=13)
    bridge = CameraBridge(cfg, clock=clock)
    bridge.connect()
    run_ticks(bridge, clock, 0.5)
    win = bridge.window()
    before = win.frames.copy()
    run_ticks(bridge, clock, 0.5)
    assert np.array_equal(win.frames, before)
    bridge.close()
    bridge.close()  # idempotent


def _alias(interpolation: str) -> float:
    """Output amplitude (1.0 = full) of a 0.33 cycles/px sine resized 640 -> 224 px wide.

    The output can show at most 0.175 cycles per source px, so anything left is aliasing."""
    writer = ViewWriter(BridgeConfig(interpolation=interpolation))
    x = np.arange(640, dtype=np.float32)
    row = (128 + 100 * np.sin(2 * np.pi * 0.33 * x)).astype(np.uint8)
    image = np.ascontiguousarray(np.broadcast_to(row[None, :, None], (480, 640, 3)))
    out = np.empty((168, 224, 3), np.uint8)
    writer.write(Frame("top", image, "bgr8", 0.0, 0), out)
    return float(out[..., 0].astype(np.float32).std() / (100 / np.sqrt(2)))


@pytest.mark.unit
def test_default_resize_filter_suppresses_aliasing():
    assert BridgeConfig().interpolation == "pyramid"
    assert _alias("pyramid") < 0.10
    assert _alias("area") < 0.10
    assert _alias("linear") > 0.5  # the unfiltered resize really aliases: the probe works


@pytest.mark.unit
def test_latest_is_the_newest_frame_of_the_window(clock, synthetic_config, run_ticks):
    with CameraBridge(synthetic_config(), clock=clock) as bridge:
        run_ticks(bridge, clock, 0.2)
        clock.advance(-1 / 60)
        now = bridge.latest()
        assert now.ready and now.frames.shape == (1, 168, 672, 3)
        assert not bridge.window().ready  # 17 frames need 1.6 s of history, one frame does not
        run_ticks(bridge, clock, 2.0)
        clock.advance(-1 / 60)
        assert np.array_equal(bridge.latest().frames[0], bridge.window().frames[-1])
        with pytest.raises(ValueError, match="does not fit the 51-frame buffer"):
            bridge.window(frames=18, skip=3)


@pytest.mark.unit
def test_ring_window_pads_at_an_episode_start_and_skips():
    w = FrameRing(5, (1, 1, 3))                        # span (3 - 1) * 2 + 1
    w.push(np.full((1, 1, 3), 0))
    assert w.window(3, 2, pad=True)[:, 0, 0, 0].tolist() == [0, 0, 0]
    with pytest.raises(RuntimeError, match="not ready: 1 of 5"):
        w.window(3, 2)
    for i in range(1, 7):
        w.push(np.full((1, 1, 3), i))
    assert w.window(3, 2)[:, 0, 0, 0].tolist() == [2, 4, 6]
    w1 = FrameRing(4, (1, 1, 3))
    for i in range(2):
        w1.push(np.full((1, 1, 3), i))
    assert w1.window(4, 1, pad=True)[:, 0, 0, 0].tolist() == [0, 0, 0, 1]
    w1.clear()
    with pytest.raises(RuntimeError, match="empty"):
        w1.window(4, 1, pad=True)
