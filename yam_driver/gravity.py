"""Gravity feed-forward: the torque each joint needs to hold the arm still at a pose.

What i2rt does on the YAM (i2rt-robotics/i2rt @ 5d47b358, `robots/motor_chain_robot.py`
`update()` / `_compute_gravity_compensation()`): every MIT command carries t_ff = inverse
dynamics at the measured pose with zero velocity and acceleration, times a per-joint factor
(`robots/config/yam.yml` gravity_comp_factor 1.0/1.1/1.1/1.2/1.0/1.0), 0 at the gripper. Here the
inverse dynamics is MuJoCo's recursive Newton-Euler (`mj_rne` with zero velocity: gravity only)
on the arm's one physical description (yam_driver/arm_model.py), which the simulated arm is built
from too. The result is saturated at each motor's peak torque.

Without it a YAM with the shipped gains (kp 80 at joints 1-3, 10 at 4-6) sags by tau_g / kp:
up to about 0.19 rad at joint 2 and 0.16 rad at joint 4.
"""
from __future__ import annotations

import vam_stack.mujoco_gl  # noqa: F401  (a side effect: MUJOCO_GL before mujoco's first import: the simulated cameras)

import mujoco  # noqa: E402
import numpy as np  # noqa: E402

from .arm_model import FINGER_TRAVEL, MOTORS, single_arm_mjcf  # noqa: E402
from .config import DriverConfig, is_gripper  # noqa: E402


class GravityModel:
    """(14,) driver-unit positions -> (14,) joint torques in Nm that hold the arm against gravity."""

    def __init__(self, config: DriverConfig):
        self.config = config
        self.model = mujoco.MjModel.from_xml_string(single_arm_mjcf())
        self.data = mujoco.MjData(self.model)
        m = self.model
        n_arm = len(config.arms[0].joints) - 1                             # revolute joints per arm
        self._dof = np.array([m.joint(f"arm_joint{k + 1}").dofadr[0] for k in range(n_arm)])
        self._qpos = np.array([m.joint(f"arm_joint{k + 1}").qposadr[0] for k in range(n_arm)])
        self._fingers = np.array([m.joint(f"arm_finger_{s}").qposadr[0] for s in "ab"])
        per_joint = [(a, j) for a, j in config.joints]
        self.gripper = np.array([is_gripper(a, j) for a, j in per_joint])  # (14,) bool
        self._arm_slices = [np.flatnonzero([a is arm for a, _ in per_joint]) for arm in config.arms]
        factor = np.zeros(len(per_joint))
        if config.gravity_factor is not None:
            for rows in self._arm_slices:
                factor[rows[:n_arm]] = config.gravity_factor
        self.factor = factor                                                # (14,), 0 at the grippers
        self.limit = np.array([MOTORS[j.motor].peak_torque if j.motor in MOTORS else np.inf
                               for _, j in per_joint])                      # (14,) Nm
        self._out = np.zeros(m.nv)

    @property
    def enabled(self) -> bool:
        return bool(np.any(self.factor != 0.0))

    def off_joints(self) -> list[str]:
        """Arm joints (joint1..joint6) whose factor is 0: no feed-forward there."""
        if self.config.gravity_factor is None:
            return []
        return [f"joint{k + 1}" for k, v in enumerate(self.config.gravity_factor) if v == 0]

    def warning(self) -> str | None:
        """The start-up warning a factor of 0 deserves (None when every joint carries its feed-forward)."""
        off = self.off_joints()
        if not off:
            return None
        kp = {f"joint{k + 1}": j.kp for k, j in enumerate(self.config.arms[0].joints[:-1])}
        where = "every joint (gravity_factor all zeros)" if not self.enabled else ", ".join(
            f"{j} (kp {kp[j]:g})" for j in off)
        return (f"yam_driver: no gravity feed-forward at {where}: on both arms, such a joint sags by tau_g / kp "
                f"(up to ~0.19 rad at joint 2, ~0.16 rad at joint 4); give it its factor (i2rt: 1.0-1.2)")

    def torque(self, position: np.ndarray) -> np.ndarray:
        """(14,) gravity-holding torque (Nm, joint space) at `position` (driver units; the
        gripper's opening fraction places the fingers); NaN where an arm's pose is not known."""
        position = np.asarray(position, dtype=np.float64)
        out = np.full(position.shape, np.nan)
        m, d = self.model, self.data
        for rows in self._arm_slices:
            joints, grip = rows[~self.gripper[rows]], rows[self.gripper[rows]]
            q = position[joints]
            if not np.isfinite(q).all():
                continue
            d.qpos[self._qpos] = q
            opening = position[grip[0]] if grip.size and np.isfinite(position[grip[0]]) else 1.0
            d.qpos[self._fingers] = np.clip(opening, 0.0, 1.0) * FINGER_TRAVEL
            d.qvel[:] = 0.0
            mujoco.mj_kinematics(m, d)
            mujoco.mj_comPos(m, d)
            mujoco.mj_rne(m, d, 0, self._out)                               # bias force; qvel = 0: gravity only
            out[joints] = self._out[self._dof]
            out[grip] = 0.0
        return out

    def feedforward(self, position: np.ndarray) -> np.ndarray:
        """(14,) what each MIT command carries: factor x gravity torque, saturated at the motor's
        peak torque; 0 where the pose is not known (the motor's PD holds alone)."""
        t = self.torque(position) * self.factor
        t = np.where(np.isfinite(t), t, 0.0)
        return np.clip(t, -self.limit, self.limit)


def gravity_load(config: DriverConfig, as_configured: bool = False):
    """A rig-level load model for the Damiao emulator (`EmulatedRig(..., load_fn=...)`): the torque
    gravity applies to each joint at a pose, i.e. minus what holds it, so emulated motors sag by
    tau_g / kp without feed-forward, as a YAM does. The arm weighs the model (factor 1), or with
    `as_configured` the model x the driver file's `gravity_factor` (the arm the file describes: the
    factors say how much heavier than the model the real arm is, so its own feed-forward holds it)."""
    model = GravityModel(config)
    scale = model.factor if as_configured else np.where(model.gripper, 0.0, 1.0)

    def load(position: np.ndarray) -> np.ndarray:
        t = model.torque(position) * scale
        return -np.where(np.isfinite(t), t, 0.0)
    return load
