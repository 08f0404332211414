"""Deadline pacing for every fixed-rate loop (chunk executor, driver, camera bridge), with the
timing it achieved.

Tick k is due at `t0 + k / rate` on a monotonic clock (absolute deadlines: no drift from
per-tick work, unlike a relative sleep). The pacer sleeps until `spin_s` before the deadline
and polls the clock for the rest; given a stop event it sleeps on the event, so a stop wakes it
at once. Two policies for a late tick (`resync`):

- False (the executor): the grid is kept. A wake one or more whole periods late skips those
  ticks and counts them as missed; a tick less than a period late runs at once and the next one
  keeps its grid time, so the tick index stays tied to the wall clock.
- True (the driver, the camera bridge): the grid restarts at the late wake, so two ticks are
  never closer than one period (a motor's per-tick slew limit assumes exactly that).

Per tick it records:

- jitter: wake time minus deadline (how late the tick started; >= 0);
- the achieved period (difference of successive wake times) and hence the achieved rate;
- missed ticks: when a wake is one or more whole periods late, those ticks are skipped and
  counted, and the tick index jumps so it stays tied to the wall clock;
- overruns: waits that began after their deadline (the previous tick's work ran past it);
- overhead: the caller's measured work per tick (executor step + safety filter + sink).
"""
from __future__ import annotations

import threading
import time
from typing import Callable

import numpy as np


class DeadlinePacer:
    """Waits for tick deadlines at a fixed rate and keeps the timing statistics."""

    def __init__(self, rate_hz: float, spin_s: float = 0.0005, max_samples: int = 200_000,
                 clock: Callable[[], float] = time.monotonic, resync: bool = False) -> None:
        if not (isinstance(rate_hz, (int, float)) and 0 < rate_hz < float("inf")):
            raise ValueError(f"rate_hz must be a finite number > 0, got {rate_hz!r}")
        self.period = 1.0 / rate_hz
        self.spin_s, self.max_samples, self.clock, self.resync = spin_s, max_samples, clock, resync
        self.reset()

    def reset(self) -> None:
        self.t0: float | None = None
        self.next_tick = 0
        self.wakes: list[float] = []
        self.lateness: list[float] = []
        self.overhead: list[float] = []
        self.missed = 0
        self.overruns = 0
        self.ticks = 0

    def start(self, delay_s: float | None = None) -> None:
        """Tick 0 is due `delay_s` from now (one period by default)."""
        self.reset()
        self.t0 = self.clock() + (self.period if delay_s is None else delay_s)

    def wait(self, stop: threading.Event | None = None) -> tuple[int, float] | None:
        """Block until the next tick is due; returns (tick index, wake time).

        Returns None early, recording nothing, when `stop` is set."""
        if self.t0 is None:
            raise RuntimeError("DeadlinePacer.start() must be called before wait()")
        k = self.next_tick
        deadline = self.t0 + k * self.period
        first, overrun = True, False
        while True:
            if stop is not None and stop.is_set():
                return None  # not a tick: nothing recorded
            rem = deadline - self.clock()
            if rem <= 0:
                overrun = first and self.ticks > 0
                break
            first = False
            if rem > self.spin_s:
                if stop is not None:
                    stop.wait(rem - self.spin_s)
                else:
                    time.sleep(rem - self.spin_s)
        now = self.clock()
        late = now - deadline
        if late >= self.period:  # whole periods slipped: those ticks are gone
            missed = int(late // self.period)
            self.missed += missed
            k += missed
        self.overruns += overrun
        if self.resync and overrun:  # restart the grid here: the next tick is a full period away
            self.t0 = now - k * self.period
        self.next_tick = k + 1
        self.ticks += 1
        if len(self.wakes) < self.max_samples:
            self.wakes.append(now)
            self.lateness.append(max(late, 0.0))
        return k, now

    def record_overhead(self, seconds: float) -> None:
        """The caller's work for the tick just returned by wait()."""
        if len(self.overhead) < self.max_samples:
            self.overhead.append(seconds)

    def summary(self) -> dict[str, float]:
        out: dict[str, float] = {"ticks": float(self.ticks), "missed_ticks": float(self.missed),
                                 "overruns": float(self.overruns)}
        if len(self.wakes) >= 2:
            w = np.asarray(self.wakes)
            out["achieved_hz"] = (len(w) - 1) / (w[-1] - w[0]) if w[-1] > w[0] else float("nan")
            periods = np.diff(w) * 1e3
            out["mean_period_ms"] = float(periods.mean())
            out["max_period_ms"] = float(periods.max())
        if self.lateness:
            lat = np.asarray(self.lateness) * 1e3
            out.update(p50_jitter_ms=float(np.percentile(lat, 50)), p99_jitter_ms=float(np.percentile(lat, 99)),
                       max_jitter_ms=float(lat.max()))
        if self.overhead:
            ov = np.asarray(self.overhead) * 1e6
            out.update(overhead_us=float(ov.mean()), p99_overhead_us=float(np.percentile(ov, 99)))
        return out


class IncreasingStamps:
    """Strictly increasing stamps [ns] for a stream of commands: `next(now_ns)` is `now_ns`, or the
    last stamp + `step_ns` when the clock has not moved past it. The driver follows a target only
    if it is stamped after the last one it followed (a replay is refused); under `use_sim_time` a
    node's ROS clock is the last /clock it received, a step function (100 Hz, and it stands still
    while the world waits for a poll or the executor is busy), read by a tick paced on the host's
    clock: two ticks saw the same time and the second target was refused as "out of order"
    (130-300 a run). `step_ns` (1 us) stays above a float64's resolution of epoch seconds."""

    def __init__(self, step_ns: int = 1000):
        if step_ns < 1:
            raise ValueError(f"step_ns must be >= 1, got {step_ns!r}")
        self.step_ns = int(step_ns)
        self.last_ns: int | None = None
        self.bumped = 0               # stamps moved past a clock that stood still
        self._lock = threading.Lock()

    def next(self, now_ns: int) -> int:
        with self._lock:
            ns = int(now_ns)
            if self.last_ns is not None and ns <= self.last_ns:
                ns = self.last_ns + self.step_ns
                self.bumped += 1
            self.last_ns = ns
            return ns
