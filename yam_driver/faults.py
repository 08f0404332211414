"""What the driver reports and how it decides a joint has faulted: its modes, latched faults, tick
and loop reports, and the checks for hardware that lies (torque silently off, a joint not
following its command, a reading that jumps further than the joint can move, repeated failed
exchanges, hardware error flags), in `JointHealth`. `YamDriver._step` (driver.py) runs them every
tick; the driver node's `monitor.DriverMonitor` reports them. Fault detection reads in those three files."""
from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import Enum
from typing import Callable

import numpy as np

from .bus import BusReading
from .config import DriverConfig

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
    sched_fifo: bool = False  # the loop's thread got SCHED_FIFO (its rt_priority, where the OS allows it)


class JointHealth:
    """Each joint's health, owned here: latched faults, consecutive failed exchanges, ticks over the
    tracking limit, the time of the last plausible reading. `YamDriver._step` runs the checks every
    tick; a check that latches calls `on_fault()` (the driver holds, or turns torque off)."""

    def __init__(self, config: DriverConfig, ceiling: np.ndarray, gripper: np.ndarray,
                 on_fault: Callable[[], None]):
        """`ceiling`: (14,) each joint's speed ceiling (rad/s); `gripper`: (14,) bool."""
        self.config, self.names, self.n = config, config.joint_names, len(config.joint_names)
        self._ceiling, self._gripper, self._on_fault = ceiling, gripper, on_fault
        self.faults: list[JointFault] = []
        self.faulted = np.zeros(self.n, bool)
        self.glitches = 0                           # readings refused as implausible jumps
        self._fail_count = np.zeros(self.n, int)    # consecutive ticks without a valid exchange
        self._over = np.zeros(self.n, int)          # consecutive ticks over max_tracking_error
        self._seen_t = np.full(self.n, np.nan)      # monotonic time of each joint's last plausible reading

    def reset(self) -> None:
        """No fault, no count (connect, the operator's fault reset)."""
        self.faults.clear()
        self.faulted[:] = False
        self._fail_count[:] = 0
        self._over[:] = 0

    def seen(self, t: float) -> None:
        """Every joint was just read plausibly (a full read at connect, enable, reset)."""
        self._seen_t[:] = t

    def refuse_glitches(self, reading: BusReading, present: np.ndarray, t: float) -> None:
        """A reading further from the last plausible one (`present`) than the joint could have moved
        (its speed ceiling x `reading_speed_factor` over the time between them, at least one period,
        + `reading_margin`) is refused: not ok this tick (a failed read, counted toward a fault),
        never a position or hold target."""
        c = self.config
        # at least one period: the command itself moves a period's step per tick, however fast ticks come
        dt = np.where(np.isfinite(self._seen_t), np.maximum(t - self._seen_t, c.period_s), np.inf)
        bound = self._ceiling * c.reading_speed_factor * dt + c.reading_margin
        jump = np.abs(reading.position - present)
        glitch = reading.ok & np.isfinite(present) & (jump > bound)
        for i in np.flatnonzero(glitch):
            self.glitches += 1
            reading.errors[i] = (f"implausible reading {reading.position[i]:+.3f}: {jump[i]:.3f} from the last "
                                 f"plausible {present[i]:+.3f} in {1e3 * dt[i]:.0f} ms (bound {bound[i]:.3f})")
        reading.ok = reading.ok & ~glitch
        self._seen_t = np.where(reading.ok, t, self._seen_t)

    def check_torque(self, reading: BusReading, torque_on: bool, now: float) -> list[JointFault]:
        """A motor that says its torque is off while the driver holds torque (`torque_on`) is not holding the
        arm: a fault at once, named (no error flag needed: a brown-out or power-cycled motor comes back disabled)."""
        if reading.torque_off is None or not torque_on:
            return []
        lost = reading.torque_off & ~self.faulted
        return self._latch_all([(i, "motor reports torque off while the driver holds torque (not holding the arm)")
                                for i in np.flatnonzero(lost)], now)

    def check_tracking(self, reading: BusReading, command: np.ndarray, commanding: bool,
                       now: float) -> list[JointFault]:
        """An arm joint further than `max_tracking_error` from its `command` for `tracking_error_ticks`
        ticks in a row while `commanding` (torque on, started) is a fault (sagging without torque,
        blocked, a slipped coupling). Grippers are exempt: a grasp holds them off their command."""
        c = self.config
        if not commanding:
            return []
        err = np.abs(reading.position - command)
        over = reading.ok & ~self.faulted & ~self._gripper & np.isfinite(err) & (err > c.max_tracking_error)
        self._over = np.where(over, self._over + 1, 0)
        return self._latch_all([(i, f"tracking error {err[i]:.3f} rad > {c.max_tracking_error} for {self._over[i]} "
                                    f"ticks (commanded {command[i]:+.3f}, measured {reading.position[i]:+.3f})")
                                for i in np.flatnonzero(self._over >= c.tracking_error_ticks)], now)

    def latch_hardware(self, hw: np.ndarray, reasons: dict[int, str], now: float) -> list[JointFault]:
        """A hardware error flag latches at once (the motor itself has stopped)."""
        return self._latch_all([(i, reasons.get(i, "hardware error")) for i in np.flatnonzero(hw)
                                if not self.faulted[i]], now)

    def count_failures(self, failed: np.ndarray, reasons: dict[int, str], now: float) -> list[JointFault]:
        """Consecutive failed ticks per joint; `fault_after_failures` in a row latch a fault."""
        self._fail_count[failed] += 1
        self._fail_count[~failed] = 0
        return self._latch_all([(i, f"{self._fail_count[i]} ticks in a row without a valid exchange; "
                                    f"last: {reasons.get(i, 'no reply')}")
                                for i in np.flatnonzero(self._fail_count >= self.config.fault_after_failures)
                                if not self.faulted[i]], now)

    def _latch_all(self, found: list[tuple[int, str]], now: float) -> list[JointFault]:
        new = []
        for i, reason in found:
            self.faulted[i] = True
            fault = JointFault(self.names[i], int(i), reason, now)
            self.faults.append(fault)
            log.error("yam_driver fault latched: %s", fault)
            new.append(fault)
        if new:
            self._on_fault()
        return new
