"""TR monitor core: values, images and diagnostics a node publishes, without ROS."""
from __future__ import annotations

import numpy as np
import pytest

from tr_monitor_node.monitor import SCALAR_KEYS, MonitorConfig, TRMonitor
from vam_stack.tr_plot import PlotConfig
from vam_stack.tr_trace import TelemetryError
from vam_stack import image_msgs, msgs, topics
from vam_stack.config import ConfigError, from_yaml
from vam_stack.paths import config_dir
from vam_stack.recording import McapRecorder, read_info, read_messages

pytestmark = pytest.mark.unit


class FakeClock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def tel(step, tr, latency=20.0, attention=None, token_grid=(2, 4)):
    s = float(np.clip(tr - 1.0, 0, 2))
    d = {"step": step, "tr": tr, "tr_steps": [tr] * 10, "tr0": 1.0, "s": s, "w_lang": 0.1 * s,
         "w_plan": 0.3 * s, "branches_computed": ["cond"], "latency_ms": latency, "token_grid": list(token_grid)}
    if attention is not None:
        d["attention"] = attention
    return d


def small(**kw):
    return MonitorConfig(plot=PlotConfig(width_px=320, height_px=240), **kw)


def test_outputs_carry_the_replan_values_and_phase_changes():
    mon = TRMonitor(small(render_every_replans=3))
    outs = [mon.on_telemetry(tel(10 * i, tr)) for i, tr in enumerate([1.0, 1.3, 1.3, 1.0, 1.0])]
    assert set(outs[1].scalars) == set(SCALAR_KEYS)
    assert outs[1].scalars["tr"] == 1.3 and outs[1].scalars["w_plan"] == pytest.approx(0.09)
    assert outs[1].tr_steps.dtype == np.float32 and outs[1].tr_steps.shape == (10,)
    assert [o.phase for o in outs] == ["manipulation", "planning", "planning", "manipulation",
                                       "manipulation"]
    assert [o.phase_changed for o in outs] == [True, True, False, True, False]
    # first replan always renders, then every 3rd
    assert [o.trace_image is not None for o in outs] == [True, False, False, True, False]
    assert outs[0].trace_image.shape == (240, 320, 3)
    assert all(o.attention_overlay is None for o in outs)  # no attention, no frame


def test_overlay_needs_both_attention_and_a_frame():
    mon = TRMonitor(small())
    att = np.zeros((3, 2 * 8))
    att[:, 3] = 1.0
    assert mon.on_telemetry(tel(0, 1.0, attention=att)).attention_overlay is None
    mon.on_frame(np.full((40, 80, 3), 90, np.uint8))
    out = mon.on_telemetry(tel(10, 1.0, attention=att))
    assert out.attention_overlay.shape == (40, 80, 3)
    with pytest.raises(ValueError, match="RGB uint8"):
        mon.on_frame(np.zeros((40, 80), np.uint8))


def test_the_overlay_uses_the_token_grid_the_telemetry_names():
    """No per-preset grid in any config: the policy's telemetry names its head grid (a yam64 policy
    sends 180 tokens = 5 frames of 12x3; a monitor set up for the real 6x21 grid drew nothing)."""
    mon = TRMonitor(small())
    mon.on_frame(np.full((48, 192, 3), 90, np.uint8))
    att = np.zeros((4, 180))
    att[:, 5] = 1.0                                        # frame 0, row 1, col 2 of a 12x3 grid... or not
    out = mon.on_telemetry(tel(0, 1.0, attention=att, token_grid=(3, 12)))
    assert mon.trace.token_grid == (3, 12) and out.attention_overlay.shape == (48, 192, 3)
    no_grid = {k: v for k, v in tel(10, 1.0, attention=att).items() if k != "token_grid"}
    assert mon.on_telemetry(no_grid).attention_overlay is not None     # the grid stays known
    # a grid that does not divide the attention: the replan is kept, the overlay is not drawn
    out = mon.on_telemetry(tel(20, 1.2, attention=att, token_grid=(6, 21)))
    assert out.attention_overlay is None and len(mon.trace.replans) == 3 and mon.rejected == 0
    assert "not a whole number of 6x21" in mon.diagnostics()["values"]["last_error"]
    for bad in ([0, 3], [3], "3x12", [3.0, 12], [True, 12]):
        with pytest.raises(TelemetryError, match="token_grid"):
            mon.on_telemetry(tel(30, 1.0, token_grid=bad))


def test_diagnostics_report_stale_ok_warn_and_rate():
    clock = FakeClock()
    mon = TRMonitor(small(latency_budget_ms=100.0, stale_after_s=5.0), clock=clock)
    assert mon.diagnostics()["level"] == "stale"
    for i in range(5):
        mon.on_telemetry(tel(10 * i, 1.0))
        clock.t += 0.5
    d = mon.diagnostics()
    assert d["level"] == "ok" and d["values"]["replans"] == 5
    assert d["values"]["replan_rate_hz"] == pytest.approx(2.0)
    mon.on_telemetry(tel(50, 1.0, latency=250.0))
    assert mon.diagnostics()["level"] == "warn" and "250 ms" in mon.diagnostics()["message"]
    clock.t += 6.0
    assert mon.diagnostics()["level"] == "stale"


def test_rejected_telemetry_is_counted_and_reported():
    mon = TRMonitor(small())
    with pytest.raises(TelemetryError):
        mon.on_telemetry({**tel(0, 1.0), "tr": float("nan")})
    d = mon.diagnostics()
    assert d["level"] == "stale"  # nothing accepted yet
    assert d["values"]["rejected"] == 1 and mon.rejected == 1
    assert "finite" in d["values"]["last_error"]
    mon.on_telemetry(tel(0, 1.0))
    d = mon.diagnostics()
    assert d["level"] == "ok" and "finite" in d["values"]["last_error"]


def test_outputs_convert_to_messages_and_record_to_mcap(tmp_path):
    """What the node publishes: every output through vam_stack.msgs and into an MCAP."""
    mon = TRMonitor(small())
    mon.on_frame(np.full((40, 80, 3), 90, np.uint8))
    path = tmp_path / "monitor.mcap"
    with McapRecorder(path, origin_s=0.0) as rec:
        for i, tr in enumerate([1.0, 1.4]):
            out = mon.on_telemetry(tel(10 * i, tr, attention=np.ones((3, 16))))
            t = i * 0.5
            for key, value in out.scalars.items():
                assert topics.topic(key).msgtype == "std_msgs/msg/Float32"
                rec.write_float32(key, value, t)
            rec.write("tr_steps", msgs.float32_array_msg(out.tr_steps, ["euler_step"]), t)
            rec.write_string("phase", out.phase, t)
            rec.write_image("trace_image", out.trace_image, t)
            rec.write_image("attention_overlay", out.attention_overlay, t)
            d = mon.diagnostics()
            rec.write_diagnostics([msgs.diagnostic_status(**d)], t)
    info = read_info(path)
    assert info.counts["/tr_monitor/trace_image"] == 2
    assert info.counts["/tr_monitor/attention_overlay"] == 2
    assert info.counts["/diagnostics"] == 2 and info.counts["/vam/s"] == 2
    last = [m for _, _, m in read_messages(path, ["/tr_monitor/trace_image"])][-1]
    assert image_msgs.image_to_numpy(last).shape == (240, 320, 3)
    diag = [m for _, _, m in read_messages(path, ["/diagnostics"])][-1]
    status = msgs.diagnostics_to_dict(diag)["tr_monitor: telemetry"]
    assert status["level"] == "ok" and status["values"]["phase"] == "planning"


def test_shipped_config_loads_and_bad_values_are_rejected():
    cfg = from_yaml(MonitorConfig, config_dir() / "tr_monitor.yaml", "tr_monitor")
    assert cfg.trace.enter_planning_ratio > cfg.trace.exit_planning_ratio
    with pytest.raises(ConfigError, match="render_every_replans"):
        MonitorConfig(render_every_replans=0)
