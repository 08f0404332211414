"""Fake diagnostic_msgs.msg: message classes generated on first use."""
from rclpy._messages import install

__getattr__ = install("diagnostic_msgs", "msg")
