"""rclpy.logging: get_logger(name) (a new RcutilsLogger under the root logger each call, as in
rclpy, so its call-site contexts are its own), logger levels, severities."""
from __future__ import annotations

from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from rclpy.impl.logging_severity import LoggingSeverity
from rclpy.impl.rcutils_logger import RcutilsLogger

__all__ = ["LoggingSeverity", "get_logger", "set_logger_level", "get_logger_effective_level",
           "get_logger_level", "get_logging_severity_from_string", "initialize", "shutdown", "clear_config"]

_root_logger = RcutilsLogger()


def get_logger(name: str) -> RcutilsLogger:
    if not name:
        raise ValueError("Logger name must not be empty.")
    return _root_logger.get_child(name)


def initialize() -> None:
    _rclpy.rclpy_logging_initialize()


def shutdown() -> None:
    _rclpy.rclpy_logging_shutdown()


def clear_config() -> None:
    shutdown()
    initialize()


def set_logger_level(name: str, level, detailed_error: bool = False) -> None:
    _rclpy.rclpy_logging_set_logger_level(name, LoggingSeverity(level), detailed_error)


def get_logger_effective_level(name: str) -> LoggingSeverity:
    return LoggingSeverity(_rclpy.rclpy_logging_get_logger_effective_level(name))


def get_logger_level(name: str) -> LoggingSeverity:
    return LoggingSeverity(_rclpy.rclpy_logging_get_logger_level(name))


def get_logging_severity_from_string(log_severity: str) -> LoggingSeverity:
    return LoggingSeverity(_rclpy.rclpy_logging_severity_level_from_string(log_severity))
