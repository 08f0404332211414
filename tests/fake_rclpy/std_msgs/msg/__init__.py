"""Fake std_msgs.msg: message classes generated on first use."""
from rclpy._messages import install

__getattr__ = install("std_msgs", "msg")
