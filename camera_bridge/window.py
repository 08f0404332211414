"""Ring buffer of stacked frames and the frame-skip window the policy consumes: the one frame
window of the stack (camera bridge, policy runtime, every simulator's episode runner).

The ring is one preallocated uint8 array [capacity, H, W, 3]; views are written into the
next slot in place and the slot is committed with its stamp (or `push` copies a whole frame).
`FrameRing.window(n, skip)` picks the newest frame and every `skip`-th one before it, oldest
first; with `pad=True` (a simulated episode's start) frames from before the first one pushed
repeat the oldest frame held.
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

    def push(self, frame: np.ndarray, stamp_s: float = 0.0, skew_ms: float = 0.0) -> None:
        """Copy `frame` [H, W, 3] into the next slot and commit it."""
        self.next_slot()[...] = frame
        self.commit(stamp_s, skew_ms)

    def clear(self) -> None:
        self.count = 0

    def window(self, n: int, skip: int, pad: bool = False) -> np.ndarray:
        """The newest frame and every `skip`-th before it, oldest first: [n, H, W, 3] (a copy).

        Without `pad` the ring must already hold the whole span ((n - 1) * skip + 1 frames);
        with it, slots from before the first frame repeat the oldest frame held."""
        if self.count == 0:
            raise RuntimeError("frame window is empty: push a frame first")
        back = np.arange(n - 1, -1, -1) * skip  # [n] frames back from the newest: 48, 45, ..., 0
        if back[0] >= self.count:
            if not pad:
                raise RuntimeError(f"frame window not ready: {self.count} of {back[0] + 1} frames held")
            back = np.minimum(back, self.count - 1)
        return self.frames[(self._head - 1 - back) % self.capacity]  # [n, H, W, 3], oldest first

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
