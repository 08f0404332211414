"""tr_monitor_node through rclpy: telemetry in, plottable values, phase,
trace image, attention overlay and diagnostics out; malformed input logged, not fatal."""
from __future__ import annotations

import json

import numpy as np
import pytest

from tr_monitor_node.node import TRMonitorNode
from vam_stack import image_msgs, msgs

pytestmark = pytest.mark.adapter


def telemetry(step: int, tr: float) -> dict:
    return {"step": step, "replan": step // 10, "tr": tr, "tr_steps": [tr, tr * 0.9], "tr0": 1.0,
            "s": max(tr - 1.0, 0.0), "w_lang": 0.1 * max(tr - 1.0, 0.0), "w_plan": 0.3 * max(tr - 1.0, 0.0),
            "branches_computed": ["cond", "null_text", "plan"] if tr > 1.0 else ["cond"], "latency_ms": 12.5,
            "token_grid": [2, 4]}


@pytest.fixture
def monitor(ros_harness):
    node = ros_harness.add(TRMonitorNode())
    keys = ("tr", "tr0", "s", "w_lang", "w_plan", "latency_ms", "tr_steps", "phase", "trace_image",
            "attention_overlay", "diagnostics")
    return ros_harness, node, {k: ros_harness.capture(k) for k in keys}


def test_telemetry_becomes_plottable_topics_phase_and_images(monitor):
    h, node, out = monitor
    frame = np.zeros((16, 32, 3), np.uint8)
    frame[:, :16] = 200
    h.publish("stacked_image", image_msgs.image_msg(frame, 1.0, "camera_stacked"))
    assert h.spin_until(lambda: node.monitor.frame is not None)
    for i, tr in enumerate((1.0, 1.05, 1.4)):
        att = np.zeros((5, 16), np.float32)  # [A_H, 2 latent frames x 2 x 4 tokens]
        att[:, 0] = 1.0
        h.publish("attention", msgs.float32_array_msg(att, ["action", "video_token"]))
        h.publish("telemetry", msgs.json_msg(telemetry(10 * i, tr)))
        assert h.spin_until(lambda: len(out["tr"]) == i + 1 and len(out["attention_overlay"]) == i + 1)
    assert h.spin_until(lambda: len(out["trace_image"]) >= 1)
    assert [round(m.data, 4) for m in out["tr"]] == [1.0, 1.05, 1.4]
    assert out["w_plan"][-1].data == pytest.approx(0.12) and out["latency_ms"][-1].data == pytest.approx(12.5)
    np.testing.assert_allclose(msgs.float32_array_to_numpy(out["tr_steps"][-1]), [1.4, 1.26], rtol=1e-6)
    assert [m.data for m in out["phase"]] == ["manipulation", "planning"]  # published on change
    overlay = image_msgs.image_to_numpy(out["attention_overlay"][-1])
    assert overlay.shape == frame.shape and out["attention_overlay"][-1].header.frame_id == "camera_stacked"
    trace = out["trace_image"][-1]
    assert trace.encoding == "rgb8" and trace.header.frame_id == "tr_monitor" and trace.width > 100
    def status():
        return msgs.diagnostics_to_dict(out["diagnostics"][-1])["tr_monitor_node: telemetry"] if out["diagnostics"] else None
    assert h.spin_until(lambda: status() is not None and status()["values"]["replans"] == "3")
    assert status()["level"] == "ok" and status()["values"]["phase"] == "planning"
    assert not h.errors("tr_monitor_node")


def test_malformed_telemetry_is_logged_rate_limited_and_counted(monitor):
    """The first refusal of each second in full, then a count with the latest reason (issue 58 row 8)."""
    h, node, out = monitor
    h.publish("telemetry", msgs.string_msg("not json"))
    h.publish("telemetry", msgs.json_msg({"step": 0, "tr": 1.0}))
    h.publish("attention", msgs.float32_array_msg(np.zeros(4), ["flat"]))
    # the second telemetry refusal inside the same second is counted, said at the next diagnostics
    assert h.spin_until(lambda: any("1 more refused" in e for e in h.errors("tr_monitor_node")), timeout=10)
    errors = h.errors("tr_monitor_node")
    assert len(errors) == 3, errors
    text = " ".join(errors)
    assert "telemetry refused" in text and "not JSON" in text and "attention refused" in text
    assert "telemetry: 1 more refused" in text and "lacks" in text
    assert node.monitor.rejected == 1 and not out["tr"]
    h.publish("telemetry", msgs.json_msg(telemetry(0, 1.0)))
    assert h.spin_until(lambda: len(out["tr"]) == 1), "the monitor must keep working after bad input"
    values = msgs.diagnostics_to_dict(out["diagnostics"][-1])["tr_monitor_node: telemetry"]["values"]
    assert values["refused_telemetry"] == "2" and values["refused_attention"] == "1"


def test_new_instruction_resets_the_trace(monitor):
    h, node, out = monitor
    h.publish("telemetry", msgs.json_msg(telemetry(0, 1.0)))
    assert h.spin_until(lambda: len(out["tr"]) == 1)
    h.publish("instruction", msgs.string_msg(" \u200b "))       # what the policy refuses: no episode, no reset
    assert h.spin_until(lambda: any("instruction refused" in e for e in h.errors("tr_monitor_node")))
    assert node.monitor.trace.resets == 0
    h.publish("instruction", msgs.string_msg("next task"))
    assert h.spin_until(lambda: node.monitor.trace.resets >= 1)
    assert json.loads(msgs.json_msg({"a": 1}).data) == {"a": 1}


def test_main_spins_until_shutdown_then_destroys_the_node():
    import threading
    import time

    import rclpy

    from tr_monitor_node.node import main

    thread = threading.Thread(target=main, kwargs={"args": ["--ros-args", "-p", "diagnostic_updater.period:=0.5"]}, daemon=True)
    thread.start()
    end = time.monotonic() + 20
    while not rclpy.ok() and time.monotonic() < end:
        time.sleep(0.01)
    time.sleep(1.0)  # let it build the node and spin
    rclpy.try_shutdown()
    thread.join(20)
    assert not thread.is_alive() and not rclpy.ok()
