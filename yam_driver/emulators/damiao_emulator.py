"""Damiao DM43xx motors in MIT mode on a python-can virtual channel.

The emulator thread owns its own `can.Bus(interface="virtual", channel=...)` and answers
enable / disable / clear-error / save-zero frames, status requests (0x7FF) and MIT commands
with feedback frames on each motor's master id. When enabled with kp > 0, the position
follows the commanded position with a first-order lag (`tau_s`). Faults come from a
`FaultInjector` keyed by CAN id; a "corrupt" reply is sent as a truncated 4-byte frame (a
real controller would drop a bad-CRC frame; a malformed one is the visible equivalent). A
hardware error disables the motor and reports its code in every feedback until a
clear-error frame arrives. With `can_timeout_s`, a motor left without commands disables
itself and reports communication loss, as the real motor's CAN-timeout register does.
"""
from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass

import can

from .. import damiao_protocol as dmp
from .faults import FaultInjector

_ERROR_CODES = {"voltage": 0x8, "overcurrent": 0xA, "overheat": 0xC, "overload": 0xE}


@dataclass
class EmulatedMotor:
    can_id: int  # command id
    master_id: int  # feedback id
    motor: str = "DM4340"  # DM4340 | DM4310: MIT ranges
    position: float = 0.0  # rad
    velocity: float = 0.0  # rad/s
    target: float = 0.0  # rad
    kp: float = 0.0
    kd: float = 0.0
    enabled: bool = False
    error: int = 0  # 0 or a Damiao error code
    last: float = 0.0  # monotonic time of the last update
    last_command: float = 0.0  # monotonic time of the last frame on this motor's CAN id
    stuck: bool = False  # reports enabled but does not move (a slipped coupling, a torque loss it does not report)


class DamiaoEmulator:
    """Motors on one virtual CAN channel; use as a context manager or start()/stop()."""

    def __init__(self, channel: str, motors: list[EmulatedMotor], tau_s: float = 0.02,
                 can_timeout_s: float | None = None):
        """`can_timeout_s`: like the motor's CAN-timeout register (i2rt sets 400 ms), an enabled
        motor that gets no frame on its CAN id for this long disables itself and reports
        communication loss (0xD). Status requests to 0x7FF do not count (assumption)."""
        if not motors or len({m.can_id for m in motors}) != len(motors):
            raise ValueError(f"motor CAN ids must be unique and non-empty, got {[m.can_id for m in motors]}")
        if tau_s <= 0:
            raise ValueError(f"tau_s must be > 0, got {tau_s!r}")
        for m in motors:
            if m.motor not in dmp.MOTOR_LIMITS:
                raise ValueError(f"motor type must be one of {sorted(dmp.MOTOR_LIMITS)}, got {m.motor!r}")
            m.last = m.last_command = time.monotonic()
        if can_timeout_s is not None and can_timeout_s <= 0:
            raise ValueError(f"can_timeout_s must be > 0 or None, got {can_timeout_s!r}")
        self.can_timeout_s = can_timeout_s
        self.channel = channel
        self.motors = {m.can_id: m for m in motors}
        self.tau_s = tau_s
        self.faults = FaultInjector()
        self.frames_seen = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._bus = can.Bus(interface="virtual", channel=channel)
        self._thread = threading.Thread(target=self._run, name=f"dm-emulator-{channel}", daemon=True)

    # --- test helpers ----------------------------------------------------------------
    def motor(self, can_id: int) -> EmulatedMotor:
        with self._lock:
            m = self.motors[can_id]
            self._update(m, time.monotonic())
            return m

    def set_hardware_error(self, can_id: int, kind: str | None) -> None:
        """Raise (kind) or clear (None) a hardware error; an error disables the motor."""
        self.faults.set_hardware_error(can_id, kind)
        with self._lock:
            m = self.motors[can_id]
            self._update(m, time.monotonic())
            m.error = _ERROR_CODES[kind] if kind else 0
            if kind:
                m.enabled = False

    # --- lifecycle -------------------------------------------------------------------
    def start(self) -> "DamiaoEmulator":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2.0)
        self._bus.shutdown()

    def __enter__(self) -> "DamiaoEmulator":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # --- physics ---------------------------------------------------------------------
    def _update(self, m: EmulatedMotor, now: float) -> None:
        if m.enabled and self.can_timeout_s is not None and now - m.last_command > self.can_timeout_s:
            m.enabled, m.error = False, 0xD  # communication loss
        dt = max(0.0, now - m.last)
        m.last = now
        if m.enabled and m.kp > 0 and dt > 0 and not m.stuck:
            old = m.position
            m.position = m.target + (old - m.target) * math.exp(-dt / self.tau_s)
            m.velocity = (m.position - old) / dt
        elif dt > 0:
            m.velocity = 0.0

    def _feedback(self, m: EmulatedMotor) -> bytes:
        state = m.error or (dmp.STATE_ENABLED if m.enabled else dmp.STATE_DISABLED)
        torque = m.kp * (m.target - m.position) - m.kd * m.velocity if m.enabled else 0.0
        position = m.position + self.faults.next_glitch(m.can_id)
        fb = dmp.Feedback(m.can_id & 0xF, state, position, m.velocity, torque, 35.0, 30.0)
        return dmp.pack_feedback(fb, dmp.MOTOR_LIMITS[m.motor])

    # --- wire ------------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.is_set():
            msg = self._bus.recv(timeout=0.05)
            if msg is None:
                continue
            self.frames_seen += 1
            reply = self._handle(msg.arbitration_id, bytes(msg.data))
            if reply is not None:
                self._send(*reply)

    def _handle(self, arb: int, data: bytes) -> tuple[EmulatedMotor, bytes] | None:
        with self._lock:
            if arb == dmp.STATUS_REQUEST_ID:
                if len(data) < 3 or data[2] != dmp.STATUS_REQUEST_CODE:
                    return None
                m = self.motors.get(data[0] | data[1] << 8)
                if m is None:
                    return None
                self._update(m, time.monotonic())
                return m, self._feedback(m)
            m = self.motors.get(arb)
            if m is None or len(data) != 8:
                return None
            now = time.monotonic()
            self._update(m, now)
            m.last_command = now
            if data == dmp.CMD_ENABLE:
                m.enabled = m.error == 0
                m.target = m.position  # a freshly enabled motor holds where it is
            elif data == dmp.CMD_DISABLE:
                m.enabled = False
            elif data == dmp.CMD_CLEAR_ERROR:
                m.error = 0
                self.faults.set_hardware_error(m.can_id, None)
            elif data == dmp.CMD_SAVE_ZERO:
                m.position, m.target = 0.0, 0.0
            else:
                cmd = dmp.unpack_mit(data, dmp.MOTOR_LIMITS[m.motor])
                if m.enabled:
                    m.target, m.kp, m.kd = cmd.position, cmd.kp, cmd.kd
            return m, self._feedback(m)

    def _send(self, m: EmulatedMotor, data: bytes) -> None:
        action, delay = self.faults.next_reply(m.can_id)
        if action == "drop":
            return
        if action == "corrupt":
            data = data[:4]
        if delay:
            time.sleep(delay)
        try:
            self._bus.send(can.Message(arbitration_id=m.master_id, data=data, is_extended_id=False))
        except can.CanError:
            pass
