"""Fake builtin_interfaces.msg: message classes generated on first use."""
from rclpy._messages import install

__getattr__ = install("builtin_interfaces", "msg")
