"""Node clock: ROS time = the system clock (no /clock, no sim time in the fake)."""
from __future__ import annotations

import time as _time

from rclpy.time import Time


class Clock:
    def now(self) -> Time:
        return Time(nanoseconds=_time.time_ns())
