"""Configuration of the mocked LIBERO environment (one dataclass, validated on construction)."""
from __future__ import annotations

import ast
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import cv2
import numpy as np

from vam_stack.config import ConfigError, check, from_yaml
from vam_stack.libero import libero_rate
from vam_stack.paths import config_dir

from . import frames


# Version of the mock's conventions (frames, rates, tasks, scenes). Datasets record it and
# checkpoints trained on them carry it; a policy trained under another version is flagged.
# "libero-1": LIBERO's world frame, 20 Hz ticks, LIBERO's task lists and articulated goals.
CONVENTIONS = "libero-1"


def checkpoint_training(path) -> dict:
    """The training record a checkpoint carries (its metadata's `training`; {} where none or unreadable)."""
    from vam_model.networks.checkpoint import read_metadata   # lazy: torch, which the mock never needs

    _, extra = read_metadata(path)
    training = extra.get("training") or {}
    if isinstance(training, str):
        try:
            training = ast.literal_eval(training)
        except (ValueError, SyntaxError):
            training = {}
    return training if isinstance(training, dict) else {}


def checkpoint_conventions(path) -> str | None:
    """The mock conventions a checkpoint was trained under (None: not recorded, i.e. older)."""
    return checkpoint_training(path).get("mock_conventions")


@dataclass(frozen=True)
class LiberoMockConfig:
    """Control, geometry and camera settings of the kinematic tabletop (one file for every entry point).

    Units and frames are real LIBERO's (see frames.py): one `step` is one 20 Hz controller tick
    holding one action, positions are in LIBERO's world frame (table top at z = 0.9 m). Every
    entry point (`vam-stack collect/sim/eval/tr-study/train`, the ROS node, training rollouts)
    reads config/libero_mock.yaml (or the file it is given) and records it in its output.
    """

    image_size: int = 224  # px, side of each square rendered view (LIBERO: 224x224)
    control_hz: float | None = None  # steps per second: LIBERO's controller tick (one action per tick, as openpi);
    #                                  None: vam_stack.libero.CONTROL_HZ (its one source), a stated one must agree
    max_translation: float = 0.013  # m moved per step at |action| = 1 (real LIBERO: 0.0125-0.013 once moving)
    max_rotation: float = 0.08  # rad turned per step at |action| = 1 (real LIBERO: 0.065-0.10 by axis)
    max_tilt: float = 0.8  # rad the gripper axis may tilt away from pointing down
    gripper_max_width: float = 0.08  # m between open fingers (Panda: 0.08)
    gripper_speed: float = 0.007  # m of finger opening change per step (LIBERO: ~12 ticks open->closed)
    workspace_low: tuple[float, float, float] = (-0.45, -0.5, 0.9)  # m, eef box lower corner (LIBERO world)
    workspace_high: tuple[float, float, float] = (0.45, 0.5, 1.4)  # m, eef box upper corner (LIBERO world)
    home: tuple[float, float, float] = (-0.215, 0.0, 1.165)  # m, eef start (LIBERO's reset, world frame)
    home_axis_angle: tuple[float, float, float] = (3.1395, 0.0, -0.09)  # eef orientation at reset (LIBERO's)
    home_jitter: float = 0.012  # m, uniform +- jitter of the eef start per episode (LIBERO: ~0.01)
    object_jitter: float = 0.01  # m, uniform +- jitter of movable objects (LIBERO's BDDL regions: +-0.01)
    fixture_jitter: float = 0.005  # m, uniform +- jitter of fixtures (cabinet, stove, ...)
    yaw_jitter: float = 0.15  # rad, uniform +- yaw jitter of boxes
    grasp_radius: float = 0.035  # m, max tip-to-centre xy distance that still grasps (small objects)
    next_to_gap: float = 0.07  # m, max gap between footprints for `next_to`
    ood_limit_factor: float = 1.5  # OOD episode limits = ID limit x this (paper: 1.5)

    def __post_init__(self) -> None:
        check(isinstance(self.image_size, int) and 32 <= self.image_size <= 1024,
              f"image_size must be an int in [32, 1024], got {self.image_size!r}")
        object.__setattr__(self, "control_hz", libero_rate("libero_mock ", self.control_hz))
        for name in ("max_translation", "max_rotation", "max_tilt",
                     "gripper_max_width", "gripper_speed", "grasp_radius", "next_to_gap",
                     "ood_limit_factor"):
            v = getattr(self, name)
            check(isinstance(v, (int, float)) and math.isfinite(v) and v > 0,
                  f"{name} must be a positive finite number, got {v!r}")
        check(self.max_translation <= 0.1, f"max_translation above 0.1 m per step is not LIBERO's: {self.max_translation!r}")
        check(self.max_rotation <= 0.5, f"max_rotation above 0.5 rad per step is not LIBERO's: {self.max_rotation!r}")
        for name in ("home_jitter", "object_jitter", "fixture_jitter"):
            v = getattr(self, name)
            check(isinstance(v, (int, float)) and 0 <= v <= 0.05,
                  f"{name} must be in [0, 0.05] m, got {v!r}")
        check(isinstance(self.yaw_jitter, (int, float)) and 0 <= self.yaw_jitter <= math.pi,
              f"yaw_jitter must be in [0, pi] rad, got {self.yaw_jitter!r}")
        check(self.object_jitter <= 0.015 and self.fixture_jitter <= 0.015,
              f"object_jitter or fixture_jitter above 0.015 m breaks the task layouts: "
              f"{self.object_jitter!r}, {self.fixture_jitter!r}")
        check(self.max_tilt < math.pi / 2, f"max_tilt must be below pi/2, got {self.max_tilt!r}")
        check(self.gripper_max_width <= 0.2, f"gripper_max_width too large: {self.gripper_max_width!r}")
        for name in ("workspace_low", "workspace_high", "home", "home_axis_angle"):
            v = getattr(self, name)
            check(isinstance(v, (tuple, list)) and len(v) == 3 and all(isinstance(x, (int, float)) and math.isfinite(x) for x in v),
                  f"{name} must be 3 finite numbers, got {v!r}")
        check(all(lo < hi for lo, hi in zip(self.workspace_low, self.workspace_high)),
              f"workspace_low {self.workspace_low!r} must be below workspace_high {self.workspace_high!r}")
        check(all(lo <= h <= hi for lo, h, hi in zip(self.workspace_low, self.home, self.workspace_high)),
              f"home {self.home!r} must lie inside the workspace")
        check(self.workspace_low[2] >= 0.9 - 1e-9, f"workspace_low z must be at or above the table top (0.9 m), "
                                                   f"got {self.workspace_low[2]!r}")
        r, _ = cv2.Rodrigues(np.asarray(self.home_axis_angle, dtype=np.float64).reshape(3, 1))
        object.__setattr__(self, "_home_rotation", frames.rot_from_libero(r))  # derived once: the expert reads it every step
        tilt = math.acos(max(-1.0, min(1.0, -float(self._home_rotation[2, 2]))))
        check(tilt <= self.max_tilt, f"home_axis_angle {self.home_axis_angle!r} tilts the gripper {tilt:.2f} rad "
                                     f"from pointing down (max_tilt {self.max_tilt})")

    def home_rotation(self) -> np.ndarray:
        """(3, 3) gripper orientation at reset in the mock's drawing frame (a copy)."""
        return self._home_rotation.copy()

    def workspace(self) -> tuple[np.ndarray, np.ndarray]:
        """The eef box as (low, high) corners in the drawing frame."""
        a, b = frames.pos_from_libero(self.workspace_low), frames.pos_from_libero(self.workspace_high)
        return np.minimum(a, b), np.maximum(a, b)

    def as_dict(self) -> dict:
        """Plain data for metadata (datasets, run summaries); `from_dict` reads it back."""
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, d: dict) -> "LiberoMockConfig":
        """The configuration `as_dict` wrote (lists back to tuples), validated as usual."""
        return cls(**{k: (tuple(v) if isinstance(v, list) else v) for k, v in d.items()})

    @classmethod
    def from_file(cls, path: str | Path, section: str = "libero_mock") -> "LiberoMockConfig":
        """Load from a YAML file's `section` (default config: config/libero_mock.yaml)."""
        return from_yaml(cls, path, section)

    @classmethod
    def load(cls, path: str | Path | None = None) -> "LiberoMockConfig":
        """The configuration every entry point uses: `path`, else the shipped config/libero_mock.yaml."""
        return cls.from_file(Path(path) if path else config_dir() / "libero_mock.yaml")


__all__ = ["LiberoMockConfig", "ConfigError"]
