"""tr_monitor_node: the policy's TR telemetry as plottable topics, a live trace image, an
attention overlay and diagnostics (for rviz2's Image display, rqt_plot and rqt_image_view).

In: /vam/telemetry (JSON per replan; its `token_grid` is the policy's video-token grid, so
the overlay needs no per-preset setting), /vam/attention (the overlay is drawn when it arrives,
over the latest stacked camera frame; topics are not ordered against each other, so it is
not paired with a telemetry message), /vam/instruction (a new
episode resets the trace). Out: /vam/tr, /vam/tr0, /vam/s, /vam/w_lang, /vam/w_plan,
/vam/latency_ms, /vam/tr_steps, /vam/phase (latched, on change), /tr_monitor/trace_image,
/tr_monitor/attention_overlay, /diagnostics. The images are drawn only while someone subscribes
to them (`rqt_image_view`, rviz2) and at most `max_render_hz` (the trace from a timer, when new
replans came; the overlay when an attention arrives): with nobody watching, the monitor draws
nothing. The camera frame is kept as the message's own buffer, not copied. The process runs at
`niceness` (default 10): on a machine it shares with the control path, the monitor yields. The
work is `TRMonitor` (plain Python); a
malformed message is refused, counted and logged rate-limited (the first reason of each second
in full, then a count; `vam_stack.refusals`), never fatal; an instruction with no visible
character (what the policy refuses too) does not reset the trace.
"""
from __future__ import annotations

from vam_stack.process_exit import quiet_stop_while_importing

quiet_stop_while_importing("tr_monitor_node")   # before the heavy imports below

import dataclasses
import os
import time

import numpy as np
from rclpy.node import Node

from tr_monitor_node.monitor import SCALAR_KEYS, MonitorConfig, TRMonitor
from vam_stack import image_msgs, msg_base, msgs, refusals, ros
from vam_stack.config import from_yaml
from vam_stack.instruction import check_instruction

P = ros.Param
PARAMS = (
    P("config_file", "", "monitor YAML (section tr_monitor); empty = config/tr_monitor.yaml"),
    P("render_every_replans", 0, "redraw the trace every N replans; 0 = the config file's", range=(0, 1000)),
    P("max_render_hz", 1.0, "at most this many trace redraws and overlays a second, each only while someone "
                            "subscribes to its image [Hz]", range=(0.01, 30.0)),
    P("niceness", 10, "nice value added to this process at start-up (os.nice): the monitor yields the CPU to the "
                      "control path; 0 = unchanged", range=(0, 19)),
    ros.DIAGNOSTICS_PERIOD,
)


class TRMonitorNode(Node):
    def __init__(self, **node_kwargs):
        super().__init__("tr_monitor_node", **node_kwargs)
        p = ros.declare(self, PARAMS)
        cfg = from_yaml(MonitorConfig, ros.config_path(p["config_file"], "tr_monitor.yaml"), "tr_monitor")
        if p["render_every_replans"]:
            cfg = dataclasses.replace(cfg, render_every_replans=p["render_every_replans"])
        self.monitor = TRMonitor(cfg)
        if p["niceness"]:
            try:
                os.nice(p["niceness"])
            except OSError as e:
                self.get_logger().warning(f"could not lower this process's priority (nice {p['niceness']}): {e}")
        self._min_interval = 1.0 / p["max_render_hz"]
        self._last_overlay = -float("inf")   # time.monotonic() of the last overlay drawn
        self._drawn = None   # the attention array of the last overlay published
        self.renders = {"trace_image": 0, "attention_overlay": 0}   # images drawn (diagnostics, tests)
        keys = (*SCALAR_KEYS, "tr_steps", "phase", "trace_image", "attention_overlay", "diagnostics")
        self.pub = {k: ros.publisher(self, k) for k in keys}
        self._refused = {k: refusals.refusal_log(self, k) for k in ("telemetry", "attention", "camera frame", "instruction")}
        ros.subscription(self, "telemetry", self._on_telemetry)
        ros.subscription(self, "attention", self._on_attention)
        ros.subscription(self, "stacked_image", self._on_frame)
        ros.subscription(self, "instruction", self._on_instruction)
        refusals.timer(self, p[ros.DIAGNOSTICS_PERIOD.name], self._publish_diagnostics, "diagnostics")
        refusals.timer(self, self._min_interval, self._publish_trace, "trace image")

    def _on_instruction(self, msg) -> None:
        try:
            check_instruction(msg.data)
        except ValueError as e:
            self._refused["instruction"].refuse(f"{e} (the trace is kept)")
            return
        self.monitor.reset()

    def _on_attention(self, msg) -> None:
        try:
            att = msgs.float32_array_to_numpy(ros.from_ros(msg, "std_msgs/msg/Float32MultiArray"))
            if att.ndim != 2 or att.size == 0 or not np.isfinite(att).all() or (att < 0).any():
                raise msg_base.MessageError("attention must be a finite, non-negative [A_H, n_video_tokens] array, "
                                        f"got shape {att.shape}")
            self.monitor.trace.latest_attention = att
            self._publish_overlay()
        except ValueError as e:
            self._refused["attention"].refuse(str(e))

    def _watched(self, key: str) -> bool:
        return self.pub[key].get_subscription_count() > 0

    def _publish_overlay(self) -> None:
        """An overlay for a new attention message, as soon as a telemetry message has named the token
        grid, while someone subscribes, at most max_render_hz (one that comes sooner is drawn by the
        timer; an attention replaced meanwhile is not drawn)."""
        att = self.monitor.trace.latest_attention
        if att is None or att is self._drawn or not self._watched("attention_overlay"):
            return
        now = time.monotonic()
        if now - self._last_overlay < self._min_interval:
            return
        overlay = self.monitor.render_overlay()     # None until a grid and a frame arrived
        if overlay is not None:
            self._drawn, self._last_overlay = att, now
            self.renders["attention_overlay"] += 1
            self.pub["attention_overlay"].publish(ros.image(self, "attention_overlay", overlay))

    def _publish_trace(self) -> None:
        """Timer at max_render_hz: the trace image, when new replans came and someone subscribes (and an
        overlay the rate held back)."""
        self._publish_overlay()
        if not self._watched("trace_image"):
            return
        image = self.monitor.take_trace()
        if image is not None:
            self.renders["trace_image"] += 1
            self.pub["trace_image"].publish(ros.image(self, "trace_image", image))

    def _on_frame(self, msg) -> None:
        try:    # the message's own buffer (no copy): kept alive by the array, read only when an overlay is drawn
            self.monitor.on_frame(image_msgs.image_to_numpy(msg, copy=False))
        except ValueError as e:
            self._refused["camera frame"].refuse(str(e))

    def _on_telemetry(self, msg) -> None:
        try:
            tel = msgs.json_from_msg(msg)
            if not isinstance(tel, dict):
                raise msg_base.MessageError(f"telemetry must be a JSON object, got {type(tel).__name__}")
            out = self.monitor.on_telemetry(tel, render=False)     # images: _publish_trace, _publish_overlay
        except ValueError as e:
            self._refused["telemetry"].refuse(str(e))
            return
        for key, value in out.scalars.items():
            self.pub[key].publish(ros.to_ros(msgs.float32_msg(value)))
        if out.tr_steps.size:
            self.pub["tr_steps"].publish(ros.to_ros(msgs.float32_array_msg(out.tr_steps, ["euler_step"])))
        if out.phase_changed:
            self.pub["phase"].publish(ros.to_ros(msgs.string_msg(out.phase)))
        try:
            self._publish_overlay()      # an attention that arrived before the grid was known
        except ValueError as e:
            self._refused["attention"].refuse(str(e))

    def _publish_diagnostics(self) -> None:
        refusals.flush_refusals(self)
        status = self.monitor.diagnostics()
        status["values"] = {**status.get("values", {}),
                            **{f"refused_{k.replace(' ', '_')}": v.total for k, v in self._refused.items()},
                            **{f"rendered_{k}": v for k, v in self.renders.items()}}
        self.pub["diagnostics"].publish(ros.diagnostics(self, [status]))


def main(args=None) -> None:
    ros.spin_node(TRMonitorNode, args, exit_process=True)


if __name__ == "__main__":
    main()
