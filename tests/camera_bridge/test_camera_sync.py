"""Timestamp matching: within and beyond tolerance, skew reported, no view repeated."""
from __future__ import annotations

import numpy as np
import pytest

from camera_bridge.bridge import CameraBridge
from camera_bridge.config import CameraConfig
from camera_bridge.sources import Frame, SyntheticSource
from camera_bridge.sync import Synchroniser

pytestmark = pytest.mark.unit
IMG = np.zeros((2, 2, 3), np.uint8)


def frame(cam: str, t: float, seq: int = 0) -> Frame:
    return Frame(cam, IMG, "bgr8", t, seq)


def test_match_within_tolerance_reports_skew():
    sync = Synchroniser(["a", "b", "c"], tolerance_ms=10.0)
    sync.add(frame("a", 1.000))
    sync.add(frame("b", 1.004))
    assert "no frames yet from 'c'" in sync.match().reason
    sync.add(frame("c", 0.998))
    m = sync.match()
    assert m.frames is not None and [f.camera for f in m.frames] == ["a", "b", "c"]
    assert m.skew_ms == pytest.approx(6.0)
    assert m.stamp_s == pytest.approx((1.000 + 1.004 + 0.998) / 3)


def test_beyond_tolerance_names_the_camera():
    sync = Synchroniser(["a", "b", "c"], tolerance_ms=10.0)
    sync.add(frame("a", 1.000))
    sync.add(frame("b", 1.001))
    sync.add(frame("c", 1.025))
    m = sync.match()
    assert m.frames is None
    assert m.skew_ms == pytest.approx(25.0)
    assert "'c'" in m.reason and "+25.0 ms" in m.reason and "tolerance 10.0 ms" in m.reason


def test_nearest_frame_from_history_is_chosen():
    # b runs 2 ms ahead but delivers its newest frame a period later than a: b's older
    # frame matches a's newest one.
    sync = Synchroniser(["a", "b"], tolerance_ms=5.0, history=4)
    for k in range(3):
        sync.add(frame("b", k / 30 + 0.002, k))
    sync.add(frame("a", 1 / 30, 1))
    m = sync.match()
    assert m.frames is not None
    assert m.frames[1].seq == 1 and m.skew_ms == pytest.approx(2.0)


def test_a_frame_is_never_emitted_twice():
    sync = Synchroniser(["a", "b"], tolerance_ms=10.0)
    sync.add(frame("a", 1.0))
    sync.add(frame("b", 1.0))
    assert sync.match().frames is not None
    sync.add(frame("a", 1.0 + 1 / 30))  # only a has a new frame
    again = sync.match()
    assert again.frames is None and again.reason == "waiting for a new frame from 'b'"
    sync.add(frame("b", 1.0 + 1 / 30))
    assert sync.match().frames is not None


def test_old_or_repeated_frames_are_ignored():
    sync = Synchroniser(["a"], tolerance_ms=1.0)
    sync.add(frame("a", 2.0))
    sync.add(frame("a", 1.0))
    sync.add(frame("a", 2.0))
    m = sync.match()
    assert m.frames[0].stamp_s == 2.0 and sync.match().frames is None


# 16 ms is half a 30 Hz period: no frame of the offset camera is within 10 ms of the others.
@pytest.mark.parametrize("offset_ms, appends", [(4.0, True), (16.0, False)])
def test_bridge_with_offset_camera(clock, synthetic_config, run_ticks, offset_ms, appends):
    cfg = synthetic_config(sync_tolerance_ms=10.0)
    cams = [CameraConfig("top"), CameraConfig("left_wrist"), CameraConfig("right_wrist", stamp_offset_ms=offset_ms)]
    sources = [SyntheticSource(c, clock) for c in cams]
    with CameraBridge(cfg, sources=sources, clock=clock) as bridge:
        results = run_ticks(bridge, clock, 2.0)
        win = bridge.window()
    assert any(r.appended for r in results) is appends
    assert win.ready is appends
    if appends:
        assert np.allclose(win.skew_ms, offset_ms)
    else:
        text = " ".join(win.reasons)
        assert "'right_wrist'" in text and "> tolerance 10.0 ms" in text, win.reasons
