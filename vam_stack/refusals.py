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

The guards every node uses (`refusals.timer`, `refusals.service`, ...; `ros.subscription` guards
its callback with `guarded`) take a node and need no rclpy import here: `guarded` wraps a callback,
`timer` and `service` make a timer or a service whose callback never raises into the executor,
`refusal_log` makes a node's RefusalLog and `flush_refusals` prints what its logs still owe.
"""
from __future__ import annotations

import inspect
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


# --- guards: no message, service call or timer tick ends a node ------------------------------

def refusal_log(node: Any, what: str, level: str = "error", verb: str = "refused") -> Any:
    """A `RefusalLog` on the node's logger, registered on the node so that `flush_refusals` (from its
    diagnostics timer) prints the count of a burst that stopped."""
    log = RefusalLog(node.get_logger(), what, level, verb=verb)
    node.__dict__.setdefault("_vam_refusal_logs", []).append(log)
    return log


def flush_refusals(node: Any) -> None:
    for log in node.__dict__.get("_vam_refusal_logs", ()):
        log.flush()


def guarded(node: Any, what: str, fn: Any, on_error: Any = None, verb: str = "refused") -> Any:
    """`fn` (a subscription or timer callback, plain or async) that never raises into the executor:
    an exception is counted and logged by a rate-limited `refusal_log` (`what` refused: the first
    reason of each second in full, then a count), then `on_error(exc)` runs (itself guarded: a
    node's fallback, e.g. hold the arm). rclpy's executor ends the spin on any exception a
    callback raises; what a message or a timer tick can do wrong must not end the node."""
    log = refusal_log(node, what, verb=verb)

    def failed(e: Exception) -> None:
        log.refuse(describe(e))
        if on_error is not None:
            try:
                on_error(e)
            except Exception as e2:             # the fallback failed too: say so, keep spinning
                log.refuse(f"and its fallback failed: {describe(e2)}")

    if inspect.iscoroutinefunction(fn):
        async def guarded_async(*args):
            try:
                return await fn(*args)
            except Exception as e:
                failed(e)
        return guarded_async

    def guarded_call(*args):
        try:
            return fn(*args)
        except Exception as e:
            failed(e)
    return guarded_call


def timer(node: Any, period_s: float, fn: Any, what: str, callback_group: Any = None, on_error: Any = None) -> Any:
    """`node.create_timer` with its callback `guarded` (`what` names it in the log: "diagnostics";
    `on_error(exc)` is the node's fallback after a tick that raised)."""
    return node.create_timer(period_s, guarded(node, what, fn, on_error, verb="failed"), callback_group=callback_group)


def service(node: Any, srv_type: Any, name: str, handler: Any, callback_group: Any = None) -> Any:
    """`node.create_service` whose handler (plain or async) never raises into the executor: an
    exception answers the call with success false (where the response has `success`) and the
    reason in `message`, logged rate-limited."""
    log = refusal_log(node, f"call of {name}", verb="failed")

    def failed(e: Exception, response: Any) -> Any:
        reason = f"internal error: {describe(e)}"
        log.refuse(reason)
        if hasattr(response, "success"):
            response.success = False
        if hasattr(response, "message"):
            response.message = reason
        return response

    if inspect.iscoroutinefunction(handler):
        async def call(request, response):
            try:
                return await handler(request, response)
            except Exception as e:
                return failed(e, response)
    else:
        def call(request, response):
            try:
                return handler(request, response)
            except Exception as e:
                return failed(e, response)
    return node.create_service(srv_type, name, call, callback_group=callback_group)
