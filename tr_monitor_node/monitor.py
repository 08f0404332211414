"""The TR monitor's core: telemetry in, plottable values, images and diagnostics out.

`TRMonitor` is everything `tr_monitor_node` does except ROS: the node subscribes to the
policy's telemetry and the stacked camera frame, calls `on_telemetry` / `on_frame`, and
publishes the returned values on the topics of `vam_stack.topics` (keys `tr`, `tr0`, `s`,
`w_lang`, `w_plan`, `latency_ms`, `tr_steps`, `phase`, `trace_image`, `attention_overlay`,
`diagnostics`) after converting them with `vam_stack.msgs`. The simulation uses the same
object to write each episode's `tr_trace.png`.
"""
from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

from vam_stack.tr_plot import PlotConfig, render_attention_overlay, render_trace
from vam_stack.tr_trace import ReplanRecord, TraceConfig, TRTrace
from vam_stack.config import check

SCALAR_KEYS = ("tr", "tr0", "s", "w_lang", "w_plan", "latency_ms")  # = topic table keys


@dataclass(frozen=True)
class MonitorConfig:
    """TR monitor: history/phase settings, image look, rendering rate, health thresholds."""

    trace: TraceConfig = field(default_factory=TraceConfig)  # history and phase inference
    plot: PlotConfig = field(default_factory=PlotConfig)  # image sizes and colours
    render_every_replans: int = 1  # redraw the trace every N replans (a redraw is ~0.1-0.3 s
    #   of CPU here; replans come at 1 Hz real, 2 Hz LIBERO)
    attention_frame: int = 0  # latent frame shown in the overlay (0 = current frame, V0)
    latency_budget_ms: float = 1000.0  # replan budget (30 actions at 30 Hz); above -> warn
    stale_after_s: float = 5.0  # no telemetry for this long -> diagnostics "stale"
    title: str = "TR trace"  # title of the live trace image

    def __post_init__(self) -> None:
        check(self.render_every_replans >= 1,
              f"render_every_replans must be >= 1, got {self.render_every_replans!r}")
        check(self.attention_frame >= 0,
              f"attention_frame must be >= 0, got {self.attention_frame!r}")
        check(self.latency_budget_ms > 0,
              f"latency_budget_ms must be > 0, got {self.latency_budget_ms!r}")
        check(self.stale_after_s > 0, f"stale_after_s must be > 0, got {self.stale_after_s!r}")


@dataclass
class MonitorOutput:
    """What one telemetry message produces (None = nothing new to publish)."""

    replan: ReplanRecord
    scalars: dict[str, float]  # SCALAR_KEYS -> value
    tr_steps: np.ndarray  # [n_euler] TR per Euler step
    phase: str
    phase_changed: bool  # phase differs from the previous replan's (publish on change)
    trace_image: np.ndarray | None  # [H, W, 3] uint8 when re-rendered this time
    attention_overlay: np.ndarray | None  # [H, W, 3] uint8 when attention and a frame exist


class TRMonitor:
    """Accumulates TR telemetry and renders the live trace, overlay and diagnostics."""

    def __init__(self, cfg: MonitorConfig | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.cfg = cfg or MonitorConfig()
        self.trace = TRTrace(self.cfg.trace)
        self.clock = clock
        self.frame: np.ndarray | None = None  # latest stacked RGB frame [H, W, 3]
        self.rejected = 0  # telemetry messages rejected as malformed
        self.last_error = ""
        self._arrivals: deque[float] = deque(maxlen=20)  # clock() at each accepted telemetry
        self._since_render = 0

    def reset(self) -> None:
        """Start a new episode (keeps the latest frame and the counters)."""
        self.trace.reset()
        self._since_render = 0

    def on_frame(self, frame: np.ndarray) -> None:
        """Keep the latest stacked camera frame (RGB uint8 HxWx3) for the overlay."""
        if not isinstance(frame, np.ndarray) or frame.dtype != np.uint8 or frame.ndim != 3 \
                or frame.shape[2] != 3 or 0 in frame.shape[:2]:    # an empty one would break every overlay after it
            raise ValueError(f"frame must be RGB uint8 HxWx3 with H, W > 0, got "
                             f"{getattr(frame, 'dtype', type(frame).__name__)} "
                             f"{getattr(frame, 'shape', '')}")
        self.frame = frame

    def on_telemetry(self, telemetry: Mapping[str, Any],
                     phase_label: str | None = None, render: bool = True) -> MonitorOutput:
        """Validate and add one replan; counts and re-raises rejected input. `render` false: no
        image is drawn now (the node draws them only for a subscriber, at a bounded rate:
        `take_trace`), the trace is marked as due for one."""
        previous = self.trace.phase if self.trace.replans else None
        try:
            rp = self.trace.update(telemetry, phase_label)
        except ValueError as e:
            self.rejected += 1
            self.last_error = str(e)
            raise
        self._arrivals.append(self.clock())
        self._since_render += 1
        image = overlay = None
        if render:
            image = self.take_trace()
            try:                 # the replan is in; an overlay that cannot be drawn does not undo it
                overlay = self.render_overlay()
            except ValueError as e:
                overlay, self.last_error = None, f"attention overlay: {e}"
        return MonitorOutput(
            replan=rp, scalars={k: float(getattr(rp, k)) for k in SCALAR_KEYS},
            tr_steps=np.asarray(rp.tr_steps, dtype=np.float32), phase=rp.phase,
            phase_changed=rp.phase != previous, trace_image=image, attention_overlay=overlay)

    def take_trace(self) -> np.ndarray | None:
        """The trace image when one is due (every `render_every_replans` replans, and after the
        first), else None; a drawn one is no longer due."""
        n = len(self.trace.replans)
        if n == 0 or not (self._since_render >= self.cfg.render_every_replans or (n == 1 and self._since_render)):
            return None
        self._since_render = 0
        return self.render_trace()

    def render_trace(self, title: str | None = None, end_step: int | None = None) -> np.ndarray:
        return render_trace(self.trace, self.cfg.plot, title or self.cfg.title, end_step)

    def render_overlay(self) -> np.ndarray | None:
        """Overlay of the latest attention on the latest frame, on the token grid the policy's
        telemetry named (its preset's head grid); None while attention, grid or frame is missing."""
        att, grid = self.trace.latest_attention, self.trace.token_grid
        if att is None or grid is None or self.frame is None:
            return None
        return render_attention_overlay(att, self.frame, grid, self.cfg.attention_frame, self.cfg.plot)

    def rate_hz(self) -> float:
        """Achieved telemetry (replan) rate over the last arrivals; 0 with fewer than two."""
        if len(self._arrivals) < 2 or self._arrivals[-1] <= self._arrivals[0]:
            return 0.0
        return (len(self._arrivals) - 1) / (self._arrivals[-1] - self._arrivals[0])

    def diagnostics(self) -> dict[str, Any]:
        """One status: {"name", "level", "message", "values"} (see vam_stack.msgs)."""
        values: dict[str, Any] = {"replans": len(self.trace.replans),
                                  "rejected": self.rejected,
                                  "replan_rate_hz": self.rate_hz(),
                                  "phase": self.trace.phase}
        if self.last_error:
            values["last_error"] = self.last_error
        if not self._arrivals:
            return {"name": "tr_monitor: telemetry", "level": "stale",
                    "message": "no TR telemetry received yet", "values": values}
        age = self.clock() - self._arrivals[-1]
        values["age_s"] = age
        if self.trace.replans:
            last = self.trace.replans[-1]
            values.update(tr=last.tr, tr0=last.tr0, tr0_source=last.tr0_source, s=last.s,
                          w_lang=last.w_lang, w_plan=last.w_plan, latency_ms=last.latency_ms,
                          branches=",".join(last.branches_computed))
            sm = self.trace.summary()
            values.update(latency_ms_mean=sm["latency_ms_mean"],
                          latency_ms_max=sm["latency_ms_max"])
        level, message = "ok", "receiving TR telemetry"
        if age > self.cfg.stale_after_s:
            level, message = "stale", f"no TR telemetry for {age:.1f} s"
        elif self.trace.replans and self.trace.replans[-1].latency_ms > self.cfg.latency_budget_ms:
            level = "warn"
            message = (f"replan latency {self.trace.replans[-1].latency_ms:.0f} ms exceeds the "
                       f"{self.cfg.latency_budget_ms:.0f} ms budget")
        return {"name": "tr_monitor: telemetry", "level": level, "message": message,
                "values": values}
