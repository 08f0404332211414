"""rclpy.logging.get_logger for code outside a node."""
from __future__ import annotations

import logging as _pylogging


class _Logger:
    def __init__(self, name):
        self._py = _pylogging.getLogger(f"fake_rclpy.{name}")

    def debug(self, m, **_):
        self._py.debug(m)

    def info(self, m, **_):
        self._py.info(m)

    def warning(self, m, **_):
        self._py.warning(m)

    warn = warning

    def error(self, m, **_):
        self._py.error(m)

    def fatal(self, m, **_):
        self._py.critical(m)


def get_logger(name: str) -> _Logger:
    return _Logger(name)
