"""Rate-limited reporting of refused inputs: one line with the first reason in full, then a count.

A node that refuses a message (a malformed image, a NaN target, a junk instruction) must say so,
but a publisher that sends junk at 300 Hz must not turn the node's log into 300 lines a second:
writing them (stdout and /rosout) costs the CPU the control loops need. `RefusalLog` logs the
first refusal of each period (`period_s`, 1 s by default) in full, counts the rest, and says how
many it did not print, with the latest reason, once the period is over (at the next refusal, or
at `flush()`, which a node calls from its diagnostics timer so a burst that stopped is counted
too). `total` counts every refusal for /diagnostics.

Plain Python, thread-safe. `logger` is anything with `error`/`warning`/`info` methods (an rclpy
logger or a `logging.Logger`); `level` picks one. Each level is written from its own line here:
rclpy's logger refuses a call site whose severity changes between calls.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable

LEVELS = ("error", "warning", "info")


class RefusalLog:
    """See the module docstring. `what` names the input, e.g. "joint targets" or "camera frame"."""

    def __init__(self, logger: Any, what: str, level: str = "error", period_s: float = 1.0,
                 clock: Callable[[], float] = time.monotonic, verb: str = "refused"):
        if level not in LEVELS:
            raise ValueError(f"level must be one of {LEVELS}, got {level!r}")
        if not period_s > 0:
            raise ValueError(f"period_s must be > 0, got {period_s!r}")
        self.logger, self.what, self.level, self.period_s, self.clock = logger, what, level, float(period_s), clock
        self.verb = verb                # "refused" (an input), "failed" (a timer tick, a service call)
        self.total = 0                  # every refusal since the start
        self.printed = 0                # lines written (reasons and counts)
        self._lock = threading.Lock()
        self._window_start: float | None = None   # when the current period's first refusal came
        self._suppressed = 0            # refusals in the current period not printed
        self._latest = ""               # the newest of them

    def refuse(self, reason: str) -> bool:
        """Count one refusal; True when its reason was printed now (the first of its period)."""
        now = self.clock()
        with self._lock:
            self.total += 1
            lines = self._close_window(now)
            if self._window_start is None:
                self._window_start = now
                lines.append(f"{self.what} {self.verb}: {reason}")
                printed = True
            else:
                self._suppressed += 1
                self._latest = reason
                printed = False
        self._emit(lines)
        return printed

    def flush(self) -> None:
        """Print the count of a period that is over (call it now and then: a diagnostics timer)."""
        with self._lock:
            lines = self._close_window(self.clock())
        self._emit(lines)

    def _close_window(self, now: float) -> list[str]:
        if self._window_start is None or now - self._window_start < self.period_s:
            return []
        lines = []
        if self._suppressed:
            span = now - self._window_start
            lines.append(f"{self.what}: {self._suppressed} more {self.verb} in the last {min(span, 9999):.1f} s "
                         f"(latest: {self._latest})")
        self._window_start, self._suppressed, self._latest = None, 0, ""
        return lines

    def _emit(self, lines: list[str]) -> None:
        for line in lines:
            self.printed += 1
            if self.level == "error":
                self.logger.error(line)
            elif self.level == "warning":
                self.logger.warning(line)
            else:
                self.logger.info(line)


def describe(e: BaseException) -> str:
    """One line naming an exception: its message for a refusal the code meant (ValueError: a bad
    value it checked), its type and where it was raised for anything else (a bug a message hit)."""
    if isinstance(e, ValueError) and type(e).__name__ in ("ValueError", "MessageError", "ConfigError"):
        return str(e)
    tb = e.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    where = "" if tb is None else f" at {tb.tb_frame.f_code.co_filename.rsplit('/', 1)[-1]}:{tb.tb_lineno}"
    return f"{type(e).__name__}{where}: {e}"
