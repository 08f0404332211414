"""Damiao DM4340/DM4310 motors in MIT mode over CAN, through `python-can`.

One `can.Bus` per channel (the YAM runs one CAN channel per arm; a shared channel works when
ids differ). Every request is answered by one feedback frame on the motor's master id:
- read_state: status request (id 0x7FF, [id_lo, id_hi, 0xCC, ...]) to each motor;
- write_targets: MIT frame (position, velocity 0, per-joint kp/kd, torque 0);
- enable/disable: the FF..FC / FF..FD frames.
Requests that got no (or a malformed) reply are re-sent while the deadline allows. Before
each round the receive queue is drained so a late reply to an earlier request is never
taken for the current one. Real CAN controllers drop frames with a bad CRC in hardware, so
a CRC error reaches the host as a missing frame (or, from a misbehaving node, a frame of the
wrong length), and is handled as such.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import can
import numpy as np

from . import damiao_protocol as dmp
from .bus import BusError, BusMismatchError, BusReading, JointBus, WriteResult
from .config import DriverConfig

MIN_ROUND_S = 0.001  # a retry round needs at least this much of the budget left


@dataclass
class _Channel:
    name: str
    bus: can.BusABC | None = None
    indices: list[int] = field(default_factory=list)
    by_feedback_id: dict[int, int] = field(default_factory=dict)  # master id -> joint index


class DamiaoBus(JointBus):
    """All 14 joints on one or two CAN channels (see module docstring)."""

    def __init__(self, config: DriverConfig):
        if config.bus != "damiao":
            raise ValueError(f"DamiaoBus needs bus: damiao, got {config.bus!r}")
        super().__init__(config)
        self.can_ids: list[int] = []
        self.limits: list[dmp.MotorLimits] = []
        self.kp = np.zeros(self.n)
        self.kd = np.zeros(self.n)
        self.channels: dict[str, _Channel] = {}
        self._channel_of: list[_Channel] = []
        for idx, (arm, j) in enumerate(config.joints):
            ch = self.channels.setdefault(arm.port, _Channel(arm.port))
            ch.indices.append(idx)
            ch.by_feedback_id[config.feedback_id(j)] = idx
            self._channel_of.append(ch)
            self.can_ids.append(j.id)
            self.limits.append(dmp.MOTOR_LIMITS[j.motor])
            self.kp[idx], self.kd[idx] = j.kp, j.kd
        self._timeout_s = config.reply_timeout_ms / 1000.0
        self.last_feedback: list[dmp.Feedback | None] = [None] * self.n

    # --- connect / close -------------------------------------------------------------
    def connect(self) -> None:
        try:
            for ch in self.channels.values():
                try:
                    ch.bus = can.Bus(interface=self.config.can_interface, channel=ch.name,
                                     bitrate=self.config.can_bitrate)
                except Exception as e:  # can.CanError, OSError
                    raise BusError(f"cannot open CAN channel {ch.name!r} ({self.config.can_interface}): {e}") from e
            self.connected = True
            frames = {i: (dmp.STATUS_REQUEST_ID, dmp.status_request(self.can_ids[i])) for i in range(self.n)}
            got, _, _ = self._transact(frames, None, rounds=self.config.connect_retries)
            missing = [i for i in range(self.n) if i not in got]
            if missing:
                detail = ", ".join(
                    f"{self.joint_names[i]!r} (CAN id {self.can_ids[i]:#x}, reply id "
                    f"{self.config.feedback_id(self.config.joints[i][1]):#x}) on {self._channel_of[i].name!r}"
                    for i in missing)
                raise BusMismatchError(f"Damiao motors did not answer a status request: {detail}; "
                                       f"check ids, master ids and wiring")
        except BaseException:
            self._close_ports()
            self.connected = False
            raise

    def _close_ports(self) -> None:
        for ch in self.channels.values():
            if ch.bus is not None:
                ch.bus.shutdown()
                ch.bus = None

    # --- request / reply -------------------------------------------------------------
    def _transact(self, frames: dict[int, tuple[int, bytes]], deadline: float | None,
                  rounds: int | None = None) -> tuple[dict[int, dmp.Feedback], dict[int, str], int]:
        """Send `frames` (joint index -> (arbitration id, data)); collect one reply each.

        Retries the unanswered ones while `deadline` allows (or `rounds` times when given).
        Returns (feedback per joint, reason per unanswered joint, number of re-sent frames).
        """
        pending = dict(frames)
        got: dict[int, dmp.Feedback] = {}
        reasons: dict[int, str] = {}
        retries = 0
        attempt = 0
        while pending:
            if attempt:
                if rounds is not None and attempt >= rounds:
                    break
                if rounds is None and (attempt > self.config.max_retries
                                       or time.monotonic() + MIN_ROUND_S > deadline):
                    break
                retries += len(pending)
            attempt += 1
            lost = {}                     # channels whose adapter failed this round -> why
            for ch in {id(self._channel_of[i]): self._channel_of[i] for i in pending}.values():
                try:
                    self._drain(ch)
                except (can.CanError, OSError, ValueError) as e:   # adapter gone, interface down
                    lost[ch.name] = f"CAN channel {ch.name!r} failed: {type(e).__name__}: {e}"
            for idx, (arb, data) in pending.items():
                ch = self._channel_of[idx]
                if ch.name in lost:
                    reasons[idx] = lost[ch.name]
                    continue
                try:
                    ch.bus.send(can.Message(arbitration_id=arb, data=data, is_extended_id=False))
                except (can.CanError, OSError, ValueError) as e:
                    reasons[idx] = f"send failed: {e}"
            until = time.monotonic() + self._timeout_s
            if deadline is not None and rounds is None:
                until = min(until, max(deadline, time.monotonic()))
            self._collect({i: f for i, f in pending.items() if self._channel_of[i].name not in lost}, got, reasons,
                          until)
            for idx in got:
                pending.pop(idx, None)
        for idx in pending:
            reasons.setdefault(idx, "no reply")
            reasons[idx] = f"CAN id {self.can_ids[idx]:#x}: {reasons[idx]}"
        return got, {i: r for i, r in reasons.items() if i not in got}, retries

    @staticmethod
    def _drain(ch: _Channel) -> None:
        while ch.bus.recv(timeout=0) is not None:
            pass

    def _collect(self, pending: dict, got: dict, reasons: dict, until: float) -> None:
        channels = {id(self._channel_of[i]): self._channel_of[i] for i in pending}
        while pending:
            left = until - time.monotonic()
            if left <= 0:
                return
            progressed = False
            for ch in channels.values():
                try:
                    msg = ch.bus.recv(timeout=left if len(channels) == 1 else 0)
                except (can.CanError, OSError, ValueError) as e:   # the adapter went away mid-read
                    for idx in [i for i in pending if self._channel_of[i] is ch]:
                        reasons[idx] = f"CAN channel {ch.name!r} failed: {type(e).__name__}: {e}"
                        del pending[idx]
                    continue
                if msg is None:
                    continue
                progressed = True
                idx = ch.by_feedback_id.get(msg.arbitration_id)
                if idx is None or idx not in pending:
                    continue
                try:
                    fb = dmp.unpack_feedback(bytes(msg.data), self.limits[idx])
                except ValueError as e:
                    reasons[idx] = f"corrupt reply ({e})"
                    continue
                if fb.motor_id != self.can_ids[idx] & 0xF:
                    reasons[idx] = f"reply names motor {fb.motor_id}, expected {self.can_ids[idx] & 0xF}"
                    continue
                got[idx] = fb
                self.last_feedback[idx] = fb
                del pending[idx]
            if not progressed and len(channels) > 1:
                time.sleep(0.0002)

    # --- torque ----------------------------------------------------------------------
    def enable(self) -> None:
        frames = {i: (self.can_ids[i], dmp.CMD_ENABLE) for i in range(self.n)}
        got, reasons, _ = self._transact(frames, None, rounds=self.config.connect_retries)
        self.torque_enabled = True
        for idx, fb in got.items():
            if fb.error:
                reasons[idx] = f"motor reports {fb.error}"
            elif fb.state != dmp.STATE_ENABLED:
                reasons[idx] = "motor did not switch to enabled"
        if reasons:
            raise BusError("torque enable failed: " + "; ".join(
                f"{self.joint_names[i]!r}: {r}" for i, r in sorted(reasons.items())))

    def disable(self) -> dict[int, str]:
        frames = {i: (self.can_ids[i], dmp.CMD_DISABLE) for i in range(self.n)}
        _, reasons, _ = self._transact(frames, None, rounds=self.config.connect_retries)
        self.torque_enabled = False
        return reasons

    # --- read / write ----------------------------------------------------------------
    def _reading(self, got: dict[int, dmp.Feedback], reasons: dict[int, str], retries: int) -> BusReading:
        n = self.n
        pos, vel, eff = np.full(n, np.nan), np.full(n, np.nan), np.full(n, np.nan)
        ok, hw, off = np.zeros(n, bool), np.zeros(n, bool), np.zeros(n, bool)
        errors = dict(reasons)
        for idx, fb in got.items():
            pos[idx], vel[idx], eff[idx], ok[idx] = fb.position, fb.velocity, fb.torque, True
            off[idx] = fb.state == dmp.STATE_DISABLED     # every feedback frame says whether it holds torque
            if fb.error:
                hw[idx] = True
                errors[idx] = f"hardware error: {fb.error}"
        return self._reading_from_motor(pos, vel, eff, ok, hw, errors, retries, torque_off=off)

    def read_state(self, deadline: float | None = None, mask: np.ndarray | None = None) -> BusReading:
        if not self.connected:
            raise BusError("read_state called on a bus that is not connected")
        mask = np.ones(self.n, bool) if mask is None else np.asarray(mask, bool)
        frames = {i: (dmp.STATUS_REQUEST_ID, dmp.status_request(self.can_ids[i]))
                  for i in range(self.n) if mask[i]}
        got, reasons, retries = self._transact(frames, self._deadline(deadline))
        return self._reading(got, reasons, retries)

    def _write(self, motor_rad: np.ndarray, mask: np.ndarray, deadline: float,
               torque_ff: np.ndarray | None = None) -> WriteResult:
        written = np.full(self.n, np.nan)
        frames = {}
        for idx in np.flatnonzero(mask):
            lim = self.limits[idx]
            t_ff = 0.0 if torque_ff is None else float(torque_ff[idx])
            cmd = dmp.MitCommand(float(motor_rad[idx]), 0.0, float(self.kp[idx]), float(self.kd[idx]), t_ff)
            frames[int(idx)] = (self.can_ids[idx], dmp.pack_mit(cmd, lim))
            written[idx] = dmp.quantize_position(float(motor_rad[idx]), lim)
        got, reasons, retries = self._transact(frames, deadline)
        errors = {i: f"command not acknowledged: {r}" for i, r in reasons.items()}
        hw = np.zeros(self.n, bool)
        for idx, fb in got.items():
            if fb.error:
                errors[idx] = f"hardware error: {fb.error}"
                hw[idx] = True
        return WriteResult(written, errors, retries, hw)
