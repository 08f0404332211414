"""The driver's one paced loop: `tick()` at the bus rate in a thread of its own.

Deadlines on a monotonic clock (`DeadlinePacer`, resync after an overrun: the next tick is a whole
period away, never a burst, since the per-tick slew limit assumes one period between writes), at
SCHED_FIFO `BUS_RT_PRIORITY` where the OS allows it, as the policy node's executor tick thread. The
driver node runs it (`monitor.DriverMonitor`), and so does `YamDriver.run` (the driver without ROS,
what `vam-stack bench driver` times, through `paced_run`). A tick that raises never ends the thread:
`on_error` decides (the node holds the arm; `paced_run` ends). `stop()` ends the thread within its budget (the node's 2 s
shutdown budget); a tick in progress finishes first (the driver's bus lock).
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Callable

from vam_control.pacing import DeadlinePacer
from vam_stack.realtime import set_fifo_priority

log = logging.getLogger(__name__)

BUS_RT_PRIORITY = 50   # SCHED_FIFO priority of the bus thread: above the camera bridge's capture thread (40)
STOP_TIMEOUT_S = 1.5   # s: the bus thread's share of the node's 2 s shutdown budget


class BusThread:
    """Calls `tick()` at `rate_hz` on deadlines in a thread of its own (module docstring). `stop`: an
    event of the caller's that ends the thread too (`YamDriver.run`'s stop request)."""

    def __init__(self, rate_hz: float, tick: Callable[[], None], on_error: Callable[[Exception], None],
                 rt_priority: int = BUS_RT_PRIORITY, name: str = "yam-driver-bus",
                 clock: Callable[[], float] = time.monotonic, stop: threading.Event | None = None):
        self.pacer = DeadlinePacer(rate_hz, clock=clock, resync=True, max_samples=0)
        self._tick, self._on_error, self._priority = tick, on_error, rt_priority
        self._stop = stop if stop is not None else threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.realtime = False                       # whether the thread got SCHED_FIFO

    def start(self) -> "BusThread":
        self.pacer.start(0.0)
        self._thread.start()
        return self

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def _run(self) -> None:
        if self._priority:
            self.realtime = set_fifo_priority(self._priority)
        while self.pacer.wait(self._stop) is not None:
            try:
                self._tick()
            except Exception as e:                  # never ends the thread: the arm would lose its driver
                self._on_error(e)

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> bool:
        """End the thread (from any other thread); False if it is still in a tick after `timeout_s`."""
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout_s)
        return not self._thread.is_alive()


@dataclass
class PacedRun:
    """What one `paced_run` did."""

    ticks: int = 0  # ticks that completed
    overruns: int = 0  # ticks that ended after their deadline
    elapsed_s: float = 0.0  # on the loop's clock
    sched_fifo: bool = False  # the thread got SCHED_FIFO
    reason: str = ""  # "duration" | "max_ticks" | "" (stopped from outside)


def paced_run(tick: Callable[[], object], rate_hz: float, stop: threading.Event,
              clock: Callable[[], float] = time.monotonic, rt_priority: int = 0, duration_s: float | None = None,
              max_ticks: int | None = None, log_every_s: float | None = None,
              mode: Callable[[], str] = lambda: "") -> PacedRun:
    """`tick()` on a `BusThread` until `stop` is set (from any thread, or a signal handler: the caller's
    thread only waits), `duration_s` has passed or `max_ticks` ran. A tick that raises ends the run
    and is raised here. Logs the achieved rate every `log_every_s` (with `mode()`)."""
    run, failure = PacedRun(), []
    t_start = clock()
    next_log = [t_start + log_every_s if log_every_s else float("inf")]

    def counted() -> None:
        if duration_s is not None and clock() - t_start >= duration_s:
            run.reason = "duration"
            stop.set()
            return
        tick()
        run.ticks, run.overruns = run.ticks + 1, loop.pacer.overruns
        now = clock()
        if now >= next_log[0]:
            log.info("yam_driver: %.1f Hz achieved (%d ticks, %d overruns), mode %s",
                     run.ticks / max(now - t_start, 1e-9), run.ticks, run.overruns, mode())
            next_log[0] = now + log_every_s
        if max_ticks is not None and run.ticks >= max_ticks:
            run.reason = "max_ticks"
            stop.set()

    def failed(e: Exception) -> None:
        failure.append(e)
        stop.set()

    loop = BusThread(rate_hz, counted, failed, rt_priority, clock=clock, stop=stop)
    if max_ticks is not None and max_ticks <= 0:
        run.reason = "max_ticks"
        stop.set()
    loop.start()
    while loop.alive and not stop.wait(0.05):
        pass
    loop.stop(max(1.0, 2.0 / rate_hz))
    run.elapsed_s, run.sched_fifo = clock() - t_start, loop.realtime
    if failure:
        raise failure[0]
    return run
