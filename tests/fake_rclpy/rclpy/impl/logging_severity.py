"""rclpy.impl.logging_severity.LoggingSeverity: rcutils' severities (values as in rcutils)."""
from enum import IntEnum


class LoggingSeverity(IntEnum):
    UNSET = 0
    DEBUG = 10
    INFO = 20
    WARN = 30
    ERROR = 40
    FATAL = 50
