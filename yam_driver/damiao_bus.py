"""Damiao DM4340/DM4310/DM3507 motors in MIT mode over CAN, through `python-can`.

One `can.Bus` per channel (the YAM runs one CAN channel per arm; a shared channel works when
ids differ). Every request is answered by one frame on the motor's master id:
- read_state, `damiao_state_read: status_request` (default): a status request (id 0x7FF,
  [id_lo, id_hi, 0xCC, ...]) to each motor, which commands nothing (Damiao's DM_CAN library);
- read_state, `mit_reply`: an MIT frame that re-sends the last command sent to that motor
  (same position, kp, kd, t_ff; before the first write kp 0, kd 0, t 0: no torque), whose
  reply carries the state, as i2rt reads it (`i2rt/motor_drivers/dm_driver.py` set_control,
  commit 5d47b358bafb30c65e397f2ece506550a0db4594). For firmware that ignores 0xCC; connect
  in status_request mode detects that firmware and names this setting;
- write_targets: MIT frame (position, velocity 0, per-joint kp/kd, torque feed-forward);
- enable/disable: the FF..FC / FF..FD frames.
Requests that got no (or a malformed) reply are re-sent while the deadline allows. Before
each round the receive queue is drained so a late reply to an earlier request is never
taken for the current one; when a round's deadline passes, the replies already in the
receive queue are still taken (they arrived in time; only this thread was late to read them,
as on a loaded host) before a motor is declared silent. Real CAN controllers drop frames with a
bad CRC in hardware, so a CRC error reaches the host as a missing frame (or, from a
misbehaving node, a frame of the wrong length), and is handled as such.

Connect: opens the channels, checks every motor answers, reads PMAX/VMAX/TMAX (registers 21,
22, 23) from every motor and refuses one that differs from `MOTOR_LIMITS` of its configured
type (or does not answer, unless `damiao_check_registers: false`), refuses a motor that
reports a hardware error, except communication loss (0xD): the motor's own command timeout
(i2rt: 400 ms) latches it when the process commanding it died with torque on, and it is
cleared (FF..FB) here, as i2rt's `motor_on` does, so the arm restarts without a power cycle.
`enable()` clears 0xD the same way, and so does the driver's fault reset (`prepare_reset`).
"""
from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable

import can
import numpy as np

from . import can_socket, damiao_protocol as dmp
from .bus import BusError, BusMismatchError, BusReading, JointBus, WriteResult
from .config import DriverConfig

log = logging.getLogger(__name__)

MIN_ROUND_S = 0.001  # a retry round needs at least this much of the budget left
SETUP_REPLY_S = 0.05  # s: wait per round for replies at connect and fault reset (no tick budget to keep;
#   a reply arrives in < 1 ms, so this only matters when the host is slow, and then it avoids a false refusal)
_UNITS = {dmp.REG_PMAX: "rad", dmp.REG_VMAX: "rad/s", dmp.REG_TMAX: "Nm"}

Parse = Callable[[int, bytes], object]  # (joint index, reply data) -> parsed reply; ValueError = not it


class _WrongReply(ValueError):
    """A well-formed reply that is not the one asked for (another motor, another register)."""


@dataclass
class _Channel:
    name: str
    bus: can.BusABC | None = None
    indices: list[int] = field(default_factory=list)
    by_feedback_id: dict[int, int] = field(default_factory=dict)  # master id -> joint index


def _num(x: float) -> str:
    """A register value as a person reads it: 8.0, 10.0, 12.5 (float32 noise rounded off)."""
    return repr(float(f"{x:.7g}"))


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
        self.last_mit: list[bytes | None] = [None] * self.n  # the last MIT frame sent to each motor
        self.state_read = config.damiao_state_read

    # --- connect / close -------------------------------------------------------------
    def connect(self) -> None:
        self.last_mit = [None] * self.n      # nothing commanded yet on this connection: reads command no torque
        try:
            for ch in self.channels.values():
                try:
                    if self.config.can_interface == can_socket.INTERFACE:   # an emulator's own process
                        ch.bus = can_socket.SocketCanBus(ch.name)
                    else:
                        ch.bus = can.Bus(interface=self.config.can_interface, channel=ch.name,
                                         bitrate=self.config.can_bitrate)
                except Exception as e:  # can.CanError, OSError
                    raise BusError(f"cannot open CAN channel {ch.name!r} ({self.config.can_interface}): {e}") from e
            self.connected = True
            got = self._check_present()
            if self.config.damiao_check_registers:
                self._check_limit_registers()
            self._refuse_hardware_errors(got, "connect")
            lost = [i for i, fb in got.items() if fb.state == dmp.STATE_COMM_LOSS]
            if lost:
                self._clear_comm_loss(lost, "connect")
        except BaseException:
            self._close_ports()
            self.connected = False
            raise

    def _describe(self, idx: int) -> str:
        return (f"{self.joint_names[idx]!r} (CAN id {self.can_ids[idx]:#x}, reply id "
                f"{self.config.feedback_id(self.config.joints[idx][1]):#x}) on {self._channel_of[idx].name!r}")

    def _check_present(self) -> dict[int, dmp.Feedback]:
        """Every motor answers the configured state read (BusMismatchError naming those that do not)."""
        got, _, _ = self._ask(self._state_frames(range(self.n)))
        missing = [i for i in range(self.n) if i not in got]
        if not missing:
            return got
        if self.state_read == "mit_reply":
            raise BusMismatchError(f"Damiao motors did not answer an MIT frame: "
                                   f"{', '.join(self._describe(i) for i in missing)}; check ids, master ids and wiring")
        # firmware that ignores the status request still answers every MIT frame (zero gains: no torque)
        probe = {i: (self.can_ids[i], self._zero_gain_frame(i)) for i in missing}
        answered, _, _ = self._ask(probe)
        silent = [i for i in missing if i not in answered]
        if answered:   # alive: ask once more, so a motor that was only slow is not taken for such firmware
            late, _, _ = self._ask(self._state_frames(sorted(answered)))
            got.update(late)
            answered = {i: fb for i, fb in answered.items() if i not in late}
            if not answered and not silent:
                return got
        parts = []
        if answered:
            parts.append(f"Damiao motors answer an MIT frame but not the status request (0x7FF, 0xCC): "
                         f"{', '.join(self._describe(i) for i in sorted(answered))}; their firmware ignores it: "
                         f"set damiao_state_read: mit_reply in the driver config (state from each MIT reply, "
                         f"as i2rt reads it)")
        if silent:
            parts.append(f"Damiao motors did not answer a status request nor an MIT frame: "
                         f"{', '.join(self._describe(i) for i in silent)}; check ids, master ids and wiring")
        raise BusMismatchError("; ".join(parts))

    def _check_limit_registers(self) -> None:
        """PMAX/VMAX/TMAX of every motor must equal the table of its configured motor type: the
        motor scales MIT frames and feedback with its registers, the bus with the table."""
        wrong: list[str] = []
        silent: list[str] = []
        for reg, attr in dmp.LIMIT_REGISTERS:
            frames = {i: (dmp.STATUS_REQUEST_ID, dmp.register_request(self.can_ids[i], dmp.REGISTER_READ, reg))
                      for i in range(self.n)}
            got, reasons, _ = self._ask(frames, self._register_parser(reg))
            name = dmp.REGISTER_NAMES[reg]
            for i in range(self.n):
                if i not in got:
                    silent.append(f"{self.joint_names[i]} {name} ({reasons.get(i, 'no reply')})")
                    continue
                have, want = float(got[i].value), getattr(self.limits[i], attr)
                if not math.isclose(have, want, rel_tol=1e-6, abs_tol=1e-6):
                    wrong.append(f"{self.joint_names[i]}: {name} register {_num(have)} {_UNITS[reg]}, "
                                 f"config ({self.config.joints[i][1].motor}) {_num(want)}")
        if wrong:
            raise BusMismatchError(
                "Damiao motor ranges differ from the configured motor type: " + "; ".join(wrong) +
                ": the motor scales MIT commands and feedback with its registers, the driver with the table in "
                "yam_driver/damiao_protocol.py (MOTOR_LIMITS), so positions, velocities and torques would be "
                "misread and mis-sent; correct `motor:` or set the registers (Damiao's tool, 0x55 then 0xAA)")
        if silent:
            raise BusMismatchError(
                "Damiao motors did not answer a register read (0x7FF, 0x33): " + "; ".join(silent) +
                ": their MIT ranges cannot be checked; refusing to start. If the firmware has no register reads, set "
                "damiao_check_registers: false to trust the table in yam_driver/damiao_protocol.py unread")

    def _refuse_hardware_errors(self, got: dict[int, dmp.Feedback], what: str) -> None:
        """Every error but communication loss needs a person: refuse, naming the joint and the code."""
        bad = {i: fb for i, fb in got.items() if fb.error and fb.state != dmp.STATE_COMM_LOSS}
        if bad:
            raise BusError(
                f"{what}: Damiao motors report hardware errors: " + "; ".join(
                    f"{self.joint_names[i]}: hardware error {fb.error} (error code {fb.state:#x})"
                    for i, fb in sorted(bad.items())) +
                "; only communication loss (0xd) is cleared automatically: find the cause, then clear or power-cycle")

    def _clear_comm_loss(self, indices: list[int], what: str) -> dict[int, dmp.Feedback]:
        """Clear communication loss (FF..FB) on `indices` and read them back: each must now report
        disabled or enabled (BusError otherwise). Logs one line naming the motors."""
        frames = {i: (self.can_ids[i], dmp.CMD_CLEAR_ERROR) for i in indices}
        self._transact(frames, None, rounds=1)        # its reply (if the firmware sends one) is not relied on
        back, reasons, _ = self._ask(self._state_frames(indices))
        failed = {i: reasons.get(i, "no reply") if i not in back else f"still reports {back[i].error or back[i].state}"
                  for i in indices if i not in back or back[i].error}
        if failed:
            raise BusError(f"{what}: clearing communication loss (FF..FB) failed: " + "; ".join(
                f"{self.joint_names[i]}: {r}" for i, r in sorted(failed.items())))
        log.warning("%s: cleared communication loss (0xd) on %s: their command timeout ran out with torque on "
                    "(the process commanding them stopped without disabling them); now disabled", what,
                    ", ".join(self.joint_names[i] for i in indices))
        return back

    def prepare_reset(self) -> list[str]:
        """The driver's fault-reset hook (`YamDriver.clear_faults` calls it before re-reading every
        joint): clears communication loss latched while the driver was stalled, so the reset can
        re-read and enable; other hardware errors stay for that re-read to report. CAN channels
        are not reopened. `_clear_comm_loss` logs the motors it cleared; the line returned names them."""
        got, _, _ = self._ask(self._state_frames(range(self.n)))
        lost = [i for i, fb in got.items() if fb.state == dmp.STATE_COMM_LOSS]
        if not lost:
            return []
        self._clear_comm_loss(lost, "fault reset")
        return [f"{', '.join(self.joint_names[i] for i in lost)} had latched communication loss (0xd: their "
                f"command timeout ran out, so they had turned their torque off; cleared, re-enabled below)"]

    def _close_ports(self) -> None:
        for ch in self.channels.values():
            if ch.bus is not None:
                ch.bus.shutdown()
                ch.bus = None

    # --- frames ------------------------------------------------------------------------
    def _zero_gain_frame(self, idx: int) -> bytes:
        """kp 0, kd 0, t 0 at the present position (the last one read, else 0): commands no torque."""
        fb = self.last_feedback[idx]
        position = fb.position if fb is not None else 0.0
        return dmp.pack_mit(dmp.MitCommand(position, 0.0, 0.0, 0.0, 0.0), self.limits[idx])

    def _state_frames(self, indices: Iterable[int]) -> dict[int, tuple[int, bytes]]:
        """One state request per joint in the configured way (module docstring)."""
        if self.state_read == "mit_reply":
            return {i: (self.can_ids[i], self.last_mit[i] or self._zero_gain_frame(i)) for i in indices}
        return {i: (dmp.STATUS_REQUEST_ID, dmp.status_request(self.can_ids[i])) for i in indices}

    def _parse_feedback(self, idx: int, data: bytes) -> dmp.Feedback:
        fb = dmp.unpack_feedback(data, self.limits[idx])
        if fb.motor_id != self.can_ids[idx] & 0xF:
            raise _WrongReply(f"reply names motor {fb.motor_id}, expected {self.can_ids[idx] & 0xF}")
        self.last_feedback[idx] = fb
        return fb

    def _register_parser(self, reg: int) -> Parse:
        def parse(idx: int, data: bytes) -> dmp.RegisterReply:
            reply = dmp.unpack_register_reply(data)
            if (reply.can_id, reply.op) == (self.can_ids[idx], dmp.REGISTER_READ) and reply.reg != reg:
                names = dmp.REGISTER_NAMES
                raise _WrongReply(   # the drained queue cannot hold it: it came after its own read's rounds
                    f"no reply to the register {reg} ({names.get(reg, '?')}) read; a late reply to an earlier read "
                    f"(register {reply.reg}, {names.get(reply.reg, '?')}) came instead: this motor answers slower "
                    f"than a set-up read waits ({1e3 * SETUP_REPLY_S:.0f} ms a try): check the bus load and the "
                    f"CAN adapter")
            if (reply.can_id, reply.op, reply.reg) != (self.can_ids[idx], dmp.REGISTER_READ, reg):
                raise _WrongReply(f"register reply names motor {reply.can_id:#x}, op {reply.op:#04x}, register "
                                 f"{reply.reg}; expected {self.can_ids[idx]:#x}, 0x33, {reg}")
            return reply
        return parse

    # --- request / reply -------------------------------------------------------------
    def _ask(self, frames: dict[int, tuple[int, bytes]], parse: Parse | None = None):
        """A set-up exchange (connect, clearing, fault reset): `connect_retries` rounds of up to
        SETUP_REPLY_S each; it returns as soon as every reply is in."""
        return self._transact(frames, None, rounds=self.config.connect_retries, parse=parse, reply_s=SETUP_REPLY_S)

    def _transact(self, frames: dict[int, tuple[int, bytes]], deadline: float | None,
                  rounds: int | None = None, parse: Parse | None = None,
                  reply_s: float | None = None) -> tuple[dict, dict[int, str], int]:
        """Send `frames` (joint index -> (arbitration id, data)); collect one reply each.

        Retries the unanswered ones while `deadline` allows (or `rounds` times when given).
        `parse` turns a reply into its value (default: a feedback frame); `reply_s` is the wait
        per round (default: reply_timeout_ms).
        Returns (reply per joint, reason per unanswered joint, number of re-sent frames).
        """
        parse = parse or self._parse_feedback
        pending = dict(frames)
        got: dict[int, object] = {}
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
            until = time.monotonic() + (self._timeout_s if reply_s is None else reply_s)
            if deadline is not None and rounds is None:
                until = min(until, max(deadline, time.monotonic()))
            self._collect({i: f for i, f in pending.items() if self._channel_of[i].name not in lost}, got, reasons,
                          until, parse)
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

    def _collect(self, pending: dict, got: dict, reasons: dict, until: float, parse: Parse) -> None:
        channels = {id(self._channel_of[i]): self._channel_of[i] for i in pending}
        while pending:
            left = until - time.monotonic()
            if left <= 0:
                # Issue 58 row 6: the deadline is checked before reading, so on a loaded host this
                # thread may get here late while the replies already wait in the receive queue
                # (they came in time). Take every one of them before declaring "no reply".
                for ch in channels.values():
                    while any(self._channel_of[i] is ch for i in pending):
                        msg = self._recv(ch, 0, pending, reasons)
                        if msg is None:
                            break
                        self._take(ch, msg, pending, got, reasons, parse)
                return
            progressed = False
            for ch in channels.values():
                msg = self._recv(ch, left if len(channels) == 1 else 0, pending, reasons)
                if msg is None:
                    continue
                progressed = True
                self._take(ch, msg, pending, got, reasons, parse)
            if not progressed and len(channels) > 1:
                time.sleep(0.0002)

    def _recv(self, ch: _Channel, timeout: float, pending: dict, reasons: dict) -> can.Message | None:
        """One frame from `ch`, or None; an adapter failure fails that channel's pending joints."""
        try:
            return ch.bus.recv(timeout=timeout)
        except (can.CanError, OSError, ValueError) as e:   # the adapter went away mid-read
            for idx in [i for i in pending if self._channel_of[i] is ch]:
                reasons[idx] = f"CAN channel {ch.name!r} failed: {type(e).__name__}: {e}"
                del pending[idx]
            return None

    def _take(self, ch: _Channel, msg: can.Message, pending: dict, got: dict, reasons: dict, parse: Parse) -> None:
        idx = ch.by_feedback_id.get(msg.arbitration_id)
        if idx is None or idx not in pending:
            return
        try:
            got[idx] = parse(idx, bytes(msg.data))
        except _WrongReply as e:
            reasons[idx] = str(e)
            return
        except ValueError as e:
            reasons[idx] = f"corrupt reply ({e})"
            return
        del pending[idx]

    # --- torque ----------------------------------------------------------------------
    def enable(self) -> None:
        frames = {i: (self.can_ids[i], dmp.CMD_ENABLE) for i in range(self.n)}
        got, reasons, _ = self._transact(frames, None, rounds=self.config.connect_retries)
        self.torque_enabled = True     # some may be on now: a failure below must still end in torque off
        lost = [i for i, fb in got.items() if fb.state == dmp.STATE_COMM_LOSS]
        if lost:                       # i2rt's motor_on: clear the error, then enable again
            self._clear_comm_loss(lost, "torque enable")
            again, why, _ = self._transact({i: frames[i] for i in lost}, None, rounds=self.config.connect_retries)
            for i in lost:
                if i in again:
                    got[i] = again[i]
                else:
                    del got[i]
                    reasons[i] = why[i]
        for idx, fb in got.items():
            if fb.error:
                reasons[idx] = f"motor reports {fb.error} (error code {fb.state:#x})"
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
                errors[idx] = f"hardware error: {fb.error} (error code {fb.state:#x})"
        return self._reading_from_motor(pos, vel, eff, ok, hw, errors, retries, torque_off=off)

    def read_state(self, deadline: float | None = None, mask: np.ndarray | None = None) -> BusReading:
        if not self.connected:
            raise BusError("read_state called on a bus that is not connected")
        mask = np.ones(self.n, bool) if mask is None else np.asarray(mask, bool)
        got, reasons, retries = self._transact(self._state_frames(np.flatnonzero(mask).tolist()),
                                               self._deadline(deadline))
        return self._reading(got, reasons, retries)

    def _write(self, motor_rad: np.ndarray, mask: np.ndarray, deadline: float,
               torque_ff: np.ndarray | None = None) -> WriteResult:
        written = np.full(self.n, np.nan)
        frames = {}
        for idx in np.flatnonzero(mask):
            lim = self.limits[idx]
            t_ff = 0.0 if torque_ff is None else float(torque_ff[idx])
            cmd = dmp.MitCommand(float(motor_rad[idx]), 0.0, float(self.kp[idx]), float(self.kd[idx]), t_ff)
            data = dmp.pack_mit(cmd, lim)
            frames[int(idx)] = (self.can_ids[idx], data)
            self.last_mit[idx] = data                   # mit_reply reads re-send exactly this
            written[idx] = dmp.quantize_position(float(motor_rad[idx]), lim)
        got, reasons, retries = self._transact(frames, deadline)
        errors = {i: f"command not acknowledged: {r}" for i, r in reasons.items()}
        hw = np.zeros(self.n, bool)
        for idx, fb in got.items():
            if fb.error:
                errors[idx] = f"hardware error: {fb.error} (error code {fb.state:#x})"
                hw[idx] = True
        return WriteResult(written, errors, retries, hw)
