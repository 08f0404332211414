"""rclpy.impl.rcutils_logger.RcutilsLogger with rclpy's rules (Humble and Jazzy alike):

* A call is dropped, before any other check, when the logger is not enabled for its severity
  (the default level is INFO: a debug call does nothing, and is not remembered).
* Every call site (caller's function, file, line and bytecode offset, found by walking out of
  rclpy's own logging files) keeps a context: the first call fixes its severity, logger name,
  filters and filter parameters; a later call from the same site that changes any of them
  raises ValueError ("Logger severity cannot be changed between calls.", ...).
* Keyword arguments: `name`, and the filters' parameters `throttle_duration_sec`,
  `throttle_time_source_type` (a Clock, default a system-time Clock), `skip_first`, `once`.
  A filter is on when one of its parameters is truthy; an unknown keyword raises TypeError
  ('parameter "x" is not one of the recognized logging options "[...]"').
* Filters run in the order throttle, skip_first, once; the first that refuses stops the call
  (and the later ones keep their state): throttle logs when `throttle_duration_sec` has passed
  since the last logged call (the first call logs), skip_first drops the first call, once logs
  the first call only.
* The message goes to rcutils as a C string: anything but a str raises TypeError.
"""
from __future__ import annotations

import inspect
import os

from rclpy.clock import Clock
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from rclpy.impl.logging_severity import LoggingSeverity

_internal_files: list[str] = []


def _find_caller(frame):
    """The first frame outside rclpy's logging files (this one and rclpy/logging.py)."""
    if not _internal_files:
        import rclpy.logging

        _internal_files.extend([os.path.realpath(__file__), os.path.realpath(rclpy.logging.__file__)])
    while frame is not None and any(f in os.path.realpath(frame.f_code.co_filename) for f in _internal_files):
        frame = frame.f_back
    return frame


def _caller_id(frame):
    return (frame.f_code.co_name, os.path.abspath(frame.f_code.co_filename), frame.f_lineno, frame.f_lasti)


_SYSTEM_CLOCK = Clock()
# filter -> its parameters and their defaults (None: required once the filter is on)
_FILTERS = {
    "throttle": {"throttle_duration_sec": None, "throttle_time_source_type": _SYSTEM_CLOCK},
    "skip_first": {"skip_first": None},
    "once": {"once": None},
}
_ALL_PARAMS = [p for params in _FILTERS.values() for p in params]


def _detect_filters(kwargs: dict) -> list[str]:
    on = [f for f, params in _FILTERS.items() if any(kwargs.get(p) for p in params)]
    for f in on:
        for p, default in _FILTERS[f].items():
            if p not in kwargs and default is None:
                raise TypeError(f'required parameter "{p}" not specified '
                                f'but is required for the the logging filter "{f}"')
    for k in kwargs:
        if k not in _ALL_PARAMS:
            raise TypeError(f'parameter "{k}" is not one of the recognized logging options "{_ALL_PARAMS}"')
    return on


def _init_filter(f: str, context: dict, kwargs: dict) -> None:
    for p, default in _FILTERS[f].items():
        context[p] = kwargs.get(p, default)
        if context[p] is None:
            raise TypeError(f'Required parameter "{p}" was not specified for logging filter "{f}"')
    if f == "throttle":
        context["throttle_last_logged"] = 0
        if not isinstance(context["throttle_time_source_type"], Clock):
            raise ValueError(f'Received throttle_time_source_type of "{context["throttle_time_source_type"]}" '
                             "is not a clock instance")
    elif f == "skip_first":
        context["first_has_been_skipped"] = False
    elif f == "once":
        context["has_been_logged_once"] = False


def _should_log(f: str, context: dict) -> bool:
    if f == "throttle":
        now = context["throttle_time_source_type"].now().nanoseconds
        if now >= context["throttle_last_logged"] + context["throttle_duration_sec"] * 1e9:
            context["throttle_last_logged"] = now
            return True
        return False
    if f == "skip_first":
        if not context["first_has_been_skipped"]:
            context["first_has_been_skipped"] = True
            return False
        return True
    if not context["has_been_logged_once"]:  # once
        context["has_been_logged_once"] = True
        return True
    return False


class RcutilsLogger:
    def __init__(self, name: str = ""):
        self.name = name
        self.contexts: dict = {}

    def get_child(self, name: str) -> "RcutilsLogger":
        if not name:
            raise ValueError("Child logger name must not be empty.")
        return RcutilsLogger(name=f"{self.name}.{name}" if self.name else name)

    def set_level(self, level) -> None:
        _rclpy.rclpy_logging_set_logger_level(self.name, LoggingSeverity(level))

    def get_effective_level(self) -> LoggingSeverity:
        return LoggingSeverity(_rclpy.rclpy_logging_get_logger_effective_level(self.name))

    def is_enabled_for(self, severity) -> bool:
        return _rclpy.rclpy_logging_logger_is_enabled_for(self.name, LoggingSeverity(severity))

    def log(self, message, severity, **kwargs) -> bool:
        if not self.is_enabled_for(severity):
            return False
        severity = LoggingSeverity(severity)
        name = kwargs.pop("name", self.name)
        filters = _detect_filters(kwargs)
        frame = _find_caller(inspect.currentframe())
        caller = _caller_id(frame)
        context = self.contexts.get(caller)
        if context is None:
            context = {"name": name, "severity": severity}
            for f in filters:
                _init_filter(f, context, kwargs)
            context["filters"] = filters
            self.contexts[caller] = context
        else:
            if severity != context["severity"]:
                raise ValueError("Logger severity cannot be changed between calls.")
            if name != context["name"]:
                raise ValueError("Logger name cannot be changed between calls.")
            if filters != context["filters"]:
                raise ValueError("Requested logging filters cannot be changed between calls.")
            for f in filters:
                if any(context[p] != kwargs.get(p, d) for p, d in _FILTERS[f].items()):
                    raise ValueError("Logging filter parameters cannot be changed between calls.")
        for f in context["filters"]:
            if not _should_log(f, context):
                return False
        _rclpy.rclpy_logging_rcutils_log(severity, name, message, caller[0], caller[1], caller[2])
        return True

    def debug(self, message, **kwargs) -> bool:
        return self.log(message, LoggingSeverity.DEBUG, **kwargs)

    def info(self, message, **kwargs) -> bool:
        return self.log(message, LoggingSeverity.INFO, **kwargs)

    def warning(self, message, **kwargs) -> bool:
        return self.log(message, LoggingSeverity.WARN, **kwargs)

    def warn(self, message, **kwargs) -> bool:
        return self.warning(message, **kwargs)

    def error(self, message, **kwargs) -> bool:
        return self.log(message, LoggingSeverity.ERROR, **kwargs)

    def fatal(self, message, **kwargs) -> bool:
        return self.log(message, LoggingSeverity.FATAL, **kwargs)
