"""Executors: one callback at a time in the spinning thread (the multi-threaded one is the same
here; the nodes never rely on callbacks running in parallel)."""
from __future__ import annotations

import time as _time


class ExternalShutdownException(Exception):
    """Raised by spin when the context is shut down from outside (as in rclpy)."""


class SingleThreadedExecutor:
    def __init__(self, *, context=None):
        import rclpy

        self.context = context or rclpy.get_default_context()
        self._nodes = []

    def add_node(self, node) -> bool:
        if node not in self._nodes:
            self._nodes.append(node)
            node.executor = self  # rclpy does the same: a node subclass must not shadow `executor`
        return True

    def remove_node(self, node) -> None:
        if node in self._nodes:
            self._nodes.remove(node)

    def get_nodes(self):
        return list(self._nodes)

    def spin_once(self, timeout_sec: float | None = None) -> None:
        end = None if timeout_sec is None or timeout_sec < 0 else _time.monotonic() + timeout_sec
        ctx = self.context
        while ctx.ok:
            now = _time.monotonic()
            due = None
            for node in list(self._nodes):
                work, node_due = node._ready_work(now)
                if work is not None:
                    work()
                    return
                if node_due is not None:
                    due = node_due if due is None else min(due, node_due)
            waits = [t - now for t in (due, end) if t is not None]
            wait = min(waits) if waits else 0.1
            if end is not None and now >= end:
                return
            with ctx.cond:
                ctx.cond.wait(max(min(wait, 0.1), 0.0))

    def spin(self) -> None:
        while self.context.ok:
            self.spin_once(0.1)

    def spin_until_future_complete(self, future, timeout_sec: float | None = None) -> None:
        end = None if timeout_sec is None else _time.monotonic() + timeout_sec
        while self.context.ok and not future.done():
            if end is not None and _time.monotonic() >= end:
                return
            self.spin_once(0.05 if end is None else max(min(0.05, end - _time.monotonic()), 0.0))

    def shutdown(self, timeout_sec: float | None = None) -> bool:
        self._nodes = []
        return True


MultiThreadedExecutor = SingleThreadedExecutor
