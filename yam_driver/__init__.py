"""yam_driver: bimanual YAM arm driver (plain Python, no rclpy).

14-dim absolute joint targets (2 arms x (6 joints + gripper); radians, grippers as an opening
fraction 0 = closed .. 1 = open) in; Dynamixel Protocol 2.0 (dynamixel_sdk) or Damiao
DM4340/DM4310 MIT-mode CAN (python-can) commands out. `YamDriver` adds the start-up ramp,
target watchdog, per-joint fault latching and shutdown; `yam_driver.emulators` provides
servo emulators with fault injection for tests, benchmarks and demos.
"""
from .bus import BusError, BusMismatchError, BusReading, JointBus, WriteResult
from .config import DriverConfig, JointMap, load_config
from .buses import make_bus
from .driver import YamDriver
from .faults import JointFault, LoopStats, Mode, TickReport

__all__ = [
    "BusError", "BusMismatchError", "BusReading", "JointBus", "WriteResult", "make_bus",
    "DriverConfig", "JointMap", "load_config",
    "JointFault", "LoopStats", "Mode", "TickReport", "YamDriver",
]
