"""rclpy.time.Time (nanoseconds, to_msg); Time - Time is a Duration, as in rclpy."""
from __future__ import annotations


class Time:
    def __init__(self, *, seconds: float = 0, nanoseconds: int = 0, clock_type=None):
        from rclpy.clock import ClockType

        if seconds < 0 or nanoseconds < 0:
            raise ValueError("Seconds and nanoseconds must not be negative")
        self._ns = int(seconds * 1_000_000_000) + int(nanoseconds)
        self._clock_type = ClockType.SYSTEM_TIME if clock_type is None else clock_type

    @property
    def nanoseconds(self) -> int:
        return self._ns

    @property
    def clock_type(self):
        return self._clock_type

    def seconds_nanoseconds(self):
        return divmod(self._ns, 1_000_000_000)

    def to_msg(self):
        from builtin_interfaces.msg import Time as TimeMsg

        sec, nsec = divmod(self._ns, 1_000_000_000)
        return TimeMsg(sec=sec, nanosec=nsec)

    def __sub__(self, other):
        from rclpy.duration import Duration

        if isinstance(other, Time):
            if other._clock_type != self._clock_type:
                raise TypeError("Can't subtract times with different clock types")
            return Duration(nanoseconds=self._ns - other._ns)
        if isinstance(other, Duration):
            return Time(nanoseconds=self._ns - other.nanoseconds, clock_type=self._clock_type)
        return NotImplemented

    def __eq__(self, other):
        if isinstance(other, Time):
            if other._clock_type != self._clock_type:
                raise TypeError("Can't compare times with different clock types")
            return self._ns == other._ns
        raise TypeError("Can't compare time with object of type: ", type(other))

    def __lt__(self, other):
        if isinstance(other, Time):
            return self._ns < other._ns
        return NotImplemented

    def __hash__(self):
        return hash((self._ns, self._clock_type))
