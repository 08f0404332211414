"""Ring buffer of stacked frames and the frame-skip window the policy consumes.

The ring is one preallocated uint8 array [capacity, H, W, 3]; views are written into the
next slot in place and the slot is committed with its stamp. `FrameRing.window()` picks the
newest frame and every `frame_skip`-th one before it, oldest first.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class Window:
    """The clip for one replan, or why there is none.

    `frames` is uint8 [window_frames, view_h, view_w * cameras, 3] RGB, oldest first
    ([17, 168, 672, 3] on the robot, [17, 224, 448, 3] for LIBERO); `stamps_s` [n] are the
    host-monotonic stamps of those frames and `skew_ms` [n] their synchronisation skew.
    """

    ready: bool
    frames: np.ndarray | None  # [n, H, W, 3] uint8 RGB, oldest first; None when not ready
    stamps_s: np.ndarray | None  # [n] float64 seconds, increasing
    skew_ms: np.ndarray | None  # [n] float64, largest view-to-view stamp difference per frame
    reasons: tuple[str, ...] = field(default_factory=tuple)  # why not ready; names the cameras
    newest_age_ms: float | None = None  # age of the newest stacked frame when the window was cut


class FrameRing:
    """Fixed-capacity ring of stacked frames with their stamps (not thread-safe by itself)."""

    def __init__(self, capacity: int, shape: tuple[int, int, int]):
        self.capacity = capacity
        self.frames = np.zeros((capacity, *shape), np.uint8)  # [N, H, W, 3]
        self.stamps = np.zeros(capacity, np.float64)  # [N] seconds
        self.skews = np.zeros(capacity, np.float64)  # [N] ms
        self.count = 0  # frames committed so far, capped at capacity
        self._head = 0  # slot the next frame goes to

    @property
    def nbytes(self) -> int:
        return self.frames.nbytes + self.stamps.nbytes + self.skews.nbytes

    def next_slot(self) -> np.ndarray:
        """Writable [H, W, 3] view of the slot the next commit will publish."""
        return self.frames[self._head]

    def commit(self, stamp_s: float, skew_ms: float) -> None:
        self.stamps[self._head] = stamp_s
        self.skews[self._head] = skew_ms
        self._head = (self._head + 1) % self.capacity
        self.count = min(self.count + 1, self.capacity)

    def clear(self) -> None:
        self.count = 0

    def newest_stamp(self) -> float | None:
        return None if self.count == 0 else float(self.stamps[(self._head - 1) % self.capacity])

    def indices(self, n: int, skip: int) -> np.ndarray:
        """Slots of the newest frame and every `skip`-th before it, oldest first. [n] int."""
        back = np.arange(n - 1, -1, -1) * skip  # [n] frames back from the newest: 48, 45, ..., 0
        return (self._head - 1 - back) % self.capacity

    def span_slots(self, n: int, skip: int) -> np.ndarray:
        """Every slot from the oldest selected frame to the newest, in time order."""
        span = (n - 1) * skip + 1
        return (self._head - span + np.arange(span)) % self.capacity

    def largest_gap(self, n: int, skip: int) -> tuple[float, float, float]:
        """(gap_ms, before_s, after_s): the widest stamp step inside the window's span."""
        stamps = self.stamps[self.span_slots(n, skip)]
        if len(stamps) < 2:
            return 0.0, 0.0, 0.0
        steps = np.diff(stamps)
        k = int(np.argmax(steps))
        return float(steps[k] * 1000.0), float(stamps[k]), float(stamps[k + 1])
