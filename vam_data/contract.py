"""What a training set at a model preset's geometry holds, and the checks every import runs on it.

A `DataContract` is read from the preset (`models/<preset>.yaml`'s `robot` section) and, for the
YAM, from the one robot description (`config/yam_robot.yaml`):

- the state and action dimensions by name, in the model's order (the YAM: `left_joint1..6,
  left_gripper, right_joint1..6, right_gripper`, the names /joint_states carries; LIBERO: the
  end-effector names of `vam_stack.topics`);
- the bounded dimensions: a YAM gripper is an opening fraction in [0, 1] and a joint stays inside
  its mechanical range (a dataset in degrees, or in gripper metres, fails here); LIBERO's gripper
  command is -1..+1;
- the camera views and the size each is stored at, and the control rate.

Every check raises `ContractError` naming the field and both values, before anything is written.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Sequence

import numpy as np

from vam_stack.robot import load_robot
from vam_stack.topics import LIBERO_ACTION_NAMES, LIBERO_PROPRIO_NAMES

from vam_model.networks.config import load_config

RANGE_TOLERANCE = 0.05  # a bounded dimension may overshoot its range by this much (sensor noise, slew)


class ContractError(ValueError):
    """Data that does not fit the preset's contract (the message names the field and both values)."""


@dataclass(frozen=True)
class DataContract:
    """The geometry a preset's training set has (see the module docstring)."""

    preset: str                          # model preset the data is for (models/<preset>.yaml)
    robot: str                           # "yam" (14 absolute joints) | "libero" (end-effector deltas)
    state_names: tuple[str, ...]         # proprio dimensions, in the model's order
    action_names: tuple[str, ...]        # action dimensions, in the model's order
    views: tuple[str, ...]               # camera views, stacked left to right
    view_width: int                      # stored width of each view [px]
    view_height: int                     # stored height of each view [px]
    fps: float                           # control rate: one sample per tick [Hz]
    action_type: str                     # absolute_joint | eef_delta (how the trainer pads past the end)
    bounds: dict[str, tuple[float, float]] = field(default_factory=dict)  # name -> (lo, hi) it must stay in
    suite: str = "imported"              # suite name imported episodes get

    @property
    def frame_shape(self) -> tuple[int, int, int]:
        return (self.view_height, self.view_width * len(self.views), 3)

    # -- checks ------------------------------------------------------------------------------------
    def check_names(self, what: str, names: Sequence[str] | None, kind: str) -> None:
        """`names` (of `what`, the state or the action) are the contract's, in its order."""
        want = self.state_names if kind == "state" else self.action_names
        if names is None:
            raise ContractError(f"{what}: the dimensions carry no names; the {self.preset} contract needs "
                                f"{list(want)} to check the order")
        names = [str(n) for n in names]
        if len(names) != len(want):
            raise ContractError(f"{what}: {len(names)} dimensions, the {self.preset} contract has {len(want)} "
                                f"({list(want)})")
        if names == list(want):
            return
        missing = [n for n in want if n not in names]
        if missing:
            raise ContractError(f"{what}: names {missing} are missing (has {names}, expected {list(want)})")
        i = next(i for i, (a, b) in enumerate(zip(names, want)) if a != b)
        raise ContractError(f"{what}: joint order differs from the {self.preset} contract: position {i} is "
                            f"{names[i]!r}, expected {want[i]!r} (has {names}, expected {list(want)})")

    def check_values(self, what: str, values: np.ndarray, kind: str) -> None:
        """A [T, D] array of `kind` (state | action): its width, finite, every bounded dimension in range."""
        names = self.state_names if kind == "state" else self.action_names
        values = np.asarray(values)
        if values.ndim != 2 or values.shape[1] != len(names):
            raise ContractError(f"{what}: shape {tuple(values.shape)}, the {self.preset} contract has "
                                f"[T, {len(names)}]")
        bad = np.argwhere(~np.isfinite(values))
        if bad.size:
            t, d = (int(x) for x in bad[0])
            raise ContractError(f"{what}: {names[d]} at step {t} is {values[t, d]!r} ({len(bad)} non-finite values)")
        for d, name in enumerate(names):
            if name not in self.bounds:
                continue
            lo, hi = self.bounds[name]
            vmin, vmax = float(values[:, d].min()), float(values[:, d].max())
            if vmin < lo - RANGE_TOLERANCE or vmax > hi + RANGE_TOLERANCE:
                raise ContractError(f"{what}: {name} spans [{vmin:.4g}, {vmax:.4g}]; the {self.preset} contract "
                                    f"keeps it in [{lo:g}, {hi:g}]" + _unit_hint(name, vmin, vmax, lo, hi))

    def check_fps(self, what: str, fps: float) -> None:
        if not (isinstance(fps, (int, float)) and np.isfinite(fps) and abs(float(fps) - self.fps) < 1e-6):
            raise ContractError(f"{what}: rate is {fps!r} Hz, the {self.preset} contract runs at {self.fps:g} Hz "
                                f"(resample the recording; nothing is resampled silently)")

    def check_view(self, what: str, view: str, shape: Sequence[int]) -> None:
        """A view's stored [H, W, 3]: colour, at least the contract's size, the contract's aspect ratio."""
        shape = tuple(int(s) for s in shape)
        if len(shape) != 3 or shape[2] != 3:
            raise ContractError(f"{what}: view {view!r} has shape {shape}, expected [H, W, 3] (RGB)")
        h, w = shape[:2]
        if w < self.view_width or h < self.view_height:
            raise ContractError(f"{what}: view {view!r} is {w}x{h}, smaller than the {self.preset} contract's "
                                f"{self.view_width}x{self.view_height} (frames are never upscaled)")
        if abs(w / h - self.view_width / self.view_height) > 0.01:
            raise ContractError(f"{what}: view {view!r} is {w}x{h} (aspect {w / h:.3f}), the {self.preset} contract "
                                f"takes {self.view_width}x{self.view_height} (aspect "
                                f"{self.view_width / self.view_height:.3f}): resizing would stretch it")

    def check_views(self, what: str, views: Sequence[str]) -> None:
        missing = [v for v in self.views if v not in views]
        if missing:
            raise ContractError(f"{what}: camera views {missing} are missing (has {list(views)}, the {self.preset} "
                                f"contract needs {list(self.views)})")


def _unit_hint(name: str, vmin: float, vmax: float, lo: float, hi: float) -> str:
    if "gripper" in name and hi - lo <= 2.0 and vmax > 10 * hi:
        return " (a percentage, or encoder ticks, instead of an opening fraction?)"
    if "gripper" in name and 0 < vmax < 0.2 * hi:
        return " (metres of finger travel instead of an opening fraction?)"
    if "joint" in name and max(abs(vmin), abs(vmax)) > 2 * np.pi:
        return " (degrees instead of radians?)"
    return ""


def contract_for(preset: str) -> DataContract:
    """The contract of a model preset (a name under models/ or a model YAML path)."""
    r = load_config(preset).robot
    common = dict(preset=str(preset), views=tuple(r.cameras), view_width=int(r.camera_width),
                  view_height=int(r.camera_height), fps=float(r.control_hz), action_type=r.action_type)
    if r.action_type == "absolute_joint":
        desc = load_robot()
        names = tuple(desc.published_names())
        if len(names) != r.action_dim or r.proprio_dim != r.action_dim:
            raise ContractError(f"preset {preset!r}: action_dim {r.action_dim} / proprio_dim {r.proprio_dim} differ "
                                f"from the robot description's {len(names)} joints ({list(names)})")
        bounds: dict[str, tuple[float, float]] = {}
        for arm in desc.arms:
            for j, lo, hi in zip(desc.joint_names, desc.joint_lower, desc.joint_upper):
                bounds[f"{arm}_{j}"] = (float(lo), float(hi))
            bounds[f"{arm}_{desc.gripper_name}"] = (float(desc.gripper_min), float(desc.gripper_max))
        return DataContract(robot="yam", state_names=names, action_names=names, bounds=bounds,
                            suite="yam_mujoco", **common)

    if (r.proprio_dim, r.action_dim) != (len(LIBERO_PROPRIO_NAMES), len(LIBERO_ACTION_NAMES)):
        raise ContractError(f"preset {preset!r}: proprio/action dims ({r.proprio_dim}, {r.action_dim}) are not "
                            f"LIBERO's ({len(LIBERO_PROPRIO_NAMES)}, {len(LIBERO_ACTION_NAMES)})")
    return DataContract(robot="libero", state_names=LIBERO_PROPRIO_NAMES, action_names=LIBERO_ACTION_NAMES,
                        bounds={"gripper": (-1.0, 1.0)}, suite="imported", **common)


def contract_for_dataset(info: dict) -> DataContract:
    """The contract a dataset of this project was written under (from its meta/info.json): the YAM
    or LIBERO preset's names and views, at the stored frame size and rate."""
    preset = "yam64" if info.get("action_type") == "absolute_joint" else "libero64"
    c = contract_for(preset)
    h, w, _ = (int(x) for x in info.get("frame_shape", (224, 448, 3)))
    if w % len(c.views):
        raise ContractError(f"meta/info.json: frame_shape {info.get('frame_shape')!r} is not {len(c.views)} views "
                            f"side by side ({list(c.views)})")
    return replace(c, preset=f"{preset} (as stored)", view_width=w // len(c.views), view_height=h,
                   fps=float(info.get("fps", c.fps)))
