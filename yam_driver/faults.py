"""What the driver reports and how it decides a joint has faulted: its modes, latched faults, tick
and loop reports, and the checks for hardware that lies (torque silently off, a joint not
following its command, a reading that jumps further than the joint can move, repeated failed
exchanges, hardware error flags). `YamDriver` (driver.py) runs them every tick."""
from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import Enum

import numpy as np

from .bus import BusReading

log = logging.getLogger("yam_driver.driver")


class Mode(str, Enum):
    """Driver state; see the module docstring."""

    IDLE = "idle"
    CONNECTED = "connected"    # bus open, every motor answered and is inside its limits; torque off
    HOMING = "homing"          # moving to the configured home pose at the ramp speed (targets ignored)
    RAMPING = "ramping"
    RUNNING = "running"
    HOLDING = "holding"
    FAULT = "fault"
    STOPPED = "stopped"


@dataclass(frozen=True)
class JointFault:
    """A latched fault: which joint and why."""

    joint: str  # e.g. "left_joint3"
    index: int  # 0..13
    reason: str
    stamp: float  # driver clock

    def __str__(self) -> str:
        return f"{self.joint}: {self.reason}"


@dataclass
class TickReport:
    """Everything one tick read, decided and wrote."""

    tick: int
    mode: Mode
    position: np.ndarray  # (14,) last valid present position, driver units
    velocity: np.ndarray  # (14,) last valid velocity, driver units per second
    effort: np.ndarray  # (14,) last valid effort (Dynamixel: current A; Damiao: torque Nm)
    commanded: np.ndarray  # (14,) slew-limited command of this tick, driver units
    written: np.ndarray  # (14,) what went on the wire (after clipping/quantisation); NaN = nothing
    read_ok: np.ndarray  # (14,) bool
    clipped: np.ndarray  # (14,) bool: the target was outside the limits and got clipped
    errors: dict[str, str]  # joint name -> problem seen this tick (retried; not yet latched)
    new_faults: list[JointFault]
    target_age_s: float | None  # age of the target in use; None before the first target
    read_s: float
    write_s: float
    retries: int
    feedforward: np.ndarray | None = None  # (14,) Nm joint-space feed-forward sent with this tick's commands
    gripper_limited: np.ndarray | None = None  # (14,) bool: a blocked gripper's command was held to the force limit


@dataclass
class LoopStats:
    """Summary of one `run()`."""

    ticks: int = 0
    achieved_rate_hz: float = 0.0  # over the whole run
    overruns: int = 0  # ticks that ended after their deadline
    io_p50_ms: float = float("nan")  # read + write of all joints per tick
    io_p99_ms: float = float("nan")
    stop_reason: str = ""


class HardwareChecks:
    """The driver's per-tick fault checks (mixed into YamDriver; they read and latch its state)."""

    def _refuse_glitches(self, reading: BusReading, t: float) -> None:
        """A reading further from the last plausible one than the joint could have moved (its speed
        ceiling x `reading_speed_factor` over the time between them, at least one period, + `reading_margin`) is refused:
        not ok this tick (a failed read, counted toward a fault), never a position or hold target."""
        c = self.config
        # at least one period: the command itself moves a period's step per tick, however fast ticks come
        dt = np.where(np.isfinite(self._seen_t), np.maximum(t - self._seen_t, c.period_s), np.inf)
        bound = self._ceiling * c.reading_speed_factor * dt + c.reading_margin
        jump = np.abs(reading.position - self._present)
        glitch = reading.ok & np.isfinite(self._present) & (jump > bound)
        for i in np.flatnonzero(glitch):
            self.glitches += 1
            reading.errors[i] = (f"implausible reading {reading.position[i]:+.3f}: {jump[i]:.3f} from the last "
                                 f"plausible {self._present[i]:+.3f} in {1e3 * dt[i]:.0f} ms (bound {bound[i]:.3f})")
        reading.ok = reading.ok & ~glitch
        self._seen_t = np.where(reading.ok, t, self._seen_t)

    def _check_torque(self, reading: BusReading, now: float) -> list[JointFault]:
        """A motor that says its torque is off while the driver holds torque is not holding the arm:
        a fault at once, named (no error flag needed: a brown-out or power-cycled motor comes back disabled)."""
        if reading.torque_off is None or not self.bus.torque_enabled:
            return []
        lost = reading.torque_off & ~self._faulted
        new = [self._latch(i, "motor reports torque off while the driver holds torque (not holding the arm)", now)
               for i in np.flatnonzero(lost)]
        if new:
            self._enter_fault()
        return new

    def _check_tracking(self, reading: BusReading, now: float) -> list[JointFault]:
        """An arm joint further than `max_tracking_error` from its command for `tracking_error_ticks`
        ticks in a row is a fault (sagging without torque, blocked, a slipped coupling). Grippers are
        exempt: a grasp holds them off their command."""
        c = self.config
        if not self.bus.torque_enabled or self.mode in (Mode.IDLE, Mode.CONNECTED, Mode.STOPPED):
            return []
        err = np.abs(reading.position - self._command)
        over = reading.ok & ~self._faulted & ~self._gripper & np.isfinite(err) & (err > c.max_tracking_error)
        self._over = np.where(over, self._over + 1, 0)
        new = [self._latch(i, f"tracking error {err[i]:.3f} rad > {c.max_tracking_error} for {self._over[i]} ticks "
                              f"(commanded {self._command[i]:+.3f}, measured {reading.position[i]:+.3f})", now)
               for i in np.flatnonzero(self._over >= c.tracking_error_ticks)]
        if new:
            self._enter_fault()
        return new

    def _latch_hardware(self, hw: np.ndarray, reasons: dict[int, str], now: float) -> list[JointFault]:
        """A hardware error flag latches at once (the motor itself has stopped)."""
        new = [self._latch(i, reasons.get(i, "hardware error"), now)
               for i in np.flatnonzero(hw) if not self._faulted[i]]
        if new:
            self._enter_fault()
        return new

    def _count_failures(self, failed: np.ndarray, reasons: dict[int, str], now: float) -> list[JointFault]:
        """Consecutive failed ticks per joint; `fault_after_failures` in a row latch a fault."""
        self._fail_count[failed] += 1
        self._fail_count[~failed] = 0
        new = [self._latch(i, f"{self._fail_count[i]} ticks in a row without a valid exchange; "
                              f"last: {reasons.get(i, 'no reply')}", now)
               for i in np.flatnonzero(self._fail_count >= self.config.fault_after_failures)
               if not self._faulted[i]]
        if new:
            self._enter_fault()
        return new

    def _latch(self, i: int, reason: str, now: float) -> JointFault:
        self._faulted[i] = True
        fault = JointFault(self.names[i], i, reason, now)
        self.faults.append(fault)
        log.error("yam_driver fault latched: %s", fault)
        return fault
