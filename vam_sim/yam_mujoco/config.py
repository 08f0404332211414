"""Configuration of the MuJoCo YAM simulation (`config/yam_mujoco.yaml`, section `yam_mujoco`).

The same file carries a `camera_bridge` section (three views rendered by the simulator) and
names the driver configuration whose limits, gains and gripper mapping the simulated bus
obeys, so the real driver core runs unchanged on top of it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

from vam_stack.config import check, from_yaml
from vam_stack.names import YAM_TASKS
from vam_stack.paths import config_dir
from vam_stack.robot import robot_rate

STEP_MODES = ("external", "wall_clock")
CAMERAS = ("top", "left_wrist", "right_wrist")


@dataclass(frozen=True)
class MujocoConfig:
    """The simulated bimanual YAM: scene, physics rate, cameras and how time advances."""

    task: str = "handover"  # task whose objects populate the scene (vam_stack.names.YAM_TASKS)
    seed: int = 0  # seeds the task's initial object placement
    driver_config: str = "yam_driver_damiao.yaml"  # driver limits/gripper map; relative paths are under config/
    step_mode: str = "external"  # external: the caller steps one control period per tick (lockstep, sim time);
    #                              wall_clock: reads advance physics to the host clock (real-time driver loop)
    timestep: float = 0.002  # s, physics step (rounded so a control period is a whole number of steps)
    control_hz: float | None = None  # Hz, rate of `step_control()` and of the policy's targets; None: the robot's
    #                                  (config/yam_robot.yaml rate_hz, its one source), a stated one must agree
    camera_width: int = 224  # px, rendered width of every view (paper: 224x168 per real camera)
    camera_height: int = 168  # px, rendered height
    camera_fps: float = 30.0  # Hz, frames per second of simulated time
    cameras: tuple[str, ...] = CAMERAS  # views rendered, in stacking order
    arm_spacing: float = 0.6  # m between the two arm bases
    max_catch_up_s: float = 0.1  # wall_clock: most simulated time one call may advance (a stalled host)
    settle_s: float = 0.5  # s of physics after a reset so objects rest on the table
    gravity_factor: tuple[float, ...] | None = (1.0,) * 6  # replaces the driver file's gravity_factor: the
    #   simulated arm IS the model the feed-forward is computed from, so 1.0 is exact here (the real arm's
    #   1.0-1.2 absorb mass the model misses); None keeps the driver file's (an arm 10-20 % over-compensated)

    def __post_init__(self) -> None:
        check(self.task in YAM_TASKS, f"task must be one of {sorted(YAM_TASKS)}, got {self.task!r}")
        check(isinstance(self.seed, int) and self.seed >= 0, f"seed must be an integer >= 0, got {self.seed!r}")
        check(self.step_mode in STEP_MODES, f"step_mode must be one of {STEP_MODES}, got {self.step_mode!r}")
        check(math.isfinite(self.timestep) and 1e-4 <= self.timestep <= 0.01,
              f"timestep must be in [1e-4, 0.01] s, got {self.timestep!r}")
        object.__setattr__(self, "control_hz", robot_rate("yam_mujoco ", self.control_hz, name="control_hz"))
        check(16 <= self.camera_width <= 1280 and 16 <= self.camera_height <= 960,
              f"camera size must be within 16..1280 x 16..960 px, got {self.camera_width!r}x{self.camera_height!r}")
        check(math.isfinite(self.camera_fps) and 0.5 <= self.camera_fps <= 240,
              f"camera_fps must be in [0.5, 240], got {self.camera_fps!r}")
        object.__setattr__(self, "cameras", tuple(self.cameras))
        check(len(self.cameras) >= 1 and set(self.cameras) <= set(CAMERAS) and len(set(self.cameras)) == len(self.cameras),
              f"cameras must be distinct names from {CAMERAS}, got {self.cameras!r}")
        check(0.3 <= self.arm_spacing <= 1.2, f"arm_spacing must be in [0.3, 1.2] m, got {self.arm_spacing!r}")
        check(self.max_catch_up_s > 0, f"max_catch_up_s must be > 0, got {self.max_catch_up_s!r}")
        check(self.settle_s >= 0, f"settle_s must be >= 0, got {self.settle_s!r}")
        if self.gravity_factor is not None:
            object.__setattr__(self, "gravity_factor", tuple(self.gravity_factor))

    @property
    def substeps(self) -> int:
        """Physics steps per control period."""
        return max(1, round(1.0 / (self.control_hz * self.timestep)))

    @property
    def physics_dt(self) -> float:
        """The timestep actually used: the control period split into `substeps` equal steps."""
        return 1.0 / (self.control_hz * self.substeps)

    def driver_config_path(self) -> Path:
        p = Path(self.driver_config)
        return p if p.is_absolute() else config_dir() / p


def default_path() -> Path:
    return config_dir() / "yam_mujoco.yaml"


def load_mujoco_config(path: str | Path | None = None, **overrides) -> MujocoConfig:
    """The `yam_mujoco` section of `path` (default config/yam_mujoco.yaml); keyword overrides win."""
    cfg = from_yaml(MujocoConfig, path or default_path(), "yam_mujoco")
    return replace(cfg, **overrides) if overrides else cfg
