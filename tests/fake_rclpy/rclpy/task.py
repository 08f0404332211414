"""rclpy.task.Future (the part clients and spin_until_future_complete use)."""
from __future__ import annotations

import threading


class Future:
    def __init__(self):
        self._done = threading.Event()
        self._result = None
        self._exception = None
        self._callbacks = []

    def done(self) -> bool:
        return self._done.is_set()

    def result(self):
        if self._exception is not None:
            raise self._exception
        return self._result

    def exception(self):
        return self._exception

    def set_result(self, result) -> None:
        self._result = result
        self._done.set()
        for cb in self._callbacks:
            cb(self)

    def set_exception(self, exc) -> None:
        self._exception = exc
        self._done.set()

    def add_done_callback(self, cb) -> None:
        self._callbacks.append(cb)
        if self.done():
            cb(self)
