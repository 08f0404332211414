"""tr_monitor_node draws its images only for a subscriber, at a bounded rate (issue 60): with nobody
on /tr_monitor/trace_image or /tr_monitor/attention_overlay no matplotlib redraw and no overlay runs,
whatever the replans; with a subscriber the redraws follow at most max_render_hz."""
from __future__ import annotations

import time

import numpy as np
import pytest
from rclpy.parameter import Parameter

from tr_monitor_node.node import TRMonitorNode
from vam_stack import image_msgs, msgs

pytestmark = pytest.mark.adapter


def telemetry(step: int) -> dict:
    return {"step": step, "replan": step // 10, "tr": 1.2, "tr_steps": [1.2, 1.1], "tr0": 1.0, "s": 0.2,
            "w_lang": 0.02, "w_plan": 0.06, "branches_computed": ["cond"], "latency_ms": 10.0, "token_grid": [2, 4]}


def counted(node):
    """Count the monitor's trace and overlay drawings (the costly part), whatever calls them."""
    calls = {"trace": 0, "overlay": 0}
    trace, overlay = node.monitor.render_trace, node.monitor.render_overlay

    def render_trace(*a, **k):
        calls["trace"] += 1
        return trace(*a, **k)

    def render_overlay(*a, **k):
        calls["overlay"] += 1
        return overlay(*a, **k)
    node.monitor.render_trace, node.monitor.render_overlay = render_trace, render_overlay
    return calls


def feed(h, n: int, start: int = 0) -> None:
    frame = np.full((16, 32, 3), 90, np.uint8)
    h.publish("stacked_image", image_msgs.image_msg(frame, 1.0, "camera_stacked"))
    for i in range(start, start + n):
        att = np.zeros((5, 16), np.float32)
        att[:, i % 16] = 1.0
        h.publish("attention", msgs.float32_array_msg(att, ["action", "video_token"]))
        h.publish("telemetry", msgs.json_msg(telemetry(10 * i)))


def test_nothing_is_drawn_without_a_subscriber_then_drawn_at_a_bounded_rate(ros_harness):
    h = ros_harness
    node = h.add(TRMonitorNode(parameter_overrides=[Parameter("max_render_hz", value=2.0),
                                                    Parameter("niceness", value=0)]))
    calls = counted(node)
    tr = h.capture("tr")
    feed(h, 4)
    assert h.spin_until(lambda: len(tr) == 4 and node.monitor.frame is not None)
    end = time.monotonic() + 1.5              # several timer periods: still nothing drawn
    h.spin_until(lambda: time.monotonic() > end, timeout=5)
    assert calls == {"trace": 0, "overlay": 0}, calls

    traces, overlays = h.capture("trace_image"), h.capture("attention_overlay")
    t0 = time.monotonic()
    assert h.spin_until(lambda: traces and overlays, every=lambda: None)
    assert calls["trace"] >= 1 and calls["overlay"] >= 1
    # 16 replans in 1.6 s with subscribers: redraws bounded by the rate (2 Hz), not one per replan
    before = dict(calls)
    for k in range(4, 20, 2):
        feed(h, 2, start=k)
        end = time.monotonic() + 0.2
        h.spin_until(lambda: time.monotonic() > end, timeout=5)
    assert h.spin_until(lambda: len(tr) == 20)
    end = time.monotonic() + 1.0
    h.spin_until(lambda: time.monotonic() > end, timeout=5)
    elapsed = time.monotonic() - t0
    for k in ("trace", "overlay"):
        assert calls[k] > before[k] and calls[k] <= elapsed * 2.0 + 2, (k, calls, before, elapsed)
    assert not h.errors("tr_monitor_node")
