"""Rendering for the TR monitor: the TR trace figure and the attention overlay (no rclpy).

Both return RGB uint8 arrays (HxWx3) so the ROS node can publish them as `sensor_msgs/Image`
(rgb8) and the simulators' episode runner (vam_sim/episode.py) can save them as PNG. matplotlib
is used through its object API with the Agg canvas only (no pyplot state, no display needed,
safe off the main thread).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import matplotlib
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from vam_stack.tr_trace import TRTrace
from vam_stack.config import check

PHASE_COLORS = {"planning": "#f39c12", "manipulation": "#3498db"}  # span shading
_INTERP = {"nearest": cv2.INTER_NEAREST, "bilinear": cv2.INTER_LINEAR,
           "bicubic": cv2.INTER_CUBIC}


@dataclass(frozen=True)
class PlotConfig:
    """Size and look of the rendered images."""

    width_px: int = 1000  # trace image width; fits an rviz2 Image panel and a README
    height_px: int = 620  # trace image height
    dpi: int = 100  # pixels per inch: font sizes are in points, so this sets text size
    phase_alpha: float = 0.16  # opacity of the phase shading behind the curves
    overlay_alpha: float = 0.7  # heat-map opacity where attention is highest
    overlay_colormap: str = "inferno"  # matplotlib colormap for attention
    overlay_interpolation: str = "bilinear"  # token grid -> pixels: nearest shows token blocks

    def __post_init__(self) -> None:
        check(64 <= self.width_px <= 4096, f"width_px must be in [64, 4096], got {self.width_px!r}")
        check(64 <= self.height_px <= 4096,
              f"height_px must be in [64, 4096], got {self.height_px!r}")
        check(20 <= self.dpi <= 600, f"dpi must be in [20, 600], got {self.dpi!r}")
        check(0.0 <= self.phase_alpha <= 1.0,
              f"phase_alpha must be in [0, 1], got {self.phase_alpha!r}")
        check(0.0 <= self.overlay_alpha <= 1.0,
              f"overlay_alpha must be in [0, 1], got {self.overlay_alpha!r}")
        check(self.overlay_colormap in matplotlib.colormaps,
              f"overlay_colormap must be a matplotlib colormap, got {self.overlay_colormap!r}")
        check(self.overlay_interpolation in _INTERP,
              f"overlay_interpolation must be one of {list(_INTERP)}, "
              f"got {self.overlay_interpolation!r}")


def _to_rgb(fig: Figure) -> np.ndarray:
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[:, :, :3].copy()  # [H, W, 3] uint8


TITLE_FONT = 13


def _fit_title(fig: Any, title: str, margin: float = 0.03) -> list[str]:
    """`title` as the lines that fit the figure's width at the title's font (the README's trace cut
    "... with the left arm and han" mid-word): one line when it fits, else split at words into two
    (more only for a title longer than two widths), measured with the figure's own renderer."""
    import textwrap

    canvas = fig.canvas if hasattr(fig.canvas, "get_renderer") else FigureCanvasAgg(fig)
    renderer = canvas.get_renderer()
    width = fig.bbox.width * (1 - 2 * margin)

    def fits(text: str) -> bool:
        probe = fig.text(0, 0, text, fontsize=TITLE_FONT, fontweight="bold")
        w = probe.get_window_extent(renderer=renderer).width
        probe.remove()
        return w <= width

    if fits(title):
        return [title]
    for chars in range(len(title) - 1, 10, -1):
        lines = textwrap.wrap(title, chars, break_long_words=False) or [title]
        if all(fits(x) for x in lines):
            return lines
    return textwrap.wrap(title, 40) or [title]


def _shade(ax: Any, spans: list[tuple[int, int, str]], alpha: float) -> None:
    for start, end, phase in spans:
        ax.axvspan(start, end, color=PHASE_COLORS[phase], alpha=alpha, lw=0, zorder=0)


def render_trace(trace: TRTrace, cfg: PlotConfig | None = None, title: str = "TR trace",
                 end_step: int | None = None) -> np.ndarray:
    """The episode's TR trace as an RGB uint8 image [height_px, width_px, 3].

    Top: TR_i per replan (band: min..max over the Euler steps) and TR_0 dashed. Bottom: s_i
    (left axis) and w_lang, w_plan (right axis). Both: phase spans shaded. `end_step` (e.g.
    the episode's last step) extends the x axis and the last phase span.
    """
    cfg = cfg or PlotConfig()
    fig = Figure(figsize=(cfg.width_px / cfg.dpi, cfg.height_px / cfg.dpi), dpi=cfg.dpi)
    ax_tr, ax_s = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 2]})
    ax_w = ax_s.twinx()
    fig.subplots_adjust(left=0.08, right=0.91, top=0.84, bottom=0.09, hspace=0.16)
    a = trace.arrays()
    if not trace.replans:
        fig.suptitle("\n".join(_fit_title(fig, title)), fontsize=TITLE_FONT, fontweight="bold")
        ax_tr.text(0.5, 0.5, "waiting for TR telemetry", ha="center", va="center",
                   transform=ax_tr.transAxes, fontsize=14, color="0.4")
        ax_s.set_xlabel("env step")
        return _to_rgb(fig)

    steps = a["step"]
    spans = trace.phase_spans(end_step)
    x_end = max(float(steps[-1]), float(spans[-1][1]))
    # Held values (TR_0, s, weights) last until the next replan: extend the last one to x_end.
    xs = np.append(steps, x_end)
    held = lambda k: np.append(a[k], a[k][-1])  # noqa: E731
    for ax in (ax_tr, ax_s):
        _shade(ax, spans, cfg.phase_alpha)
        ax.grid(True, alpha=0.3)

    ax_tr.fill_between(steps, a["tr_min"], a["tr_max"], color="C0", alpha=0.18, lw=0,
                       label="TR range over Euler steps")
    ax_tr.plot(steps, a["tr"], "-o", color="C0", ms=3.5, lw=1.8, label="TR$_i$ (replan)")
    own = any(r.tr0_source == "monitor" for r in trace.replans)
    tr0_label = "TR$_0$ (first replan; policy set none)" if own else "TR$_0$ (episode baseline)"
    ax_tr.plot(xs, held("tr0"), "--", color="k", lw=1.5, drawstyle="steps-post", label=tr0_label)
    ax_tr.set_ylabel("Temporal Ratio")
    top = float(max(a["tr_max"].max(), a["tr0"].max()))
    ax_tr.set_ylim(0, top * 1.15 if top > 0 else 1.0)

    # s_i and the weights are proportional under tr_adaptive: give them different headroom
    # (s fills ~60 % of the panel, weights ~85 %) so neither curve hides the other.
    ax_s.fill_between(xs, 0, held("s"), step="post", color="C3", alpha=0.25, lw=0)
    ax_s.plot(xs, held("s"), "-", color="C3", lw=2.0, drawstyle="steps-post", label="s$_i$")
    ax_s.set_ylabel("scale s$_i$", color="C3")
    ax_s.set_ylim(0, max(0.1, float(a["s"].max())) * 1.65)
    for key, marker, color, name in (("w_lang", "^", "C2", "w$_{lang}$"),
                                     ("w_plan", "s", "C4", "w$_{plan}$")):
        ax_w.plot(xs, held(key), "-" + marker, color=color, lw=1.2, ms=4, drawstyle="steps-post",
                  markevery=list(range(len(steps))), label=name)  # no marker on the extension
    ax_w.set_ylabel("guidance weight")
    ax_w.set_ylim(0, max(0.05, float(max(a["w_lang"].max(), a["w_plan"].max()))) * 1.18)
    ax_s.set_xlabel("env step")
    ax_s.set_xlim(float(steps[0]), max(x_end, float(steps[0]) + 1))

    phase_handles = [Patch(color=PHASE_COLORS[p], alpha=min(1.0, cfg.phase_alpha * 3), label=p)
                     for p in PHASE_COLORS if any(sp[2] == p for sp in spans)]
    source = "labels" if trace.step_labels else "from TR"
    h1, l1 = ax_tr.get_legend_handles_labels()
    ax_tr.legend(h1 + phase_handles, l1 + [f"{h.get_label()} ({source})" for h in phase_handles],
                 loc="lower left", bbox_to_anchor=(0.0, 1.0), fontsize=8.5, frameon=False,
                 ncol=5, borderaxespad=0.2, handlelength=1.6, columnspacing=1.0)
    h2, l2 = ax_s.get_legend_handles_labels()
    h3, l3 = ax_w.get_legend_handles_labels()
    ax_s.legend(h2 + h3, l2 + l3, loc="lower left", bbox_to_anchor=(0.0, 1.0), fontsize=8.5,
                frameon=False, ncol=3, borderaxespad=0.2)

    sm = trace.summary()
    lines = _fit_title(fig, title)
    if len(lines) > 1:                      # a second title line: the plots start lower
        fig.subplots_adjust(top=0.80)
    fig.suptitle("\n".join(lines), fontsize=TITLE_FONT, fontweight="bold", y=0.975, va="top")
    fig.text(0.5, 0.915 - 0.045 * (len(lines) - 1),
             f"{sm['replans']} replans | TR$_0$ = {sm['tr0']:.3g} | TR mean {sm['tr_mean']:.3g} "
             f"(max {sm['tr_max']:.3g}) | guided {sm['guided_replans']}/{sm['replans']} | "
             f"planning {100 * sm['planning_fraction']:.0f} % | "
             f"latency mean {sm['latency_ms_mean']:.1f} ms",
             ha="center", fontsize=9.5, color="0.25")
    return _to_rgb(fig)


def save_png(image: np.ndarray, path: str | Path) -> Path:
    """Write an RGB uint8 image as PNG (parent directories are created)."""
    if not isinstance(image, np.ndarray) or image.dtype != np.uint8 or image.ndim != 3 \
            or image.shape[2] != 3:
        raise ValueError(f"expected an RGB uint8 HxWx3 image, got "
                         f"{getattr(image, 'dtype', type(image))} {getattr(image, 'shape', '')}")
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    if not cv2.imwrite(str(p), np.ascontiguousarray(image[:, :, ::-1])):
        raise OSError(f"could not write PNG {str(p)!r}")
    return p


def save_trace_png(trace: TRTrace, path: str | Path, cfg: PlotConfig | None = None,
                   title: str = "TR trace", end_step: int | None = None) -> Path:
    """Render the trace and save it as `path` (e.g. DIR/<episode>/tr_trace.png)."""
    return save_png(render_trace(trace, cfg, title, end_step), path)


def attention_heatmap(attention: np.ndarray, grid: tuple[int, int],
                      frame_index: int = 0) -> np.ndarray:
    """Action-query attention over one latent frame's video tokens as a [rows, cols] map.

    `attention` is [A_H, n_video_tokens] (or [n_video_tokens]); tokens are frame-major, each
    frame a row-major `grid` = (rows, cols). Frame 0 is the current (anchor) frame. Queries
    are averaged; the map is scaled so its maximum is 1 (all zeros stays zeros).
    """
    if not isinstance(attention, np.ndarray) or attention.ndim not in (1, 2) or attention.size == 0:
        raise ValueError(f"attention must be a non-empty [A_H, n_video_tokens] array, got "
                         f"{getattr(attention, 'shape', type(attention).__name__)}")
    att = attention.astype(np.float64).reshape(-1, attention.shape[-1])
    if not np.all(np.isfinite(att)) or np.any(att < 0):
        raise ValueError("attention must be finite and >= 0")
    if (len(grid) != 2 or any(isinstance(g, bool) or not isinstance(g, (int, np.integer))
                              or g <= 0 for g in grid)):
        raise ValueError(f"grid must be two positive integers (rows, cols), got {grid!r}")
    rows, cols = int(grid[0]), int(grid[1])
    n = att.shape[1]
    if n % (rows * cols):
        raise ValueError(f"{n} video tokens is not a whole number of {rows}x{cols} frames")
    frames = n // (rows * cols)
    if isinstance(frame_index, bool) or not isinstance(frame_index, (int, np.integer)) \
            or not 0 <= frame_index < frames:
        raise ValueError(f"frame_index must be in [0, {frames}), got {frame_index!r}")
    sl = slice(frame_index * rows * cols, (frame_index + 1) * rows * cols)
    heat = att[:, sl].mean(axis=0).reshape(rows, cols)
    peak = heat.max()
    return heat / peak if peak > 0 else heat


def render_attention_overlay(attention: np.ndarray, frame: np.ndarray, grid: tuple[int, int],
                             frame_index: int = 0, cfg: PlotConfig | None = None,
                             label: bool = True) -> np.ndarray:
    """Heat map of `attention_heatmap(...)` blended over the stacked RGB `frame` [H, W, 3].

    Opacity grows with attention (`overlay_alpha` at the peak, a quarter of it at zero), so
    the scene stays visible where the action tokens do not look. The map is scaled to its
    peak, so near-uniform attention looks uniformly hot: the label's "peak/mean" says how
    concentrated it really is (1 = uniform). Returns RGB uint8 [H, W, 3].
    """
    cfg = cfg or PlotConfig()
    if not isinstance(frame, np.ndarray) or frame.dtype != np.uint8 or frame.ndim != 3 \
            or frame.shape[2] != 3:
        raise ValueError(f"frame must be an RGB uint8 HxWx3 array, got "
                         f"{getattr(frame, 'dtype', type(frame).__name__)} "
                         f"{getattr(frame, 'shape', '')}")
    heat = attention_heatmap(attention, grid, frame_index)  # [rows, cols] in [0, 1]
    contrast = 1.0 / heat.mean() if heat.max() > 0 else 0.0  # peak / mean: 1 = uniform
    h, w = frame.shape[:2]
    up = cv2.resize(heat.astype(np.float32), (w, h),
                    interpolation=_INTERP[cfg.overlay_interpolation])
    up = np.clip(up, 0.0, 1.0)  # [H, W]; bicubic can overshoot
    colors = matplotlib.colormaps[cfg.overlay_colormap](up)[:, :, :3] * 255.0  # [H, W, 3]
    alpha = (cfg.overlay_alpha * (0.25 + 0.75 * up))[:, :, None]  # [H, W, 1]
    out = (frame.astype(np.float32) * (1.0 - alpha) + colors * alpha).round().astype(np.uint8)
    if label:
        text = (f"action attention, latent frame {frame_index}, grid {grid[0]}x{grid[1]}, "
                f"peak/mean {contrast:.1f}")
        scale = max(0.35, min(0.6, w / 900))
        (tw, th), base = cv2.getTextSize(text, cv2.FONT_HERSHEY_SIMPLEX, scale, 1)
        cv2.rectangle(out, (0, 0), (min(w, tw + 8), th + base + 6), (0, 0, 0), thickness=-1)
        cv2.putText(out, text, (4, th + 3), cv2.FONT_HERSHEY_SIMPLEX, scale, (255, 255, 255), 1,
                    cv2.LINE_AA)
    return out

