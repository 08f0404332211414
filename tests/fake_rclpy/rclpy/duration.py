"""rclpy.duration.Duration (nanoseconds; what QoSProfile's lifespan/deadline/lease hold)."""
from __future__ import annotations


class Duration:
    def __init__(self, *, seconds=0, nanoseconds=0):
        total = int(seconds * 1e9) + int(nanoseconds)
        if not (-2**63 <= total < 2**63):
            raise OverflowError(f"Total nanoseconds value is too large to store in C duration: {total}")
        self._ns = total

    @property
    def nanoseconds(self) -> int:
        return self._ns

    def __repr__(self):
        return f"Duration(nanoseconds={self._ns})"

    def __eq__(self, other):
        if isinstance(other, Duration):
            return self._ns == other._ns
        raise TypeError("Can't compare duration with object of type: ", type(other))

    def __hash__(self):
        return hash(self._ns)

    def __lt__(self, other):
        if isinstance(other, Duration):
            return self._ns < other._ns
        return NotImplemented

    def to_msg(self):
        from builtin_interfaces.msg import Duration as DurationMsg

        sec, nsec = divmod(self._ns, 1_000_000_000)
        return DurationMsg(sec=sec, nanosec=nsec)
