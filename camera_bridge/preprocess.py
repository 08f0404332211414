"""Frame checks and the resize / BGR->RGB step, written straight into the stacked frame.

Interpolation. The default is "pyramid": halve with `cv2.pyrDown` (5x5 Gaussian, then drop
every other row and column) while the image is at least twice the view size, then
`cv2.INTER_LINEAR` for the remaining factor below 2. Measured here (OpenCV 5.0, one thread,
640x480 -> 224x168 BGR, 2-core machine shared with other jobs; the last columns are the
output amplitude of a horizontal sine of 1.0 at that frequency in cycles per source pixel):

| filter   | ms/view | 0.05 | 0.10 | 0.15 | 0.20 | 0.25 | 0.33 | 0.45 |
|----------|---------|------|------|------|------|------|------|------|
| linear   | 0.08    | 0.99 | 0.97 | 0.94 | 0.88 | 0.82 | 0.70 | 0.56 |
| area     | 1.2-1.4 | 0.96 | 0.86 | 0.71 | 0.52 | 0.32 | 0.06 | 0.16 |
| pyramid  | 0.30    | 0.92 | 0.73 | 0.47 | 0.27 | 0.04 | 0.05 | 0.01 |
| PIL BILINEAR (antialiased) | - | 0.94 | 0.76 | 0.54 | 0.30 | 0.13 | 0.02 | 0.05 |

The output can only represent up to 0.175 cycles per source pixel (224/640/2); everything
above comes out as aliasing (moire on fabric and cables that crawls as the arm moves, i.e.
false motion for a video model). INTER_LINEAR without a prefilter keeps 56-82 % of it.
INTER_AREA keeps 6-32 % but costs ~15x more: three views take ~3.6-4 ms of the 5 ms tick
budget (bench p50 4.6-5.0 ms). "pyramid" suppresses aliasing at least as well as area for
4x less time, and its response is nearly that of PIL's antialiased bilinear resize (and
torchvision's antialias=True), the resize most training pipelines apply to recorded frames, so
live frames look like the training frames. "area" (exact box), "linear", "cubic" and "nearest"
stay selectable. When the source already has the view size (LIBERO 224x224) no filter runs:
the pixels are copied unchanged.
"""
from __future__ import annotations

import cv2
import numpy as np

from camera_bridge.config import BridgeConfig, CameraConfig
from camera_bridge.sources.base import Frame

INTERPOLATION_FLAGS = {
    "pyramid": cv2.INTER_LINEAR,  # after the pyrDown halvings
    "area": cv2.INTER_AREA,
    "linear": cv2.INTER_LINEAR,
    "cubic": cv2.INTER_CUBIC,
    "nearest": cv2.INTER_NEAREST,
}


def frame_problem(frame: Frame, cam: CameraConfig) -> str | None:
    """Why `frame` cannot be used for camera `cam`, or None when it is fine."""
    image = frame.image
    if not isinstance(image, np.ndarray):
        return f"frame is a {type(image).__name__}, not an image array"
    if frame.encoding != cam.encoding:
        return f"wrong encoding {frame.encoding!r} (expected {cam.encoding!r})"
    if image.dtype != np.uint8:
        return f"wrong pixel type {image.dtype} for encoding {frame.encoding!r} (expected uint8)"
    if image.ndim != 3 or image.shape[2] != 3:
        return f"wrong channel layout {tuple(image.shape)} for {frame.encoding!r} (expected [H, W, 3])"
    h, w = image.shape[:2]
    if (w, h) != (cam.width, cam.height):
        return f"wrong size {w}x{h} (expected {cam.width}x{cam.height})"
    return None


class ViewWriter:
    """Resizes and colour-converts one view into a column slice of a stacked RGB frame."""

    def __init__(self, cfg: BridgeConfig):
        self.size = (cfg.view_width, cfg.view_height)  # cv2 order (w, h)
        self.flag = INTERPOLATION_FLAGS[cfg.interpolation]
        self.pyramid = cfg.interpolation == "pyramid"

    def write(self, frame: Frame, dst: np.ndarray) -> None:
        """Fill `dst` [view_h, view_w, 3] (a view into the ring) with `frame` as RGB."""
        image = frame.image
        w, h = self.size
        if self.pyramid:
            while image.shape[1] >= 2 * w and image.shape[0] >= 2 * h:
                image = cv2.pyrDown(image)  # [H/2, W/2, 3] Gaussian-filtered halving
        if (image.shape[1], image.shape[0]) == self.size:
            dst[...] = image
        else:
            cv2.resize(image, self.size, dst=dst, interpolation=self.flag)
        if frame.encoding == "bgr8":
            cv2.cvtColor(dst, cv2.COLOR_BGR2RGB, dst=dst)  # in place on the small view
