"""rclpy.clock: Clock(clock_type=...) and ROSClock. ROS time is the system clock in the fake
(no /clock, no sim time); STEADY_TIME is the monotonic clock."""
from __future__ import annotations

import time as _time
from enum import IntEnum

from rclpy.time import Time


class ClockType(IntEnum):
    UNINITIALIZED = 0
    ROS_TIME = 1
    SYSTEM_TIME = 2
    STEADY_TIME = 3


class Clock:
    def __init__(self, *, clock_type: ClockType = ClockType.SYSTEM_TIME):
        if not isinstance(clock_type, ClockType):
            raise TypeError("Clock type must be a ClockType enum")
        self._clock_type = clock_type

    @property
    def clock_type(self) -> ClockType:
        return self._clock_type

    def __repr__(self):
        return f"Clock(clock_type={self._clock_type.name})"

    def now(self) -> Time:
        ns = _time.monotonic_ns() if self._clock_type == ClockType.STEADY_TIME else _time.time_ns()
        return Time(nanoseconds=ns, clock_type=self._clock_type)


class ROSClock(Clock):
    def __init__(self):
        super().__init__(clock_type=ClockType.ROS_TIME)

    @property
    def ros_time_is_active(self) -> bool:
        return False
