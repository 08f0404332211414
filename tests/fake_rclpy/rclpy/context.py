"""rclpy.context.Context: init once (ROS arguments parsed as rcl parses them), ok(), shutdown,
on_shutdown callbacks; it also carries the fake's middleware (rclpy._graph.Middleware)."""
from __future__ import annotations

import sys
import threading
import weakref
from inspect import ismethod

from rclpy import _arguments
from rclpy._graph import Middleware
from rclpy._rclpy_pybind11 import RCLError, UnknownROSArgsError


class Context(Middleware):
    def __init__(self):
        super().__init__()
        self._lock = threading.RLock()
        self._initialized = False
        self._ok = False
        self._callbacks: list = []
        self.global_arguments = _arguments.Arguments()
        self._domain_id = 0

    def init(self, args=None, *, initialize_logging: bool = True, domain_id=None) -> None:
        from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy

        with self._lock:
            if domain_id is not None and domain_id < 0:
                raise RuntimeError(f"Domain id ({domain_id}) should not be lower than zero.")
            if self._initialized:
                raise RuntimeError("Context.init() must only be called once")
            try:
                parsed = _arguments.parse(args if args is not None else sys.argv)
            except _arguments.ArgumentError as e:
                raise RCLError(f"failed to initialize rcl: {e}") from None
            if parsed.unknown_ros:
                raise UnknownROSArgsError(repr(parsed.unknown_ros))
            self._initialized = True
            self.global_arguments = parsed
            self._domain_id = domain_id or 0
            if initialize_logging:
                for name, level in parsed.log_levels.items():
                    _rclpy.rclpy_logging_set_logger_level(name, level)
            self._ok = True

    def ok(self) -> bool:
        with self._lock:
            return self._ok

    def _call_on_shutdown_callbacks(self, callbacks) -> None:
        # outside the lock: a callback (an executor's shutdown) may wait for a callback that
        # calls ok()
        for cb in callbacks:
            fn = cb() if isinstance(cb, weakref.WeakMethod) else cb
            if fn is not None:
                fn()

    def shutdown(self) -> None:
        if not self._initialized:
            raise RuntimeError("Context must be initialized before it can be shutdown")
        with self._lock:
            if not self._ok:
                raise RuntimeError("Failed to shutdown: rcl_shutdown already called on the given context")
            self._ok = False
            callbacks, self._callbacks = self._callbacks, []
        self.notify()
        self._call_on_shutdown_callbacks(callbacks)

    def try_shutdown(self) -> None:
        if not self._initialized:
            return
        with self._lock:
            callbacks = []
            if self._ok:
                self._ok = False
                callbacks, self._callbacks = self._callbacks, []
        self.notify()
        self._call_on_shutdown_callbacks(callbacks)

    def on_shutdown(self, callback) -> None:
        if not callable(callback):
            raise TypeError("callback should be a callable, got {}", type(callback))
        with self._lock:
            if not self._ok:
                callback()
            else:
                self._callbacks.append(weakref.WeakMethod(callback) if ismethod(callback) else callback)

    def get_domain_id(self) -> int:
        if not self._ok:
            raise RuntimeError("Context must be initialized before it can have a domain id")
        return self._domain_id
