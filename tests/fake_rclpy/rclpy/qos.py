"""QoS profiles (the fields the nodes set) and the DDS matching rules the fake applies."""
from __future__ import annotations

from enum import IntEnum


class ReliabilityPolicy(IntEnum):
    SYSTEM_DEFAULT = 0
    RELIABLE = 1
    BEST_EFFORT = 2


class DurabilityPolicy(IntEnum):
    SYSTEM_DEFAULT = 0
    TRANSIENT_LOCAL = 1
    VOLATILE = 2


class HistoryPolicy(IntEnum):
    SYSTEM_DEFAULT = 0
    KEEP_LAST = 1
    KEEP_ALL = 2


class QoSProfile:
    def __init__(self, *, depth: int = 10, history: HistoryPolicy = HistoryPolicy.KEEP_LAST,
                 reliability: ReliabilityPolicy = ReliabilityPolicy.RELIABLE,
                 durability: DurabilityPolicy = DurabilityPolicy.VOLATILE, **_ignored):
        if not isinstance(depth, int) or depth < 0:
            raise ValueError(f"depth must be a non-negative int, got {depth!r}")
        self.depth, self.history = depth, HistoryPolicy(history)
        self.reliability, self.durability = ReliabilityPolicy(reliability), DurabilityPolicy(durability)

    def __repr__(self):
        return (f"QoSProfile(depth={self.depth}, reliability={self.reliability.name}, "
                f"durability={self.durability.name})")


qos_profile_sensor_data = QoSProfile(depth=5, reliability=ReliabilityPolicy.BEST_EFFORT)
qos_profile_system_default = QoSProfile(depth=10)


def as_profile(qos) -> QoSProfile:
    """rclpy accepts a QoSProfile or an int history depth."""
    if isinstance(qos, QoSProfile):
        return qos
    if isinstance(qos, int) and not isinstance(qos, bool):
        return QoSProfile(depth=qos)
    raise TypeError(f"qos_profile must be a QoSProfile or an int depth, got {qos!r}")


def compatible(pub: QoSProfile, sub: QoSProfile) -> bool:
    """DDS request/offer: a best-effort writer cannot serve a reliable reader, a volatile
    writer cannot serve a transient-local reader."""
    if pub.reliability == ReliabilityPolicy.BEST_EFFORT and sub.reliability == ReliabilityPolicy.RELIABLE:
        return False
    if pub.durability == DurabilityPolicy.VOLATILE and sub.durability == DurabilityPolicy.TRANSIENT_LOCAL:
        return False
    return True
