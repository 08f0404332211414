"""What rclpy's C extension (`rclpy._rclpy_pybind11`) provides to the fake: its exception
classes and rcutils' logging state (logger levels, the console and /rosout output).

Exceptions as `_rclpy_pybind11.cpp` registers them: RCLError, RCUtilsError, RMWError and
UnknownROSArgsError derive from RuntimeError; RCLInvalidROSArgsError from RCLError.
"""
from __future__ import annotations

import logging as _pylogging
import threading


class RCUtilsError(RuntimeError):
    pass


class RMWError(RuntimeError):
    pass


class RCLError(RuntimeError):
    pass


class RCLInvalidROSArgsError(RCLError):
    pass


class UnknownROSArgsError(RuntimeError):
    pass


class InvalidHandle(RuntimeError):
    pass


# --- rcutils logging ----------------------------------------------------------------------
# rcutils keeps one level per logger name (0 = unset: ask the ancestor, "a.b" -> "a") and a
# default level, INFO unless `--ros-args --log-level LEVEL` says otherwise.
_SEVERITY_NAMES = {"UNSET": 0, "DEBUG": 10, "INFO": 20, "WARN": 30, "WARNING": 30, "ERROR": 40, "FATAL": 50}
_lock = threading.RLock()
_levels: dict[str, int] = {}
_default_level = 20
# logger name -> callable(severity, name, message, function, file, line): a node's /rosout
# publisher (rcl's rosout handler publishes what a node's logger logs)
_rosout_sinks: dict[str, object] = {}


def rclpy_logging_severity_level_from_string(text: str) -> int:
    if not isinstance(text, str) or text.upper() not in _SEVERITY_NAMES:
        raise RuntimeError("Failed to get severity name")
    return _SEVERITY_NAMES[text.upper()]


def rclpy_logging_set_logger_level(name: str, level: int, detailed_error: bool = False) -> None:
    global _default_level
    level = int(level)
    if level not in _SEVERITY_NAMES.values():
        raise RuntimeError("Failed to set level for logger")
    with _lock:
        if name == "":
            _default_level = level or 20
        else:
            _levels[name] = level


def rclpy_logging_get_logger_level(name: str) -> int:
    with _lock:
        return _levels.get(name, 0) if name else _default_level


def rclpy_logging_get_logger_effective_level(name: str) -> int:
    with _lock:
        while name:
            level = _levels.get(name, 0)
            if level:
                return level
            name = name.rpartition(".")[0]
        return _default_level


def rclpy_logging_logger_is_enabled_for(name: str, severity: int) -> bool:
    return int(severity) >= rclpy_logging_get_logger_effective_level(name)


def rclpy_logging_initialize() -> None:
    pass


def rclpy_logging_shutdown() -> None:
    """Forget every logger level (as rcutils_logging_shutdown does)."""
    global _default_level
    with _lock:
        _levels.clear()
        _default_level = 20


def rclpy_logging_get_separator_string() -> str:
    return "."


def rclpy_logging_rcutils_log(severity: int, name: str, message, function_name: str, file_path: str,
                              line_number: int) -> None:
    # the C function takes `const char * message`: pybind11 refuses anything but a str
    if not isinstance(message, str):
        raise TypeError("rclpy_logging_rcutils_log(): incompatible function arguments: message must be "
                        f"str, got {type(message).__name__}")
    _pylogging.getLogger(f"fake_rclpy.{name}").log(int(severity), message)
    sink = _rosout_sinks.get(name)
    if sink is not None:
        sink(int(severity), name, message, function_name, file_path, int(line_number))


def register_rosout(name: str, sink) -> None:
    with _lock:
        _rosout_sinks[name] = sink


def unregister_rosout(name: str, sink) -> None:
    with _lock:
        if _rosout_sinks.get(name) is sink:
            del _rosout_sinks[name]
