"""rclpy.task.Future: result/exception/cancel and done callbacks (called at once here; rclpy
schedules them on the future's executor)."""
from __future__ import annotations

import threading


class Future:
    def __init__(self, *, executor=None):
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._result = None
        self._exception = None
        self._cancelled = False
        self._callbacks = []

    def done(self) -> bool:
        return self._done.is_set()

    def cancelled(self) -> bool:
        return self._cancelled

    def result(self):
        if self._exception is not None:
            raise self._exception
        return self._result

    def exception(self):
        return self._exception

    def _finish(self) -> None:
        with self._lock:
            self._done.set()
            callbacks, self._callbacks = self._callbacks, []
        for cb in callbacks:
            cb(self)

    def set_result(self, result) -> None:
        self._result = result
        self._finish()

    def set_exception(self, exception) -> None:
        self._exception = exception
        self._finish()

    def cancel(self) -> None:
        if not self.done():
            self._cancelled = True
            self._finish()

    def add_done_callback(self, callback) -> None:
        with self._lock:
            if not self._done.is_set():
                self._callbacks.append(callback)
                return
        callback(self)
