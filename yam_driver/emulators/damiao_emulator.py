"""Damiao DM43xx / DM3507 motors in MIT mode on a python-can virtual channel.

The emulator thread owns its own `can.Bus(interface="virtual", channel=...)` and answers
enable / disable / clear-error / save-zero frames, status requests (0x7FF, 0xCC), register
reads and writes (0x7FF, 0x33 / 0x55 / 0xAA) and MIT commands with frames on each motor's
master id. Each motor scales MIT commands and feedback with its own PMAX/VMAX/TMAX registers
(defaults: the table in `damiao_protocol.MOTOR_LIMITS`; a test can give one motor other
values, as a motor configured by another tool would hold). When enabled with kp > 0, the
position follows the commanded position with a first-order lag (`tau_s`). Faults come from a
`FaultInjector` keyed by CAN id; a "corrupt" reply is sent as a truncated 4-byte frame (a real
controller would drop a bad-CRC frame; a malformed one is the visible equivalent). A hardware
error disables the motor and reports its code in every feedback until a clear-error frame
arrives, after which the motor is disabled with error 0 (as i2rt's `motor_on` expects: it
re-enables after FB). With a command timeout (`can_timeout_s`, or the TIMEOUT register), an
enabled motor left without commands disables itself and reports communication loss (0xD), as
the real motor's CAN-timeout register does.

Load model (`load_fn`): an external torque per motor (gravity). An enabled motor under MIT
control then settles where kp*(target - q) + t_ff + load(q) = 0, approached with the same lag;
without `load_fn` the feed-forward t_ff is reported but moves nothing (the emulated arm then
behaves as one whose gravity the feed-forward exactly cancels). A disabled motor does not move
under load (the emulator has no free-fall model), nor does an enabled one with kp = 0.
"""
from __future__ import annotations

import math
import os
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

import can

from .. import damiao_protocol as dmp
from .faults import FaultInjector

LOAD_PERIOD_S = 0.002  # s: the load model is re-evaluated at most this often (a motor moves < 1 mrad meanwhile)
_ERROR_CODES = {"voltage": 0x8, "overcurrent": 0xA, "overheat": 0xC, "overload": 0xE}

LoadFn = Callable[[dict[int, float]], dict[int, float]]


@dataclass
class EmulatedMotor:
    can_id: int  # command id
    master_id: int  # feedback id
    motor: str = "DM4340"  # DM4340 | DM4310 | DM3507: default registers (MIT ranges)
    position: float = 0.0  # rad
    velocity: float = 0.0  # rad/s
    target: float = 0.0  # rad
    kp: float = 0.0
    kd: float = 0.0
    t_ff: float = 0.0  # Nm: feed-forward torque of the last MIT command taken while enabled
    enabled: bool = False
    error: int = 0  # 0 or a Damiao error code
    last: float = 0.0  # monotonic time of the last update
    last_command: float = 0.0  # monotonic time of the last frame on this motor's CAN id
    stuck: bool = False  # reports enabled but does not move (a slipped coupling, a torque loss it does not report)
    registers: dict[int, float | int] = field(default_factory=dict)  # register number -> value; the
    #   emulator fills PMAX/VMAX/TMAX, MST_ID, ESC_ID, TIMEOUT where not given
    last_mit: dmp.MitCommand | None = None  # the last MIT command received, in any state (for tests)

    def limits(self) -> dmp.MotorLimits:
        """The MIT ranges this motor scales with: its own PMAX/VMAX/TMAX registers."""
        r = self.registers
        return dmp.MotorLimits(float(r[dmp.REG_PMAX]), float(r[dmp.REG_VMAX]), float(r[dmp.REG_TMAX]))


class DamiaoEmulator:
    """Motors on one virtual CAN channel; use as a context manager or start()/stop()."""

    def __init__(self, channel: str, motors: list[EmulatedMotor], tau_s: float = 0.02,
                 can_timeout_s: float | None = None, answer_status_request: bool = True,
                 answer_registers: bool = True, load_fn: LoadFn | None = None, bus: can.BusABC | None = None,
                 cpus: tuple[int, ...] = ()):
        """`can_timeout_s`: like the motor's CAN-timeout register (i2rt sets 400 ms), an enabled
        motor that gets no frame on its CAN id for this long disables itself and reports
        communication loss (0xD); it sets each motor's TIMEOUT register (50 us steps), which
        the emulator reads, so a register write changes it. Frames to 0x7FF (status requests,
        registers) do not count (assumption).
        `answer_status_request`: False emulates firmware that ignores the 0xCC status request.
        `answer_registers`: False emulates firmware that does not answer register frames.
        `load_fn(positions) -> torques`: positions per CAN id (rad, motor angle), returns the
        external torque per CAN id in motor Nm (positive pushes the angle positive; a missing id
        is 0). Called with the emulator's lock held: it must not call back into the emulator.
        `bus`: the channel's end to answer on (default: python-can's in-process "virtual" channel
        `channel`; `yam_driver.can_socket.ListeningCanBus` for an emulator in a process of its own).
        `cpus`: one answering thread pinned to each of these CPUs (a bus whose `recv` several threads
        may call: ListeningCanBus), so a frame is answered while one CPU is frozen (a virtual
        machine's host stops a vCPU for 100 ms at a time: docs/deployment.md); () = one thread."""
        if not motors or len({m.can_id for m in motors}) != len(motors):
            raise ValueError(f"motor CAN ids must be unique and non-empty, got {[m.can_id for m in motors]}")
        if tau_s <= 0:
            raise ValueError(f"tau_s must be > 0, got {tau_s!r}")
        if can_timeout_s is not None and can_timeout_s <= 0:
            raise ValueError(f"can_timeout_s must be > 0 or None, got {can_timeout_s!r}")
        for m in motors:
            if m.motor not in dmp.MOTOR_LIMITS:
                raise ValueError(f"motor type must be one of {sorted(dmp.MOTOR_LIMITS)}, got {m.motor!r}")
            m.last = m.last_command = time.monotonic()
            lim = dmp.MOTOR_LIMITS[m.motor]
            defaults = {dmp.REG_PMAX: lim.p_max, dmp.REG_VMAX: lim.v_max, dmp.REG_TMAX: lim.t_max,
                        dmp.REG_MST_ID: m.master_id, dmp.REG_ESC_ID: m.can_id,
                        dmp.REG_TIMEOUT: 0 if can_timeout_s is None else round(can_timeout_s / dmp.TIMEOUT_STEP_S)}
            for reg, value in defaults.items():
                m.registers.setdefault(reg, value)
        self.can_timeout_s = can_timeout_s
        self.answer_status_request = answer_status_request
        self.answer_registers = answer_registers
        self.load_fn = load_fn
        self._loads: dict[int, float] | None = None     # the last load_fn answer, and when (see _load)
        self._loads_t = 0.0
        self.channel = channel
        self.motors = {m.can_id: m for m in motors}
        self.tau_s = tau_s
        self.faults = FaultInjector()
        self.frames_seen = 0
        self.seen: Counter[str] = Counter()  # frames received by kind: status, register, mit, enable, ...
        self.replies_sent = 0  # frames put on the wire (after faults)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._bus = bus if bus is not None else can.Bus(interface="virtual", channel=channel)
        self._threads = [threading.Thread(target=self._run, args=(cpu,), name=f"dm-emulator-{channel}-{cpu}",
                                          daemon=True) for cpu in (cpus or (None,))]

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

    def set_register(self, can_id: int, reg: int, value: float | int) -> None:
        """Give motor `can_id` register `reg` the value `value` (as another tool would have)."""
        with self._lock:
            self.motors[can_id].registers[reg] = value

    # --- lifecycle -------------------------------------------------------------------
    def start(self) -> "DamiaoEmulator":
        for t in self._threads:
            t.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            if t.is_alive():
                t.join(timeout=2.0)
        self._bus.shutdown()

    def __enter__(self) -> "DamiaoEmulator":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # --- physics ---------------------------------------------------------------------
    @staticmethod
    def _timeout_s(m: EmulatedMotor) -> float | None:
        steps = int(m.registers.get(dmp.REG_TIMEOUT, 0))
        return steps * dmp.TIMEOUT_STEP_S if steps > 0 else None

    def _load(self, m: EmulatedMotor) -> float:
        """The load on `m`, from `load_fn` at most once per LOAD_PERIOD_S for the whole channel (one
        call costs tens of microseconds; every frame of a tick asked for it, which delayed replies
        past the driver's reply timeout on a loaded machine)."""
        if self.load_fn is None:
            return 0.0
        now = time.monotonic()
        if self._loads is None or now - self._loads_t >= LOAD_PERIOD_S:
            self._loads = self.load_fn({i: mm.position for i, mm in self.motors.items()})
            self._loads_t = now
        return float(self._loads.get(m.can_id, 0.0))

    def _update(self, m: EmulatedMotor, now: float) -> None:
        timeout = self._timeout_s(m)
        if m.enabled and timeout is not None and now - m.last_command > timeout:
            m.enabled, m.error = False, dmp.STATE_COMM_LOSS
        dt = max(0.0, now - m.last)
        m.last = now
        if m.enabled and m.kp > 0 and dt > 0 and not m.stuck:
            old = m.position
            goal = m.target
            if self.load_fn is not None:   # kp*(goal - q) balances t_ff + load at q = goal
                goal = m.target + (m.t_ff + self._load(m)) / m.kp
            m.position = goal + (old - goal) * math.exp(-dt / self.tau_s)
            m.velocity = (m.position - old) / dt
        elif dt > 0:
            m.velocity = 0.0

    def _feedback(self, m: EmulatedMotor) -> bytes:
        state = m.error or (dmp.STATE_ENABLED if m.enabled else dmp.STATE_DISABLED)
        torque = m.kp * (m.target - m.position) - m.kd * m.velocity + m.t_ff if m.enabled else 0.0
        position = m.position + self.faults.next_glitch(m.can_id)
        fb = dmp.Feedback(m.can_id & 0xF, state, position, m.velocity, torque, 35.0, 30.0)
        return dmp.pack_feedback(fb, m.limits())

    # --- wire ------------------------------------------------------------------------
    def _run(self, cpu: int | None = None) -> None:
        if cpu is not None:
            os.sched_setaffinity(0, {cpu})          # this thread (Linux)
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
                return self._handle_0x7ff(data)
            m = self.motors.get(arb)
            if m is None or len(data) != 8 or self.faults.is_cut(arb):   # a cut wire: the motor never sees it
                return None
            now = time.monotonic()
            self._update(m, now)
            m.last_command = now
            if data == dmp.CMD_ENABLE:
                self.seen["enable"] += 1
                m.enabled = m.error == 0
                m.target = m.position  # a freshly enabled motor holds where it is
            elif data == dmp.CMD_DISABLE:
                self.seen["disable"] += 1
                m.enabled = False
            elif data == dmp.CMD_CLEAR_ERROR:
                self.seen["clear"] += 1
                if m.error:           # the error went with the motor's torque: it stays disabled
                    m.error, m.enabled = 0, False
                self.faults.set_hardware_error(m.can_id, None)
            elif data == dmp.CMD_SAVE_ZERO:
                self.seen["zero"] += 1
                m.position, m.target = 0.0, 0.0
            else:
                self.seen["mit"] += 1
                cmd = dmp.unpack_mit(data, m.limits())
                m.last_mit = cmd
                if m.enabled:
                    m.target, m.kp, m.kd, m.t_ff = cmd.position, cmd.kp, cmd.kd, cmd.torque
            return m, self._feedback(m)

    def _handle_0x7ff(self, data: bytes) -> tuple[EmulatedMotor, bytes] | None:
        if len(data) < 3:
            return None
        m = self.motors.get(data[0] | data[1] << 8)
        if m is None or self.faults.is_cut(m.can_id):
            return None
        if data[2] == dmp.STATUS_REQUEST_CODE:
            self.seen["status"] += 1
            if not self.answer_status_request:
                return None
            self._update(m, time.monotonic())
            return m, self._feedback(m)
        if data[2] in (dmp.REGISTER_READ, dmp.REGISTER_WRITE, dmp.REGISTER_SAVE) and len(data) == 8:
            self.seen["register"] += 1
            reg = data[3]
            if not self.answer_registers or reg not in m.registers:   # unknown register: no answer (assumption)
                return None
            if data[2] == dmp.REGISTER_WRITE:
                m.registers[reg] = dmp.decode_register(reg, data[4:8])
            return m, dmp.register_request(m.can_id, data[2], reg, dmp.encode_register(reg, m.registers[reg]))
        return None

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
            self.replies_sent += 1
        except can.CanError:
            pass
