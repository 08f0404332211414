"""Fake std_srvs.srv: Trigger and SetBool with Request/Response."""
from rclpy._messages import install

__getattr__ = install("std_srvs", "srv")
