"""The gripper's force limit: a blocked gripper squeezes no harder than `gripper_force_limit`.

What i2rt does (i2rt-robotics/i2rt @ 5d47b358, `robots/utils.py` GripperForceLimiter, used by
`robots/motor_chain_robot.py` with `limit_gripper_force=50` from `robots/get_robot.py`): when the
gripper is "clogged" (slow while pushing), its position command is moved back towards the measured
position so the MIT law's kp x error gives the torque of the force limit, and it stays clogged
until the command asks to open. Torque <-> squeeze force through the linear gripper:
force = torque x motor stroke / gripper stroke (`linear_gripper_force_torque_map`).

Here, in driver units (the opening fraction, 0 = closed): the largest closing error a blocked
gripper may be commanded is e = torque_limit / (kp x motor stroke), with torque_limit =
force_limit x gripper_stroke / motor stroke. A Dynamixel's gains are register values, not Nm/rad:
no limit there.
"""
from __future__ import annotations

import numpy as np

from .config import DriverConfig, is_gripper


class GripperLimiter:
    """Holds a blocked gripper's command within its force limit of the measured opening."""

    def __init__(self, config: DriverConfig):
        n = len(config.joints)
        self.emax = np.full(n, np.inf)     # (14,) largest closing error, opening-fraction units
        self.stall = np.zeros(n)           # (14,) speed (fraction/s) under which a gripper counts as slow
        self.active = config.bus == "damiao" and config.gripper_force_limit > 0
        for i, (arm, j) in enumerate(config.joints):
            if self.active and is_gripper(arm, j) and j.kp > 0:
                stroke = abs(arm.gripper_open - arm.gripper_closed)                    # motor rad, closed -> open
                torque = config.gripper_force_limit * config.gripper_stroke / stroke   # Nm at the motor
                self.emax[i] = torque / (j.kp * stroke)
                self.stall[i] = config.gripper_stall_speed / stroke
        self.gripper = np.isfinite(self.emax)
        self.blocked = np.zeros(n, bool)

    def reset(self) -> None:
        self.blocked[:] = False

    def limit(self, cmd: np.ndarray, present: np.ndarray, velocity: np.ndarray,
              following: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(command with blocked grippers held to the limit, (14,) which were held).

        Blocked = slower than the stall speed while the command it was `following` already pushed
        past the limit (kp x (command - measured) is the torque a stopped MIT motor applies); it
        stays blocked, as i2rt's limiter stays clogged, for as long as the new command still asks to
        squeeze harder, so the rebound of a squeezed object cannot release it; a command to open (or
        to squeeze less) releases it at once."""
        if not self.active:
            return cmd, np.zeros(cmd.shape, bool)
        floor = present - self.emax
        squeezing = self.gripper & np.isfinite(floor) & np.isfinite(cmd) & (cmd < floor)
        slow = np.isfinite(velocity) & (np.abs(velocity) < self.stall)
        pushing = np.isfinite(following) & (following < floor)
        self.blocked = squeezing & (self.blocked | (slow & pushing))
        return np.where(self.blocked, floor, cmd), self.blocked.copy()
