"""rclpy.qos: QoSProfile with rclpy's constructor rules, the policy enums, the predefined
profiles, and the DDS request/offer matching the fake's middleware applies.

QoSProfile as in rclpy (Humble and Jazzy, rclpy/qos.py): keyword arguments only; a keyword
that is not one of history, depth, reliability, durability, lifespan, deadline, liveliness,
liveliness_lease_duration, avoid_ros_namespace_conventions fails the constructor's assert
(AssertionError "Invalid arguments passed to constructor"); neither history nor depth raises
InvalidQoSProfileException ("History and/or depth settings are required."); depth alone
means KEEP_LAST; KEEP_LAST without depth raises ("History set to KEEP_LAST without a depth
setting."); the rest default to rmw's qos_profile_default (depth 10, reliable, volatile).
Each setter asserts its type (an enum member or int for the policies, int for depth,
Duration for the durations, bool for avoid_ros_namespace_conventions); __slots__ refuse any
other attribute. Jazzy warns for KEEP_LAST with depth 0.
"""
from __future__ import annotations

import warnings
from enum import IntEnum

from rclpy.duration import Duration


class InvalidQoSProfileException(Exception):
    def __init__(self, *args):
        Exception.__init__(self, "Invalid QoSProfile", *args)


class QoSPolicyEnum(IntEnum):
    @classmethod
    def short_keys(cls):
        return [k.lower() for k in cls.__members__.keys()]

    @property
    def short_key(self):
        return self.name.lower()


class HistoryPolicy(QoSPolicyEnum):
    SYSTEM_DEFAULT = 0
    KEEP_LAST = 1
    KEEP_ALL = 2
    UNKNOWN = 3


class ReliabilityPolicy(QoSPolicyEnum):
    SYSTEM_DEFAULT = 0
    RELIABLE = 1
    BEST_EFFORT = 2
    UNKNOWN = 3
    BEST_AVAILABLE = 4  # Jazzy


class DurabilityPolicy(QoSPolicyEnum):
    SYSTEM_DEFAULT = 0
    TRANSIENT_LOCAL = 1
    VOLATILE = 2
    UNKNOWN = 3
    BEST_AVAILABLE = 4  # Jazzy


class LivelinessPolicy(QoSPolicyEnum):
    SYSTEM_DEFAULT = 0
    AUTOMATIC = 1
    MANUAL_BY_TOPIC = 3
    UNKNOWN = 4
    BEST_AVAILABLE = 5  # Jazzy


QoSHistoryPolicy = HistoryPolicy
QoSReliabilityPolicy = ReliabilityPolicy
QoSDurabilityPolicy = DurabilityPolicy
QoSLivelinessPolicy = LivelinessPolicy

_INFINITE = Duration()  # rmw's "unspecified" durations are 0
_DEFAULTS = dict(depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.VOLATILE,
                 lifespan=_INFINITE, deadline=_INFINITE, liveliness=LivelinessPolicy.SYSTEM_DEFAULT,
                 liveliness_lease_duration=_INFINITE, avoid_ros_namespace_conventions=False)


class QoSProfile:
    __slots__ = ["_history", "_depth", "_reliability", "_durability", "_lifespan", "_deadline", "_liveliness",
                 "_liveliness_lease_duration", "_avoid_ros_namespace_conventions"]

    def __init__(self, **kwargs):
        assert all("_" + key in self.__slots__ for key in kwargs.keys()), \
            "Invalid arguments passed to constructor: %r" % kwargs.keys()
        if "history" not in kwargs:
            if "depth" not in kwargs:
                raise InvalidQoSProfileException("History and/or depth settings are required.")
            kwargs["history"] = HistoryPolicy.KEEP_LAST
        self.history = kwargs["history"]
        if self.history == HistoryPolicy.KEEP_LAST and "depth" not in kwargs:
            raise InvalidQoSProfileException("History set to KEEP_LAST without a depth setting.")
        for key, default in _DEFAULTS.items():
            setattr(self, key, kwargs.get(key, default))

    @property
    def history(self):
        return self._history

    @history.setter
    def history(self, value):
        assert isinstance(value, (HistoryPolicy, int))
        self._history = HistoryPolicy(value)

    @property
    def reliability(self):
        return self._reliability

    @reliability.setter
    def reliability(self, value):
        assert isinstance(value, (ReliabilityPolicy, int))
        self._reliability = ReliabilityPolicy(value)

    @property
    def durability(self):
        return self._durability

    @durability.setter
    def durability(self, value):
        assert isinstance(value, (DurabilityPolicy, int))
        self._durability = DurabilityPolicy(value)

    @property
    def depth(self):
        return self._depth

    @depth.setter
    def depth(self, value):
        assert isinstance(value, int)
        self._depth = value
        if self.history == HistoryPolicy.KEEP_LAST and value == 0:
            warnings.warn("A zero depth with KEEP_LAST doesn't make sense; no data could be stored. "
                          "This will be interpreted as SYSTEM_DEFAULT")

    @property
    def lifespan(self):
        return self._lifespan

    @lifespan.setter
    def lifespan(self, value):
        assert isinstance(value, Duration)
        self._lifespan = value

    @property
    def deadline(self):
        return self._deadline

    @deadline.setter
    def deadline(self, value):
        assert isinstance(value, Duration)
        self._deadline = value

    @property
    def liveliness(self):
        return self._liveliness

    @liveliness.setter
    def liveliness(self, value):
        assert isinstance(value, (LivelinessPolicy, int))
        self._liveliness = LivelinessPolicy(value)

    @property
    def liveliness_lease_duration(self):
        return self._liveliness_lease_duration

    @liveliness_lease_duration.setter
    def liveliness_lease_duration(self, value):
        assert isinstance(value, Duration)
        self._liveliness_lease_duration = value

    @property
    def avoid_ros_namespace_conventions(self):
        return self._avoid_ros_namespace_conventions

    @avoid_ros_namespace_conventions.setter
    def avoid_ros_namespace_conventions(self, value):
        assert isinstance(value, bool)
        self._avoid_ros_namespace_conventions = value

    def __eq__(self, other):
        if not isinstance(other, QoSProfile):
            return False
        return all(getattr(self, s) == getattr(other, s) for s in self.__slots__)

    __hash__ = None

    def __str__(self):
        return f"{type(self).__name__}(%s)" % ", ".join(f"{s[1:]}=%s" % getattr(self, s) for s in self.__slots__)


def _predefined(history, depth, reliability, durability) -> QoSProfile:
    return QoSProfile(history=history, depth=depth, reliability=reliability, durability=durability)


# rmw/qos_profiles.h
qos_profile_default = _predefined(HistoryPolicy.KEEP_LAST, 10, ReliabilityPolicy.RELIABLE, DurabilityPolicy.VOLATILE)
qos_profile_system_default = _predefined(HistoryPolicy.SYSTEM_DEFAULT, 0, ReliabilityPolicy.SYSTEM_DEFAULT,
                                         DurabilityPolicy.SYSTEM_DEFAULT)
qos_profile_sensor_data = _predefined(HistoryPolicy.KEEP_LAST, 5, ReliabilityPolicy.BEST_EFFORT,
                                      DurabilityPolicy.VOLATILE)
qos_profile_services_default = _predefined(HistoryPolicy.KEEP_LAST, 10, ReliabilityPolicy.RELIABLE,
                                           DurabilityPolicy.VOLATILE)
qos_profile_parameters = _predefined(HistoryPolicy.KEEP_LAST, 1000, ReliabilityPolicy.RELIABLE,
                                     DurabilityPolicy.VOLATILE)
qos_profile_parameter_events = _predefined(HistoryPolicy.KEEP_LAST, 1000, ReliabilityPolicy.RELIABLE,
                                           DurabilityPolicy.VOLATILE)


class QoSPresetProfiles:
    DEFAULT = qos_profile_default
    SYSTEM_DEFAULT = qos_profile_system_default
    SENSOR_DATA = qos_profile_sensor_data
    SERVICES_DEFAULT = qos_profile_services_default
    PARAMETERS = qos_profile_parameters
    PARAMETER_EVENTS = qos_profile_parameter_events


def validate_qos_or_depth(qos_or_depth) -> QoSProfile:
    """What Node.create_publisher/create_subscription do with their qos_profile argument."""
    if isinstance(qos_or_depth, QoSProfile):
        return qos_or_depth
    if isinstance(qos_or_depth, int):
        if qos_or_depth < 0:
            raise ValueError("history depth must be greater than or equal to zero")
        return QoSProfile(depth=qos_or_depth)
    raise TypeError("Expected QoSProfile or int, but received {!r}".format(type(qos_or_depth)))


def as_profile(qos) -> QoSProfile:
    return validate_qos_or_depth(qos)


def check_c_profile(qos: QoSProfile) -> None:
    """rclpy converts the profile to rmw_qos_profile_t (size_t depth) when the entity is made."""
    if qos.depth < 0:
        raise TypeError(f"rmw_qos_profile_t depth must be a non-negative integer, got {qos.depth}")


def _effective(qos: QoSProfile):
    """SYSTEM_DEFAULT / BEST_AVAILABLE as the DDS vendors resolve them (reliable, volatile)."""
    rel = qos.reliability
    if rel in (ReliabilityPolicy.SYSTEM_DEFAULT, ReliabilityPolicy.BEST_AVAILABLE, ReliabilityPolicy.UNKNOWN):
        rel = ReliabilityPolicy.RELIABLE
    dur = qos.durability
    if dur in (DurabilityPolicy.SYSTEM_DEFAULT, DurabilityPolicy.BEST_AVAILABLE, DurabilityPolicy.UNKNOWN):
        dur = DurabilityPolicy.VOLATILE
    return rel, dur


def compatible(pub: QoSProfile, sub: QoSProfile) -> bool:
    """DDS request/offer: a best-effort writer cannot serve a reliable reader, a volatile
    writer cannot serve a transient-local reader."""
    prel, pdur = _effective(pub)
    srel, sdur = _effective(sub)
    if prel == ReliabilityPolicy.BEST_EFFORT and srel == ReliabilityPolicy.RELIABLE:
        return False
    if pdur == DurabilityPolicy.VOLATILE and sdur == DurabilityPolicy.TRANSIENT_LOCAL:
        return False
    return True
