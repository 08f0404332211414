"""Match one frame per camera by timestamp within a tolerance, and report the skew.

Each camera keeps its last few frames. The reference instant is the newest stamp of the
camera that lags most (the minimum over cameras of their newest stamp): every camera has
reached it. Each camera then contributes its frame nearest to that instant. The set is
emitted when its skew (largest minus smallest stamp) is within tolerance and every frame in
it is newer than the frame that camera contributed last time, so no view is ever repeated.
"""
from __future__ import annotations

import collections
from dataclasses import dataclass

from camera_bridge.sources.base import Frame


@dataclass(frozen=True)
class MatchResult:
    """Outcome of one matching attempt."""

    frames: tuple[Frame, ...] | None  # one per camera in config order, or None
    skew_ms: float | None  # largest minus smallest stamp of the best candidate set
    reason: str  # why no set was emitted ("" when one was)
    stamp_s: float | None = None  # the set's stamp: mean of its frames' stamps


class Synchroniser:
    """Holds per-camera history and emits time-matched sets."""

    def __init__(self, names: list[str] | tuple[str, ...], tolerance_ms: float, history: int = 4):
        self.names = tuple(names)
        self.tolerance_ms = float(tolerance_ms)
        self._history = {n: collections.deque(maxlen=history) for n in self.names}
        self._last_emitted = {n: float("-inf") for n in self.names}  # stamp each camera last gave
        self.last_skew_ms: float | None = None  # skew of the newest emitted set

    def add(self, frame: Frame) -> None:
        """Offer a frame; a frame that is not newer than the camera's newest one is ignored."""
        hist = self._history[frame.camera]
        if hist and frame.stamp_s <= hist[-1].stamp_s:
            return
        hist.append(frame)

    def forget(self, name: str) -> None:
        """Drop a camera's history (after it failed), so old frames are not matched later."""
        self._history[name].clear()

    def match(self) -> MatchResult:
        missing = [n for n in self.names if not self._history[n]]
        if missing:
            return MatchResult(None, None, "no frames yet from " + ", ".join(repr(n) for n in missing))
        waiting = [n for n in self.names if self._history[n][-1].stamp_s <= self._last_emitted[n]]
        if waiting:
            return MatchResult(None, None, "waiting for a new frame from " + ", ".join(repr(n) for n in waiting))
        ref_name = min(self.names, key=lambda n: self._history[n][-1].stamp_s)
        ref = self._history[ref_name][-1].stamp_s
        chosen = tuple(min(self._history[n], key=lambda f: abs(f.stamp_s - ref)) for n in self.names)
        stamps = [f.stamp_s for f in chosen]
        skew_ms = (max(stamps) - min(stamps)) * 1000.0
        old = [f.camera for f in chosen if f.stamp_s <= self._last_emitted[f.camera]]
        if old:
            return MatchResult(None, skew_ms, "newest frames of " + ", ".join(repr(n) for n in old)
                               + f" match only frames already used; waiting for {ref_name!r} to catch up")
        if skew_ms > self.tolerance_ms:
            worst = max(chosen, key=lambda f: abs(f.stamp_s - ref))
            return MatchResult(
                None, skew_ms,
                f"camera {worst.camera!r} is {(worst.stamp_s - ref) * 1000.0:+.1f} ms from {ref_name!r} "
                f"(skew {skew_ms:.1f} ms > tolerance {self.tolerance_ms:.1f} ms)")
        for f in chosen:
            self._last_emitted[f.camera] = f.stamp_s
        self.last_skew_ms = skew_ms
        return MatchResult(chosen, skew_ms, "", sum(stamps) / len(stamps))
