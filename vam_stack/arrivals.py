"""How a stream of stamped messages arrives: latency behind its stamps, period, jitter, gaps.

A node feeds `add(arrival_s, stamp_s)` from its callback (both on the same clock: the ROS clock
of this machine, or any pair where the stamp and the arrival share an epoch) and publishes
`summary()` on /diagnostics. Over the last `window` arrivals:
- latency: arrival minus stamp (camera -> policy: how old a frame is when the policy has it);
- period and jitter: the spacing of arrivals against the nominal period `1 / rate_hz`, and the
  longest gap between two arrivals in the window (`period_ms_max`: a driver's watchdog trips on it);
- missed: whole nominal periods that passed without an arrival (a 100 ms gap at 30 Hz misses 2),
  counted over the whole run, not just the window.
Pure bookkeeping, no ROS: `vam-stack bench ros` reads these numbers off the nodes' diagnostics.
"""
from __future__ import annotations

import math
from collections import deque

import numpy as np

from vam_stack.config import check


class ArrivalStats:
    """See the module docstring."""

    def __init__(self, rate_hz: float, window: int = 300):
        check(math.isfinite(rate_hz) and rate_hz > 0, f"rate_hz must be > 0, got {rate_hz!r}")
        check(window >= 2, f"window must be >= 2, got {window!r}")
        self.period_s = 1.0 / rate_hz
        self.count = 0
        self.missed = 0
        self._latency: deque[float] = deque(maxlen=window)
        self._periods: deque[float] = deque(maxlen=window)
        self._last: float | None = None

    def add(self, arrival_s: float, stamp_s: float | None = None) -> None:
        if stamp_s is not None:
            self._latency.append(arrival_s - stamp_s)
        if self._last is not None:
            gap = arrival_s - self._last
            self._periods.append(gap)
            self.missed += max(0, int(round(gap / self.period_s)) - 1)
        self._last = arrival_s
        self.count += 1

    def summary(self, prefix: str = "") -> dict[str, float | int]:
        """{prefix}received, missed, latency_ms_p50/p99, period_ms_p50/max, jitter_ms_p99 (NaN until known)."""
        nan = float("nan")
        lat = np.array(self._latency) * 1e3
        per = np.array(self._periods) * 1e3
        jitter = np.abs(per - self.period_s * 1e3)
        return {f"{prefix}received": self.count, f"{prefix}missed": self.missed,
                f"{prefix}latency_ms_p50": float(np.percentile(lat, 50)) if lat.size else nan,
                f"{prefix}latency_ms_p99": float(np.percentile(lat, 99)) if lat.size else nan,
                f"{prefix}period_ms_p50": float(np.percentile(per, 50)) if per.size else nan,
                f"{prefix}period_ms_max": float(per.max()) if per.size else nan,
                f"{prefix}jitter_ms_p99": float(np.percentile(jitter, 99)) if jitter.size else nan}
