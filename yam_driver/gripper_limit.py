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

What differs from i2rt's limiter (issue 71 row 3): a blocked gripper remembers where it met the
object (`contact`, the measured opening) until it has opened `RELEASE_OPENING` past it. Meanwhile
no command goes further closed than the force limit below the object (or the measured opening, if
smaller), whatever came between or however fast the gripper moves: an
[open, close, close] chatter (or a target just above the object) used to release the latch, and the
next close went a slew step below the floor before the stall was seen again, 6-10x the limit in most
ticks. The first impact of a free close (the gripper still moving) is bounded as i2rt bounds it: the
tick after it stops.
"""
from __future__ import annotations

import numpy as np

from .config import DriverConfig, is_gripper

RELEASE_OPENING = 0.15   # opening fraction (~14 mm of the YAM's 96 mm stroke) a gripper must open past the
#   object it was blocked on before it may close beyond it again: more than the 1.0/s slew limit opens in
#   the 2 ticks of a chatter; a grasp of another, narrower object opens the gripper first anyway


class GripperLimiter:
    """Holds a blocked gripper's command within its force limit of the object (module docstring)."""

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
        self.contact = np.full(n, np.nan)  # (14,) measured opening where each gripper was found blocked; NaN: none
        self.blocked = np.zeros(n, bool)   # (14,) its command is held to the limit this tick

    def reset(self) -> None:
        self.blocked[:] = False
        self.contact[:] = np.nan

    def limit(self, cmd: np.ndarray, present: np.ndarray, velocity: np.ndarray,
              following: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(command with blocked grippers held to the limit, (14,) which were held).

        Found blocked: slower than the stall speed while the command it was `following` already pushed
        past the limit (kp x (command - measured) is the torque a stopped MIT motor applies) and the new
        one still does; the measured opening is then the object's (updated while the gripper rests
        held at the limit). Until the gripper has opened RELEASE_OPENING past it, no command goes more
        than emax below the smaller of the object and the measured opening, whatever came between or
        the gripper's speed: a command to open is followed, a close goes back to the object and pushes
        no harder than the limit."""
        if not self.active:
            return cmd, np.zeros(cmd.shape, bool)
        known = self.gripper & np.isfinite(present)
        slow = np.isfinite(velocity) & (np.abs(velocity) < self.stall)
        pushing = np.isfinite(following) & (following < present - self.emax)
        found = known & slow & pushing & np.isfinite(cmd) & (cmd < present - self.emax)
        self.contact = np.where(found, np.fmin(self.contact, present), self.contact)
        released = known & np.isfinite(self.contact) & (present > self.contact + RELEASE_OPENING)
        self.contact[released] = np.nan
        held = known & np.isfinite(self.contact)
        # opened off the object: a close goes back to it at the limit; squeezed into it (an impact): the floor
        # follows the measured opening out as the object springs back to where the limit holds it
        floor = np.fmin(self.contact, present) - self.emax
        self.blocked = held & np.isfinite(cmd) & (cmd < floor)
        self.contact = np.where(self.blocked & slow, present, self.contact)   # the object, as the limit holds it now
        return np.where(self.blocked, floor, cmd), self.blocked.copy()
