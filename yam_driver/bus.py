"""The joint bus interface shared by the Dynamixel and Damiao buses.

A bus speaks driver units (see `config.py`) for all 14 joints: it reads the present state
and writes position targets, clipping them to the configured limits and returning exactly
what went onto the wire (after clipping and the motor's quantisation). Retries happen inside
the bus, bounded by the deadline the caller passes, so one tick never overruns its budget.
"""
from __future__ import annotations

import abc
import time
from dataclasses import dataclass, field

import numpy as np

from vam_stack.config import ConfigError

from .config import DriverConfig, JointMap


class BusError(RuntimeError):
    """Communication on the bus failed in a way the caller must handle (names the joints)."""


class BusMismatchError(ConfigError):
    """The bus does not match the configuration (missing id, wrong model): raised at connect."""


@dataclass
class BusReading:
    """One read of every joint. Arrays are (n_joints,); entries of failed joints are NaN."""

    position: np.ndarray  # driver units
    velocity: np.ndarray  # driver units per second
    effort: np.ndarray  # Dynamixel: current in A; Damiao: torque in Nm
    ok: np.ndarray  # bool: a valid reply arrived this read
    hardware_error: np.ndarray  # bool: the motor reports a hardware error flag
    errors: dict[int, str] = field(default_factory=dict)  # joint index -> reason
    retries: int = 0  # extra requests sent to get the replies in
    stamp: float = 0.0  # time.monotonic() when the read finished
    torque_off: np.ndarray | None = None  # bool (n,): the motor says its torque is off (no error flag
    #   needed: a Damiao in the disabled state, a Dynamixel with Torque Enable 0); None = not read this time

    @classmethod
    def empty(cls, n: int) -> "BusReading":
        nan = np.full(n, np.nan)
        return cls(nan.copy(), nan.copy(), nan.copy(), np.zeros(n, bool), np.zeros(n, bool))


@dataclass
class WriteResult:
    """What a write put on the wire: (n_joints,) driver units, NaN where nothing was sent."""

    written: np.ndarray
    errors: dict[int, str] = field(default_factory=dict)  # joint index -> reason
    retries: int = 0
    hardware_error: np.ndarray | None = None  # bool (n,): a reply to the write carried an error flag


class JointBus(abc.ABC):
    """connect / read_state / write_targets / enable / disable / close, and a context manager."""

    def __init__(self, config: DriverConfig):
        self.config = config
        self.joint_map = JointMap.from_config(config)
        self.joint_names = config.joint_names
        self.n = len(self.joint_names)
        self.connected = False
        self.torque_enabled = False

    # --- interface -------------------------------------------------------------------
    @abc.abstractmethod
    def connect(self) -> None:
        """Open the ports and check every configured motor answers (BusMismatchError if not)."""

    @abc.abstractmethod
    def read_state(self, deadline: float | None = None, mask: np.ndarray | None = None) -> BusReading:
        """Read the joints in `mask` (default all), retrying missed replies until `deadline`
        (monotonic seconds) for at most `max_retries` extra rounds. Joints outside `mask`
        come back with ok False and no error."""

    @abc.abstractmethod
    def _write(self, motor_rad: np.ndarray, mask: np.ndarray, deadline: float,
               torque_ff: np.ndarray | None = None) -> WriteResult:
        """Send motor-space targets for joints in `mask` (with `torque_ff`, (n,) motor Nm, as the
        MIT command's feed-forward where the bus has one); return written motor angles."""

    @abc.abstractmethod
    def enable(self) -> None:
        """Torque on for every joint (BusError naming joints that refused)."""

    @abc.abstractmethod
    def disable(self) -> dict[int, str]:
        """Torque off for every joint, best effort; returns joint index -> failure reason."""

    @abc.abstractmethod
    def _close_ports(self) -> None:
        """Release the ports."""

    def prepare_reset(self) -> list[str]:
        """Called by the driver's fault reset before it re-reads every joint: undo what a stall or
        an unplugged adapter left behind (a lost port reopened, a motor's latched communication
        loss cleared). Returns one line per thing done, for the log; nothing to do by default."""
        return []

    # --- shared behaviour --------------------------------------------------------------
    def write_targets(self, targets: np.ndarray, mask: np.ndarray | None = None,
                      deadline: float | None = None, torque_ff: np.ndarray | None = None) -> WriteResult:
        """Clip `targets` (driver units) to the limits and send the joints in `mask`.

        `torque_ff`: (n,) joint-space feed-forward torque in Nm (gravity), sent in each MIT
        command by the buses that have one (Damiao, the simulated motors); None sends 0.
        Non-finite targets or torques in `mask` are refused with ValueError naming the joint:
        the bus never sends a value it could not validate.
        """
        if not self.connected:
            raise BusError("write_targets called on a bus that is not connected")
        targets = np.asarray(targets, dtype=np.float64)
        if targets.shape != (self.n,):
            raise ValueError(f"targets must have shape ({self.n},), got {targets.shape}")
        mask = np.ones(self.n, bool) if mask is None else np.asarray(mask, bool)
        bad = mask & ~np.isfinite(targets)
        if bad.any():
            names = {self.joint_names[i]: float(targets[i]) for i in np.flatnonzero(bad)}
            raise ValueError(f"refusing non-finite targets: {names}")
        motor_ff = None
        if torque_ff is not None:
            torque_ff = np.asarray(torque_ff, dtype=np.float64)
            if torque_ff.shape != (self.n,):
                raise ValueError(f"torque_ff must have shape ({self.n},), got {torque_ff.shape}")
            bad = mask & ~np.isfinite(torque_ff)
            if bad.any():
                names = {self.joint_names[i]: float(torque_ff[i]) for i in np.flatnonzero(bad)}
                raise ValueError(f"refusing non-finite feed-forward torques: {names}")
            motor_ff = np.where(mask, torque_ff, 0.0) * self.joint_map.direction   # joint Nm -> motor Nm
        clipped = self.joint_map.clip(np.where(mask, targets, 0.0))
        deadline = self._deadline(deadline)
        result = self._write(self.joint_map.to_motor(clipped), mask, deadline, motor_ff)
        result.written = np.where(np.isfinite(result.written), self.joint_map.to_driver(result.written), np.nan)
        return result

    def close(self, disable_torque: bool = True) -> None:
        """Torque off (unless told otherwise) and release the ports; safe to call twice."""
        if not self.connected:
            return
        try:
            if disable_torque and self.torque_enabled:
                self.disable()
        finally:
            self.connected = False
            self._close_ports()

    def _deadline(self, deadline: float | None) -> float:
        if deadline is None:
            return time.monotonic() + self.config.period_s * self.config.io_budget_fraction
        return deadline

    def _reading_from_motor(self, pos: np.ndarray, vel: np.ndarray, eff: np.ndarray, ok: np.ndarray,
                            hw: np.ndarray, errors: dict[int, str], retries: int,
                            torque_off: np.ndarray | None = None) -> BusReading:
        jm = self.joint_map
        return BusReading(
            position=np.where(ok, jm.to_driver(pos), np.nan),
            velocity=np.where(ok, jm.velocity_to_driver(vel), np.nan),
            effort=np.where(ok, eff, np.nan),
            ok=ok, hardware_error=hw, errors=errors, retries=retries, stamp=time.monotonic(),
            torque_off=None if torque_off is None else np.asarray(torque_off, bool) & ok,
        )

    def __enter__(self) -> "JointBus":
        self.connect()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

