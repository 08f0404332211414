"""TR trace figure and attention overlay: sizes, content, PNG output, bad inputs."""
from __future__ import annotations

import cv2
import numpy as np
import pytest

from vam_stack.tr_plot import (PlotConfig, attention_heatmap, render_attention_overlay,
                                  render_trace, save_png, save_trace_png)
from vam_stack.tr_trace import TRTrace
from vam_stack.config import ConfigError

pytestmark = pytest.mark.unit

SMALL = PlotConfig(width_px=640, height_px=400)


def _episode(label=None, n=20):
    trace = TRTrace()
    rng = np.random.default_rng(1)
    for i in range(n):
        tr = 1.0 if i == 0 else 1.0 + 0.4 * np.sin(i / 3) + 0.02 * rng.standard_normal()
        s = float(np.clip(tr - 1.0, 0, 2))
        if label:
            trace.label_step(10 * i, label)
        trace.update({"step": 10 * i, "tr": tr, "tr_steps": list(tr + 0.05 * rng.random(10)),
                      "tr0": 1.0, "s": s, "w_lang": 0.1 * s, "w_plan": 0.3 * s,
                      "branches_computed": ["cond", "plan"] if s > 0 else ["cond"],
                      "latency_ms": 15.0})
    return trace


def test_trace_image_has_configured_size_and_real_content():
    img = render_trace(_episode(), SMALL, title="goal / task 0")
    assert img.dtype == np.uint8 and img.shape == (400, 640, 3)
    assert len(np.unique(img.reshape(-1, 3), axis=0)) > 100  # curves, text, shading
    assert (img < 100).any(axis=2).mean() > 0.01  # dark ink: lines and labels drawn


def test_trace_png_is_written_and_matches_the_rendered_array(tmp_path):
    trace = _episode()
    img = render_trace(trace, SMALL)
    path = save_png(img, tmp_path / "ep0" / "tr_trace.png")
    back = cv2.imread(str(path), cv2.IMREAD_COLOR)[:, :, ::-1]
    np.testing.assert_array_equal(back, img)
    p2 = save_trace_png(trace, tmp_path / "ep1" / "tr_trace.png", SMALL, end_step=250)
    assert p2.stat().st_size > 10_000


def test_phase_shading_colours_the_plot():
    planning = render_trace(_episode("planning"), SMALL).astype(float)
    manipulation = render_trace(_episode("manipulation"), SMALL).astype(float)
    warm = lambda im: (im[:, :, 0] - im[:, :, 2]).mean()  # noqa: E731  red minus blue
    assert warm(planning) - warm(manipulation) > 5.0


def test_empty_trace_renders_a_placeholder():
    img = render_trace(TRTrace(), SMALL)
    assert img.shape == (400, 640, 3) and (img < 128).any()


def test_heatmap_selects_the_frame_averages_queries_and_normalises():
    att = np.zeros((2, 2 * 2 * 3))  # 2 queries, 2 latent frames of a 2x3 grid
    att[0, 6 + 5] = 4.0  # frame 1, row 1, col 2
    att[1, 6 + 0] = 2.0  # frame 1, row 0, col 0
    heat = attention_heatmap(att, (2, 3), frame_index=1)
    np.testing.assert_allclose(heat, [[0.5, 0, 0], [0, 0, 1.0]])
    np.testing.assert_array_equal(attention_heatmap(att, (2, 3), frame_index=0), np.zeros((2, 3)))
    np.testing.assert_allclose(attention_heatmap(att[0], (2, 3), 1).max(), 1.0)


@pytest.mark.parametrize("att, grid, frame, match", [
    (np.ones((2, 10)), (2, 3), 0, "whole number"),
    (np.ones((2, 12)), (2, 3), 2, "frame_index"),
    (np.ones((2, 12)), (0, 3), 0, "grid"),
    (np.ones((2, 12)), (2, 3, 1), 0, "grid"),
    (-np.ones((2, 12)), (2, 3), 0, ">= 0"),
    (np.full((2, 12), np.nan), (2, 3), 0, "finite"),
    (np.ones((2, 2, 12)), (2, 3), 0, "A_H"),
])
def test_bad_attention_is_rejected(att, grid, frame, match):
    with pytest.raises(ValueError, match=match):
        attention_heatmap(att, grid, frame)


def test_overlay_marks_attended_tokens_and_leaves_the_rest_visible():
    frame = np.full((40, 80, 3), 128, np.uint8)
    att = np.zeros((3, 8))
    att[:, 0] = 1.0  # top-left token of a 2x4 grid
    cfg = PlotConfig(overlay_interpolation="nearest")
    out = render_attention_overlay(att, frame, (2, 4), cfg=cfg, label=False)
    assert out.shape == frame.shape and out.dtype == np.uint8
    assert np.abs(out[5, 5].astype(int) - 128).max() > 60  # hot token: strongly coloured
    cold = 128 * (1 - cfg.overlay_alpha * 0.25)  # zero attention: lightly tinted (inferno(0) ~ black)
    assert np.allclose(out[35, 75], cold, atol=3)
    labelled = render_attention_overlay(att, frame, (2, 4), cfg=cfg, label=True)
    assert (labelled != out).any()


def test_overlay_rejects_bad_frames_and_config_is_validated():
    with pytest.raises(ValueError, match="RGB uint8"):
        render_attention_overlay(np.ones((1, 8)), np.zeros((4, 8, 3), np.float32), (2, 4))
    with pytest.raises(ValueError, match="RGB uint8"):
        save_png(np.zeros((4, 4), np.uint8), "/tmp/never.png")
    with pytest.raises(ConfigError, match="'jetz'"):
        PlotConfig(overlay_colormap="jetz")
    with pytest.raises(ConfigError, match="width_px"):
        PlotConfig(width_px=10)


def test_a_title_wider_than_the_figure_wraps_at_words_and_keeps_every_word():
    # issue 70 row 15: the README's trace (docs/yam64_handover_tr_trace.png) read "... with the left arm and han"
    from matplotlib.figure import Figure

    from vam_stack.tr_plot import _fit_title

    cfg = PlotConfig()
    fig = Figure(figsize=(cfg.width_px / cfg.dpi, cfg.height_px / cfg.dpi), dpi=cfg.dpi)
    title = ("yam_handover_e000_s0 (success): pick up the blue block with the left arm and hand it to the "
             "right arm")
    lines = _fit_title(fig, title)
    assert len(lines) == 2 and " ".join(lines) == title, lines
    assert _fit_title(fig, "goal / task 0") == ["goal / task 0"]
    img = render_trace(_episode(), cfg, title=title)
    assert img.shape == (620, 1000, 3)
    ink = (img[:60] < 100).all(axis=2)                                 # the title's dark ink, top 60 rows
    cols = np.flatnonzero(ink.any(axis=0))
    assert cols.min() > 10 and cols.max() < 990, (cols.min(), cols.max())   # inside the figure, not cut at an edge
