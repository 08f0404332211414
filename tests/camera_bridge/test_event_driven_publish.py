"""The stacked frame goes out when it is complete (issue 60): the bridge hands each completed
stacked frame to `on_stacked` in the tick that made it, once, and nothing without a new frame;
the node publishes it from there (no second timer), with the stage times the bench reads, and the
synthetic cameras' frames are read when they are due, not at the next poll of a 60 Hz grid."""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from rclpy.parameter import Parameter

from camera_bridge.bridge import CameraBridge
from camera_bridge.config import BridgeConfig, CameraConfig


def test_on_stacked_once_per_completed_frame_and_never_without_one(clock, synthetic_config):
    got = []
    with CameraBridge(synthetic_config(), clock=clock) as bridge:
        bridge.on_stacked = lambda st: got.append((st.stamp_s, st.arrival_s, st.stacked_s, st.frame.copy()))
        appended = 0
        for _ in range(60):                        # 1 s at 60 Hz on the manual clock: 30 frames per camera
            r = bridge.tick()
            appended += r.appended
            assert len(got) == appended            # handed over in the very tick that completed it
            clock.advance(1 / 60)
        assert appended >= 28
        bridge.tick()                              # the frame due at the clock's last step
        n = len(got)
        for _ in range(5):                         # time stands still: no new frame, nothing handed over
            bridge.tick()
        assert len(got) == n
        stamps = [g[0] for g in got]
        assert stamps == sorted(set(stamps))        # each frame once
        for stamp, arrival, stacked, frame in got:
            assert stamp - 1e-9 <= arrival <= stacked
        np.testing.assert_array_equal(got[-1][3], bridge.latest().frames[-1])


def test_an_on_stacked_that_raises_is_counted_not_a_camera_problem(clock, synthetic_config):
    with CameraBridge(synthetic_config(), clock=clock) as bridge:
        def boom(st):
            raise RuntimeError("publisher gone")
        bridge.on_stacked = boom
        for _ in range(10):
            bridge.tick()
            clock.advance(1 / 30)
        assert bridge.on_stacked_errors >= 8 and bridge.latest().ready


def test_the_loop_reads_synthetic_frames_when_due():
    cams = tuple(CameraConfig(n, kind="synthetic", width=64, height=48, fps=30.0) for n in ("a", "b"))
    cfg = BridgeConfig(cameras=cams, view_width=32, view_height=24, source_fps=30.0, frame_skip=1, window_frames=5,
                       buffer_frames=5, tick_hz=30.0)         # a poll grid as slow as the cameras
    waits = []
    bridge = CameraBridge(cfg)
    bridge.on_stacked = lambda st: waits.append(st.arrival_s - st.stamp_s)
    bridge.connect()
    bridge.start()
    try:
        end = time.monotonic() + 1.5
        while time.monotonic() < end and len(waits) < 40:
            time.sleep(0.05)
    finally:
        bridge.close()
    assert len(waits) >= 30
    # polled on a 30 Hz grid the set waits 0-33 ms (mean ~17); read when due, a few ms at most
    assert float(np.median(waits)) < 0.004, waits


@pytest.mark.adapter
def test_node_publishes_each_stacked_frame_once_from_the_bridge_with_stage_times(ros_harness):
    from camera_bridge.node import CameraBridgeNode
    from tests.camera_bridge.test_camera_bridge_node import push_bridge

    h = ros_harness
    node = h.add(CameraBridgeNode(bridge=push_bridge(), parameter_overrides=[
        Parameter("publish_views", value=False), Parameter("diagnostic_updater.period", value=0.2)]))
    stacked = h.capture("stacked_image")
    noted = []
    take = node.latency.take

    def push(level: int) -> None:
        for src in node.bridge.sources:
            src.push(np.full((24, 32, 3), level, np.uint8))
    for k in range(6):                                       # one set at a time: one message each
        push(10 + k)
        assert h.spin_until(lambda: len(stacked) == k + 1, timeout=5), (k, len(stacked))
        noted += take()
    quiet = time.monotonic() + 0.5                            # no new set: no message
    h.spin_until(lambda: time.monotonic() > quiet, timeout=5)
    assert len(stacked) == 6
    assert [int(m.data[0]) for m in stacked] == [10, 11, 12, 13, 14, 15]
    assert len(noted) == 6
    for r in noted:
        assert r["capture"] <= r["arrival"] <= r["stacked"] <= r["published"]
    # published by the bridge's thread right after stacking, no timer in between (the first publish
    # pays one-time costs): a 20 Hz timer would add 0-50 ms
    assert max(r["published"] - r["stacked"] for r in noted[1:]) < 10e6, noted
    assert node.bridge.on_stacked_errors == 0 and not h.errors("camera_bridge")
    assert threading.active_count() >= 1
