"""Configuration of the mocked LIBERO environment (one dataclass, validated on construction)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from vam_stack.config import ConfigError, check, from_yaml


@dataclass
class LiberoMockConfig:
    """Physics, control and camera settings of the kinematic tabletop.

    Control: one `step` is one policy step at `control_hz` (10 Hz, the paper's policy rate).
    LIBERO's robosuite OSC controller runs at 20 Hz; one step here stands for two controller
    ticks holding the same action, so the per-step limits below are twice a 20 Hz tick's.
    """

    image_size: int = 224  # side of each square camera image (LIBERO: 224x224)
    control_hz: float = 10.0  # policy/env steps per second (LIBERO controller: 20 Hz, x2 here)
    max_translation: float = 0.025  # m moved per step at |action| = 1 (0.25 m/s)
    max_rotation: float = 0.25  # rad turned per step at |action| = 1
    max_tilt: float = 0.8  # rad the gripper axis may tilt away from pointing down
    gripper_max_width: float = 0.08  # m between open fingers (Panda: 0.08)
    gripper_speed: float = 0.02  # m of finger opening change per step (~4 steps open->closed)
    workspace_low: tuple[float, float, float] = (-0.40, -0.30, 0.0)  # m, eef box lower corner
    workspace_high: tuple[float, float, float] = (0.40, 0.30, 0.45)  # m, eef box upper corner
    home: tuple[float, float, float] = (0.0, 0.12, 0.28)  # m, eef start above the table
    home_jitter: float = 0.02  # m, uniform +- jitter of the eef start per episode
    object_jitter: float = 0.015  # m, uniform +- jitter of movable objects (fixed layout per task)
    fixture_jitter: float = 0.008  # m, uniform +- jitter of fixtures (cabinet, stove, ...)
    yaw_jitter: float = 0.15  # rad, uniform +- yaw jitter of boxes
    grasp_radius: float = 0.035  # m, max tip-to-centre xy distance that still grasps (small objects)
    next_to_gap: float = 0.07  # m, max gap between footprints for `next_to`
    ood_limit_factor: float = 1.5  # OOD episode limits = ID limit x this (paper: 1.5)

    def __post_init__(self) -> None:
        check(isinstance(self.image_size, int) and 32 <= self.image_size <= 1024,
              f"image_size must be an int in [32, 1024], got {self.image_size!r}")
        for name in ("control_hz", "max_translation", "max_rotation", "max_tilt",
                     "gripper_max_width", "gripper_speed", "grasp_radius", "next_to_gap",
                     "ood_limit_factor"):
            v = getattr(self, name)
            check(isinstance(v, (int, float)) and math.isfinite(v) and v > 0,
                  f"{name} must be a positive finite number, got {v!r}")
        for name in ("home_jitter", "object_jitter", "fixture_jitter"):
            v = getattr(self, name)
            check(isinstance(v, (int, float)) and 0 <= v <= 0.05,
                  f"{name} must be in [0, 0.05] m, got {v!r}")
        check(isinstance(self.yaw_jitter, (int, float)) and 0 <= self.yaw_jitter <= math.pi,
              f"yaw_jitter must be in [0, pi] rad, got {self.yaw_jitter!r}")
        check(self.object_jitter <= 0.02 and self.fixture_jitter <= 0.015,
              f"object_jitter above 0.02 m or fixture_jitter above 0.015 m breaks the task layouts: "
              f"{self.object_jitter!r}, {self.fixture_jitter!r}")
        check(self.max_tilt < math.pi / 2, f"max_tilt must be below pi/2, got {self.max_tilt!r}")
        check(self.gripper_max_width <= 0.2, f"gripper_max_width too large: {self.gripper_max_width!r}")
        for name in ("workspace_low", "workspace_high", "home"):
            v = getattr(self, name)
            check(len(v) == 3 and all(math.isfinite(float(x)) for x in v),
                  f"{name} must be 3 finite numbers, got {v!r}")
        check(all(lo < hi for lo, hi in zip(self.workspace_low, self.workspace_high)),
              f"workspace_low {self.workspace_low!r} must be below workspace_high {self.workspace_high!r}")
        check(all(lo <= h <= hi for lo, h, hi in zip(self.workspace_low, self.home, self.workspace_high)),
              f"home {self.home!r} must lie inside the workspace")

    @classmethod
    def from_file(cls, path: str | Path, section: str = "libero_mock") -> "LiberoMockConfig":
        """Load from a YAML file's `section` (default config: config/libero_mock.yaml)."""
        return from_yaml(cls, path, section)


__all__ = ["LiberoMockConfig", "ConfigError"]
