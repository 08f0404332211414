"""A leader arm as the teleoperator of the YAM: its joint readings become the follower's targets.

The leader is a passive arm of the follower's kinematics (a GELLO-style Dynamixel chain or a
YAM leader with a teaching handle) whose motors are only read, never powered: a person moves
it and every control period its 14 readings, in the follower's driver units and joint order,
are the demonstration's raw command. That command goes through the same `SafetyFilter` as the
policy's targets (margins, per-tick step, gripper speed, stale stamps), and what the filter
lets through is what the follower's driver gets.

Hardware can lie, so the teleop engages only on purpose and drops out on anything odd:
- `engage(follower)` refuses unless every arm joint of the leader is within
  `engage_tolerance_rad` of the follower's measured pose (match the pose first, then
  engage: the follower never jumps to a far-away leader);
- while engaged, a reading with a failed or non-finite joint counts as a failure and repeats
  nothing; `max_failed_reads` in a row disengage (a cable pulled, a motor that stopped
  answering);
- a joint that moves further than `max_jump_rad` in one period is a glitch (an encoder
  wrap, a bad frame) and disengages at once, naming the joint and both values;
- disengaged, nothing is sent: the follower's driver holds its last target (its own
  watchdog does the rest).

Plain Python over a `yam_driver.bus.JointBus` (`yam_driver.buses.make_bus(DriverConfig)`, torque never
enabled); the node (`yam_leader.node`) reads the bus on its timer and publishes.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from vam_stack.config import check
from vam_stack.robot import robot_rate
from vam_control.safety import SafetyFilter

ARM = np.array([i for i in range(14) if i % 7 != 6])   # 2 x 6 arm joints; 6 and 13 are the grippers


@dataclass(frozen=True)
class LeaderConfig:
    """The leader-arm teleoperator (the yam_leader node's parameters)."""

    rate_hz: float | None = None          # read-and-send rate [Hz]; None: the robot's (config/yam_robot.yaml, its one
    #                                       source: the safety filter's and the follower's); a stated one must agree
    engage_tolerance_rad: float = 0.15    # every leader arm joint within this of the follower's to engage [rad]
    max_jump_rad: float = 0.3             # a joint reading that moves further in one period is a glitch [rad]
    max_failed_reads: int = 3             # failed reads in a row that disengage (1..10)

    def __post_init__(self):
        if self.rate_hz is not None:
            check(math.isfinite(self.rate_hz) and 1.0 <= self.rate_hz <= 500.0,
                  f"yam_leader: rate_hz must be in [1, 500] Hz, got {self.rate_hz!r}")
        object.__setattr__(self, "rate_hz", robot_rate("yam_leader: ", self.rate_hz))
        check(math.isfinite(self.engage_tolerance_rad) and 0.0 < self.engage_tolerance_rad <= 0.5,
              f"yam_leader: engage_tolerance_rad must be in (0, 0.5] rad (a larger one lets the follower jump), "
              f"got {self.engage_tolerance_rad!r}")
        check(math.isfinite(self.max_jump_rad) and 0.0 < self.max_jump_rad <= 1.0,
              f"yam_leader: max_jump_rad must be in (0, 1] rad (a larger one switches the glitch check off), "
              f"got {self.max_jump_rad!r}")
        check(isinstance(self.max_failed_reads, int) and 1 <= self.max_failed_reads <= 10,
              f"yam_leader: max_failed_reads must be an integer in [1, 10], got {self.max_failed_reads!r}")


@dataclass
class LeaderTick:
    command: np.ndarray | None   # (14,) the leader's reading: the raw command (None: nothing to send)
    target: np.ndarray | None    # (14,) what the safety filter lets through (None: nothing sent)
    limited: tuple               # the safety limits that changed the command
    state: str                   # idle | engaged | fault
    reason: str = ""             # why the teleop is not engaged (or what just disengaged it)


class LeaderTeleop:
    """One `tick(reading)` per control period; `engage` / `disengage` from the operator."""

    def __init__(self, cfg: LeaderConfig, safety: SafetyFilter, names: tuple[str, ...]):
        if safety.cfg.rate_hz != cfg.rate_hz:
            raise ValueError(f"yam_leader: rate_hz {cfg.rate_hz!r} differs from the safety filter's "
                             f"{safety.cfg.rate_hz!r}; one reading must be one control period")
        if len(names) != 14:
            raise ValueError(f"yam_leader: expected 14 joint names, got {len(names)}: {names!r}")
        self.cfg, self.safety, self.names = cfg, safety, tuple(names)
        self.state, self.reason = "idle", "waiting for engage"
        self.last: np.ndarray | None = None      # the last good reading while engaged
        self.failed = 0
        self.sent = 0

    def engage(self, reading: np.ndarray, follower: np.ndarray) -> tuple[bool, str]:
        """Start following the leader if its pose matches the follower's measured one."""
        lead, fol = np.asarray(reading, np.float64), np.asarray(follower, np.float64)
        if lead.shape != (14,) or fol.shape != (14,):
            return False, f"need 14 leader and 14 follower values, got {lead.shape} and {fol.shape}"
        bad = [self.names[i] for i in range(14) if not (math.isfinite(lead[i]) and math.isfinite(fol[i]))]
        if bad:
            return False, f"no valid reading of {bad}"
        gap = np.abs(lead[ARM] - fol[ARM])
        far = {self.names[i]: round(float(g), 3) for i, g in zip(ARM, gap) if g > self.cfg.engage_tolerance_rad}
        if far:
            return False, (f"leader and follower differ by more than {self.cfg.engage_tolerance_rad} rad at {far}: "
                           f"move the leader to the follower's pose first")
        self.safety.reset(fol)
        self.state, self.reason, self.last, self.failed = "engaged", "", lead.copy(), 0
        return True, f"engaged (largest arm-joint gap {float(gap.max()):.3f} rad)"

    def disengage(self, reason: str, fault: bool = False) -> None:
        self.state, self.reason, self.last = ("fault" if fault else "idle"), reason, None

    def tick(self, reading: np.ndarray, ok: np.ndarray, stamp: float, now: float) -> LeaderTick:
        """One period: the leader's reading (`ok` per joint) to a filtered target, or nothing."""
        if self.state != "engaged":
            return LeaderTick(None, None, (), self.state, self.reason)
        pos = np.asarray(reading, np.float64)
        good = np.asarray(ok, bool) & np.isfinite(pos)
        if not good.all():
            self.failed += 1
            missing = [self.names[i] for i in np.flatnonzero(~good)]
            if self.failed >= self.cfg.max_failed_reads:
                self.disengage(f"{self.failed} failed leader reads in a row (last: {missing})", fault=True)
            return LeaderTick(None, None, (), self.state, self.reason or f"failed read of {missing}")
        self.failed = 0
        jump = np.abs(pos[ARM] - self.last[ARM])
        if (jump > self.cfg.max_jump_rad).any():
            i = int(ARM[np.argmax(jump)])
            self.disengage(f"leader {self.names[i]} jumped from {self.last[i]:.3f} to {pos[i]:.3f} rad in one "
                           f"period (> {self.cfg.max_jump_rad} rad): a glitch, not a hand", fault=True)
            return LeaderTick(None, None, (), self.state, self.reason)
        self.last = pos.copy()
        result = self.safety.filter(pos, stamp=stamp, now=now)
        self.sent += 1
        return LeaderTick(pos.copy(), result.sent, tuple(sorted(result.clipped)), self.state)
