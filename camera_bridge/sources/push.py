"""Push source: frames handed in by other code (LIBERO bridge, a ROS image subscriber).

The producer calls `push(image, stamp_s, encoding)`; the bridge reads it like any camera,
so freshness, size and encoding checks apply to pushed frames too.
"""
from __future__ import annotations

import math
import threading
import time

import numpy as np

from camera_bridge.config import CameraConfig
from camera_bridge.sources.base import CameraSource, Clock, Frame


class PushSource(CameraSource):
    """A camera whose frames arrive through `push()` (thread-safe)."""

    def __init__(self, cfg: CameraConfig, clock: Clock = time.monotonic):
        super().__init__(cfg, clock)
        self._lock = threading.Lock()
        self._pending: Frame | None = None
        self._seq = 0

    def push(self, image: np.ndarray, stamp_s: float | None = None, encoding: str | None = None) -> None:
        """Offer a frame stamped on the host monotonic clock (now when `stamp_s` is None)."""
        if not isinstance(image, np.ndarray):
            raise TypeError(f"camera {self.name!r}: push() needs a numpy array, got {type(image).__name__}")
        stamp = self.clock() if stamp_s is None else float(stamp_s)
        if not math.isfinite(stamp):
            raise ValueError(f"camera {self.name!r}: push() stamp must be finite, got {stamp_s!r}")
        with self._lock:
            self._pending = Frame(self.name, image, encoding or self.cfg.encoding, stamp, self._seq)
            self._seq += 1

    def _open(self) -> None:
        return None  # nothing to open: the producer owns the device

    def _release(self) -> None:
        return None  # nothing to release

    def _poll(self) -> Frame | None:
        with self._lock:
            frame, self._pending = self._pending, None
        return frame
