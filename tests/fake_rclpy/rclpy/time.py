"""rclpy.time.Time (nanoseconds, to_msg) and rclpy.duration.Duration-like arithmetic."""
from __future__ import annotations


class Time:
    def __init__(self, *, seconds: float = 0, nanoseconds: int = 0):
        self._ns = int(seconds * 1_000_000_000) + int(nanoseconds)

    @property
    def nanoseconds(self) -> int:
        return self._ns

    def seconds_nanoseconds(self):
        return divmod(self._ns, 1_000_000_000)

    def to_msg(self):
        from builtin_interfaces.msg import Time as TimeMsg

        sec, nsec = divmod(self._ns, 1_000_000_000)
        return TimeMsg(sec=sec, nanosec=nsec)

    def __sub__(self, other):
        return self._ns - other._ns
