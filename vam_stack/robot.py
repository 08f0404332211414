"""The one description of the bimanual YAM arm (config/yam_robot.yaml) and the checks against it.

Three layers hold limits, from the outside in:
- the robot description: the mechanical joint ranges and the speed ceilings no configuration
  may exceed (this module);
- the safety filter in the policy node (config/yam_safety.yaml): the model range shrunk by a
  margin, per-tick velocity limits, staleness and the e-stop latch;
- the driver (config/yam_driver_*.yaml): its own joint limits, slew limit and watchdog, which
  must sit inside the filter's, so a command that reached the driver some other way is still
  bounded no looser than the filter would have bounded it (defence in depth).

`check_safety` and `check_driver` run when those configs are built; `check_layers` compares a
driver config with a safety config (the driver node runs it at start-up). Every error names
both numbers.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from vam_stack.config import ConfigError, check, from_yaml
from vam_stack.paths import config_dir


@dataclass(frozen=True)
class RobotDescription:
    """Names, joint ranges and speed ceilings of the arm (see config/yam_robot.yaml for sources)."""

    arms: tuple[str, ...]  # arm names in target order (joint names are published as <arm>_<joint>)
    joint_names: tuple[str, ...]  # revolute joints of one arm, in order
    gripper_name: str  # the gripper, after the joints of its arm
    joint_lower: tuple[float, ...]  # rad, mechanical range (the arm's model)
    joint_upper: tuple[float, ...]  # rad
    max_joint_speed: tuple[float, ...]  # rad/s: no configured joint speed may exceed this
    gripper_min: float  # normalised gripper command range
    gripper_max: float
    max_gripper_speed: float  # normalised units per second: ceiling for configured gripper speeds
    min_rate_hz: float  # command and control rates must be within [min_rate_hz, max_rate_hz]
    max_rate_hz: float
    max_watchdog_s: float  # ceiling for every watchdog or staleness limit [s]
    rate_hz: float  # the control rate: targets per second, the filter's step, the driver's loop, the leader's reads
    chunk: int  # actions per replan on the robot path (the executor's default; a policy's spec may differ)
    execute: int  # actions run from each chunk before the next takes over

    YAML_REQUIRED = ("arms", "joint_names", "gripper_name", "joint_lower", "joint_upper", "max_joint_speed",
                     "gripper_min", "gripper_max", "max_gripper_speed", "min_rate_hz", "max_rate_hz",
                     "max_watchdog_s", "rate_hz", "chunk", "execute")

    def __post_init__(self) -> None:
        n = len(self.joint_names)
        check(n >= 1 and len(set(self.joint_names)) == n, f"joint_names must be unique and non-empty, got {self.joint_names!r}")
        check(len(self.arms) >= 1 and len(set(self.arms)) == len(self.arms), f"arms must be unique, got {self.arms!r}")
        for name in ("joint_lower", "joint_upper", "max_joint_speed"):
            v = getattr(self, name)
            check(len(v) == n and all(math.isfinite(x) for x in v),
                  f"{name} needs {n} finite values (one per joint), got {v!r}")
        for i, (lo, hi) in enumerate(zip(self.joint_lower, self.joint_upper)):
            check(lo < hi, f"{self.joint_names[i]}: joint_lower {lo!r} must be < joint_upper {hi!r}")
        check(all(v > 0 for v in self.max_joint_speed), f"max_joint_speed must be > 0, got {self.max_joint_speed!r}")
        check(self.gripper_min < self.gripper_max, f"gripper range must have min < max, got "
                                                   f"[{self.gripper_min!r}, {self.gripper_max!r}]")
        check(self.max_gripper_speed > 0, f"max_gripper_speed must be > 0, got {self.max_gripper_speed!r}")
        check(0 < self.min_rate_hz < self.max_rate_hz, f"need 0 < min_rate_hz < max_rate_hz, got "
                                                       f"{self.min_rate_hz!r}, {self.max_rate_hz!r}")
        check(0 < self.max_watchdog_s, f"max_watchdog_s must be > 0, got {self.max_watchdog_s!r}")
        _rate("robot ", "rate_hz", self.rate_hz, self)
        check(isinstance(self.chunk, int) and isinstance(self.execute, int) and 1 <= self.execute <= self.chunk,
              f"need integers 1 <= execute <= chunk, got chunk {self.chunk!r}, execute {self.execute!r}")

    @property
    def arm_joints(self) -> int:
        """Revolute joints per arm (6 on the YAM)."""
        return len(self.joint_names)

    @property
    def dof_per_arm(self) -> int:
        """Joints plus the gripper per arm (7 on the YAM)."""
        return len(self.joint_names) + 1

    @property
    def dim(self) -> int:
        """Length of one whole-robot target (14 on the bimanual YAM)."""
        return len(self.arms) * self.dof_per_arm

    def published_names(self) -> list[str]:
        """<arm>_<joint> for every joint and gripper, in target order."""
        return [f"{a}_{j}" for a in self.arms for j in (*self.joint_names, self.gripper_name)]


DEFAULT_PATH = "yam_robot.yaml"


@lru_cache(maxsize=8)
def _load(path: str) -> RobotDescription:
    return from_yaml(RobotDescription, path, "yam_robot")


def load_robot(path: str | Path | None = None) -> RobotDescription:
    """The robot description (default config/yam_robot.yaml); read once per path."""
    return _load(str(Path(path) if path is not None else config_dir() / DEFAULT_PATH))


def _rate(where: str, name: str, value: float, robot: RobotDescription) -> None:
    check(isinstance(value, (int, float)) and math.isfinite(value) and robot.min_rate_hz <= value <= robot.max_rate_hz,
          f"{where}{name} must be in [{robot.min_rate_hz:g}, {robot.max_rate_hz:g}] Hz, got {value!r}")


def robot_rate(where: str, value: float | None, robot: RobotDescription | None = None, name: str = "rate_hz") -> float:
    """The control rate a config runs at: the robot description's `rate_hz` (config/yam_robot.yaml, its
    one source) when `value` is None; a config that still states one must agree (ConfigError naming both)."""
    r = robot or load_robot()
    if value is None:
        return r.rate_hz
    _rate(where, name, value, r)
    check(float(value) == r.rate_hz, f"{where}{name} {value!r} differs from the robot's control rate {r.rate_hz!r} "
                                     f"(config/yam_robot.yaml rate_hz, its one source): drop the key or make it agree")
    return float(value)


def _watchdog(where: str, name: str, value: float, robot: RobotDescription) -> None:
    check(isinstance(value, (int, float)) and math.isfinite(value) and 0 < value <= robot.max_watchdog_s,
          f"{where}{name} must be in (0, {robot.max_watchdog_s:g}] s (the robot description's max_watchdog_s: a "
          f"longer limit would keep a dead command alive), got {value!r}")


def check_safety(cfg: Any, robot: RobotDescription | None = None) -> None:
    """A safety filter config (vam_control.safety.SafetyConfig) against the description."""
    r = robot or load_robot()
    check(len(cfg.joint_lower) == r.arm_joints,
          f"the safety filter has {len(cfg.joint_lower)} joints per arm, the robot description {r.arm_joints}")
    _rate("safety ", "rate_hz", cfg.rate_hz, r)
    _watchdog("safety ", "stale_after_s", cfg.stale_after_s, r)
    for i, name in enumerate(r.joint_names):
        lo, hi = cfg.joint_lower[i], cfg.joint_upper[i]
        check(r.joint_lower[i] <= lo and hi <= r.joint_upper[i],
              f"safety {name}: range [{lo!r}, {hi!r}] leaves the mechanical range "
              f"[{r.joint_lower[i]!r}, {r.joint_upper[i]!r}] of the robot description")
        v = cfg.max_joint_velocity[i]
        check(v <= r.max_joint_speed[i], f"safety {name}: max_joint_velocity {v!r} rad/s exceeds the robot "
                                         f"description's max_joint_speed {r.max_joint_speed[i]!r}")
    check(r.gripper_min <= cfg.gripper_min and cfg.gripper_max <= r.gripper_max,
          f"safety gripper range [{cfg.gripper_min!r}, {cfg.gripper_max!r}] leaves the robot description's "
          f"[{r.gripper_min!r}, {r.gripper_max!r}]")
    check(cfg.max_gripper_velocity <= r.max_gripper_speed,
          f"safety max_gripper_velocity {cfg.max_gripper_velocity!r} exceeds the robot description's "
          f"max_gripper_speed {r.max_gripper_speed!r}")


def check_driver(cfg: Any, robot: RobotDescription | None = None) -> None:
    """A driver config (yam_driver.config.DriverConfig) against the description."""
    r = robot or load_robot()
    _rate("driver ", "rate_hz", cfg.rate_hz, r)
    _watchdog("driver ", "watchdog_s", cfg.watchdog_s, r)
    check([a.name for a in cfg.arms] == list(r.arms),
          f"driver arms {[a.name for a in cfg.arms]} differ from the robot description's {list(r.arms)}")
    for arm in cfg.arms:
        names = [j.name for j in arm.joints]
        check(names == [*r.joint_names, r.gripper_name],
              f"driver arm {arm.name!r}: joints {names} differ from the robot description's "
              f"{[*r.joint_names, r.gripper_name]}")
        for i, j in enumerate(arm.joints[:-1]):
            check(r.joint_lower[i] <= j.lower and j.upper <= r.joint_upper[i],
                  f"driver {arm.name}_{j.name}: limits [{j.lower!r}, {j.upper!r}] leave the mechanical range "
                  f"[{r.joint_lower[i]!r}, {r.joint_upper[i]!r}] of the robot description")
            check(j.max_speed <= r.max_joint_speed[i],
                  f"driver {arm.name}_{j.name}: max_speed {j.max_speed!r} rad/s exceeds the robot description's "
                  f"max_joint_speed {r.max_joint_speed[i]!r}")
        g = arm.joints[-1]
        check(g.max_speed <= r.max_gripper_speed,
              f"driver {arm.name}_{g.name}: max_speed {g.max_speed!r} exceeds the robot description's "
              f"max_gripper_speed {r.max_gripper_speed!r}")


def check_layers(driver: Any, safety: Any) -> None:
    """Defence in depth: the driver's joint and gripper limits sit inside the safety filter's
    configured ranges, and its slew limits are no faster than the filter's velocity limits."""
    check(safety.arms == len(driver.arms),
          f"the safety filter is for {safety.arms!r} arm(s) ({safety.arms * (len(safety.joint_lower) + 1)}-value "
          f"targets), the driver drives {len(driver.arms)} {[a.name for a in driver.arms]}: set the safety file's "
          f"arms: {len(driver.arms)}")
    for arm in driver.arms:
        for i, j in enumerate(arm.joints[:-1]):
            lo, hi = safety.joint_lower[i], safety.joint_upper[i]
            check(lo <= j.lower and j.upper <= hi,
                  f"driver {arm.name}_{j.name} limits [{j.lower!r}, {j.upper!r}] are wider than the safety "
                  f"filter's [{lo!r}, {hi!r}]: the driver's limits must sit inside the filter's")
            check(j.max_speed <= safety.max_joint_velocity[i],
                  f"driver {arm.name}_{j.name} max_speed {j.max_speed!r} exceeds the safety filter's "
                  f"max_joint_velocity {safety.max_joint_velocity[i]!r}")
        g = arm.joints[-1]
        check(safety.gripper_min <= g.lower and g.upper <= safety.gripper_max,
              f"driver {arm.name}_{g.name} limits [{g.lower!r}, {g.upper!r}] are wider than the safety filter's "
              f"gripper range [{safety.gripper_min!r}, {safety.gripper_max!r}]")
        check(g.max_speed <= safety.max_gripper_velocity,
              f"driver {arm.name}_{g.name} max_speed {g.max_speed!r} exceeds the safety filter's "
              f"max_gripper_velocity {safety.max_gripper_velocity!r}")


__all__ = ["RobotDescription", "load_robot", "robot_rate", "check_safety", "check_driver", "check_layers", "ConfigError"]
