"""Project-wide test setup: the fake rclpy, only where real rclpy is missing.

The ROS 2 node tests import `rclpy` and message packages. On a machine with ROS 2 sourced
those are the real ones; elsewhere `tests/fake_rclpy` (rclpy, message packages generated
from rosbags' typestore) goes on sys.path so the same tests run against the fake.
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

FAKE_RCLPY = Path(__file__).resolve().parent / "fake_rclpy"
REAL_RCLPY = importlib.util.find_spec("rclpy") is not None

if not REAL_RCLPY and str(FAKE_RCLPY) not in sys.path:
    sys.path.insert(0, str(FAKE_RCLPY))
