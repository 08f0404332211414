"""The bus implementation a driver config names: `make_bus(config)`. Its own module so that
bus.py, the base every bus builds on, imports none of them (no import loop)."""
from __future__ import annotations

from .bus import JointBus
from .config import DriverConfig


def make_bus(config: DriverConfig) -> JointBus:
    """The bus implementation `config.bus` names, unconnected."""
    if config.bus == "dynamixel":
        from .dynamixel_bus import DynamixelBus      # dynamixel_sdk: only for a Dynamixel arm

        return DynamixelBus(config)
    from .damiao_bus import DamiaoBus                # python-can: only for a Damiao arm

    return DamiaoBus(config)
