"""Fitting a stacked frame's side-by-side views to a policy's geometry: one pure function, the same
at inference (the policy runtime's camera path), in training, in recordings and imports, and in
the simulators.

The one rule for a stacked frame whose views are not the policy preset's size (the mocked or
real LIBERO bridge renders 224x224 views; a preset may want 64x64): each view is resized on its
own with INTER_AREA (exact box filter; no bleed across the seam between views). A view whose
aspect ratio differs from the preset's is refused: a stretched image is not what the policy saw.
(camera_bridge/preprocess.py resizes live camera images into the views; this fits views already
stacked.)
"""
from __future__ import annotations

import cv2
import numpy as np


def view_layout_problem(shape: tuple, views: int, width: int, height: int) -> str | None:
    """Why a stacked frame of `shape` ([..., H, W, 3]) cannot become `views` views of width x height."""
    if len(shape) < 3 or shape[-1] != 3:
        return f"stacked frame has shape {tuple(shape)}, expected [..., H, W, 3]"
    h, w = int(shape[-3]), int(shape[-2])
    if h <= 0 or w <= 0 or views <= 0:
        return f"stacked frame is {w}x{h} for {views} view(s): an empty image has no views"
    if w % views:
        return f"stacked frame width {w} is not {views} equal views"
    vw = w // views
    if abs(vw / h - width / height) > 0.01:
        return (f"views are {vw}x{h} (aspect {vw / h:.3f}) but the policy takes {width}x{height} "
                f"(aspect {width / height:.3f}): resizing would stretch them")
    return None


def fit_views(frames: np.ndarray, views: int, width: int, height: int) -> np.ndarray:
    """Resize each of the `views` side-by-side views of a stacked frame [H, W, 3] (or a clip
    [T, H, W, 3]) to width x height; returns `frames` itself when they already fit."""
    problem = view_layout_problem(frames.shape, views, width, height)
    if problem is not None:
        raise ValueError(problem)
    h, w = frames.shape[-3:-1]
    if (h, w) == (height, views * width):
        return frames
    clip = frames.reshape((-1, h, w, 3))
    vw = w // views
    out = np.empty((len(clip), height, views * width, 3), np.uint8)
    for i, f in enumerate(clip):
        for v in range(views):
            out[i, :, v * width:(v + 1) * width] = cv2.resize(f[:, v * vw:(v + 1) * vw], (width, height),
                                                              interpolation=cv2.INTER_AREA)
    return out.reshape(frames.shape[:-3] + (height, views * width, 3))
