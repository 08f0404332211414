"""A chain of Dynamixel Protocol 2.0 servos on the master end of a pseudo-terminal.

The real `dynamixel_sdk` opens the slave end (`port_name`) like a USB-serial adapter. The
emulator thread parses instruction packets (CRC-16, byte stuffing) and answers PING, READ,
WRITE, SYNC_READ, SYNC_WRITE and REBOOT from a per-servo control table. With torque on, the
present position follows the goal position with a first-order lag (time constant `tau_s`).
Faults come from a `FaultInjector` keyed by servo id. A hardware error sets the alert bit
in every status packet and the Hardware Error Status register, and turns torque off (as the
real servos do); only REBOOT clears it.
"""
from __future__ import annotations

import math
import os
import select
import threading
import time
import tty

from .. import dxl_protocol as dxl
from .faults import FaultInjector

_HW_ERROR_BITS = {"voltage": 1 << 0, "overheat": 1 << 2, "overcurrent": 1 << 4, "overload": 1 << 5}
_MODEL_XM430 = dxl.MODEL_NUMBERS["XM430-W350"]


class _Servo:
    def __init__(self, dxl_id: int, model: int, ticks: int, tau_s: float):
        self.table = bytearray(256)
        self.table[0:2] = model.to_bytes(2, "little")
        self.table[dxl.ADDR_FIRMWARE] = 45
        self.table[dxl.ADDR_ID] = dxl_id
        self.table[dxl.ADDR_OPERATING_MODE] = 3
        self.position = float(ticks)  # continuous present position, ticks
        self.velocity = 0.0  # ticks/s
        self.tau_s = tau_s
        self.stuck = False  # torque on, but the servo does not move (see EmulatedRig.stick)
        self.last = time.monotonic()
        self._put(dxl.ADDR_GOAL_POSITION, ticks, 4)
        self._sync_outputs()

    def _put(self, addr: int, value: int, size: int) -> None:
        self.table[addr:addr + size] = int(value).to_bytes(size, "little", signed=True)

    def get(self, addr: int, size: int) -> int:
        return int.from_bytes(self.table[addr:addr + size], "little", signed=True)

    @property
    def torque(self) -> bool:
        return self.table[dxl.ADDR_TORQUE_ENABLE] == 1

    def update(self, now: float) -> None:
        dt = max(0.0, now - self.last)
        self.last = now
        if self.torque and dt > 0 and not self.stuck:
            goal = self.get(dxl.ADDR_GOAL_POSITION, 4)
            old = self.position
            self.position = goal + (old - goal) * math.exp(-dt / self.tau_s)
            self.velocity = (self.position - old) / dt
        elif dt > 0:
            self.velocity = 0.0
        self._sync_outputs()

    def _sync_outputs(self) -> None:
        self._put(dxl.ADDR_PRESENT_POSITION, round(self.position), 4)
        rpm = self.velocity / dxl.TICKS_PER_REV * 60.0
        self._put(dxl.ADDR_PRESENT_VELOCITY, round(rpm / 0.229), 4)
        self._put(dxl.ADDR_PRESENT_CURRENT, 0, 2)

    def write(self, addr: int, data: bytes) -> int:
        """Apply a WRITE; returns a status error code (0 = ok)."""
        if addr + len(data) > len(self.table) or not data:
            return dxl.ERR_DATA_LENGTH
        if addr == dxl.ADDR_TORQUE_ENABLE and self.table[dxl.ADDR_HARDWARE_ERROR] and data[0]:
            return dxl.ERR_RESULT_FAIL  # cannot torque on while a hardware error is latched
        if addr < dxl.ADDR_TORQUE_ENABLE and addr != 0 and self.torque:
            return dxl.ERR_ACCESS  # EEPROM area is locked while torque is on
        self.table[addr:addr + len(data)] = data
        return 0


class DynamixelEmulator:
    """Servos `ids` on one pty; use as a context manager or call start()/stop()."""

    def __init__(self, ids: list[int], tau_s: float = 0.02, initial_ticks: dict[int, int] | None = None,
                 model_number: int = _MODEL_XM430):
        if not ids or len(set(ids)) != len(ids):
            raise ValueError(f"servo ids must be unique and non-empty, got {ids!r}")
        if tau_s <= 0:
            raise ValueError(f"tau_s must be > 0, got {tau_s!r}")
        initial_ticks = initial_ticks or {}
        self.servos = {i: _Servo(i, model_number, initial_ticks.get(i, dxl.CENTER_TICKS), tau_s) for i in ids}
        self.faults = FaultInjector()
        self.packets_seen = 0
        self.crc_errors_seen = 0
        self._master, self._slave = os.openpty()
        tty.setraw(self._slave)
        self.port_name = os.ttyname(self._slave)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"dxl-emulator{self.port_name}", daemon=True)

    # --- test helpers ----------------------------------------------------------------
    def present_ticks(self, dxl_id: int) -> int:
        with self._lock:
            s = self.servos[dxl_id]
            s.update(time.monotonic())
            return s.get(dxl.ADDR_PRESENT_POSITION, 4)

    def goal_ticks(self, dxl_id: int) -> int:
        with self._lock:
            return self.servos[dxl_id].get(dxl.ADDR_GOAL_POSITION, 4)

    def torque_enabled(self, dxl_id: int) -> bool:
        with self._lock:
            return self.servos[dxl_id].torque

    def set_hardware_error(self, dxl_id: int, kind: str | None) -> None:
        """Raise (kind) or clear (None) a hardware error on one servo."""
        self.faults.set_hardware_error(dxl_id, kind)
        with self._lock:
            s = self.servos[dxl_id]
            s.update(time.monotonic())
            s.table[dxl.ADDR_HARDWARE_ERROR] = _HW_ERROR_BITS[kind] if kind else 0
            if kind:
                s.table[dxl.ADDR_TORQUE_ENABLE] = 0

    # --- lifecycle -------------------------------------------------------------------
    def start(self) -> "DynamixelEmulator":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2.0)
        for fd in (self._master, self._slave):
            try:
                os.close(fd)
            except OSError:
                pass

    def __enter__(self) -> "DynamixelEmulator":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # --- wire ------------------------------------------------------------------------
    def _run(self) -> None:
        buffer = bytearray()
        while not self._stop.is_set():
            ready, _, _ = select.select([self._master], [], [], 0.05)
            if not ready:
                continue
            try:
                chunk = os.read(self._master, 4096)
            except OSError:
                return
            buffer.extend(chunk)
            for packet in dxl.parse_stream(buffer):
                self.packets_seen += 1
                for reply_id, reply in self._handle(packet):
                    self._send(reply_id, reply)

    def _send(self, dxl_id: int, reply: bytes) -> None:
        action, delay = self.faults.next_reply(dxl_id)
        if action == "drop":
            return
        if action == "corrupt":
            reply = reply[:-2] + bytes([reply[-2] ^ 0xFF, reply[-1]])
        if delay:
            time.sleep(delay)
        try:
            os.write(self._master, reply)
        except OSError:
            pass

    def _read(self, dxl_id: int, addr: int, size: int) -> bytes:
        """Control-table bytes for a READ / SYNC_READ, with a pending position glitch applied."""
        data = bytearray(self.servos[dxl_id].table[addr:addr + size])
        lo, hi = dxl.ADDR_PRESENT_POSITION, dxl.ADDR_PRESENT_POSITION + 4
        if addr <= lo and hi <= addr + size:
            offset = self.faults.next_glitch(dxl_id)
            if offset:
                from ..dynamixel_bus import RAD_PER_TICK

                ticks = int.from_bytes(data[lo - addr:hi - addr], "little", signed=True) + round(offset / RAD_PER_TICK)
                data[lo - addr:hi - addr] = ticks.to_bytes(4, "little", signed=True)
        return bytes(data)

    def _status(self, servo: _Servo, dxl_id: int, error: int, params: bytes = b"") -> bytes:
        if servo.table[dxl.ADDR_HARDWARE_ERROR]:
            error |= dxl.ERR_ALERT
        return dxl.build_status(dxl_id, error, params)

    def _handle(self, p: dxl.Packet) -> list[tuple[int, bytes]]:
        """Replies (servo id, status packet) to one instruction packet, in bus order."""
        now = time.monotonic()
        with self._lock:
            for s in self.servos.values():
                s.update(now)
            if not p.crc_ok:
                self.crc_errors_seen += 1
                s = self.servos.get(p.dxl_id)
                return [(p.dxl_id, self._status(s, p.dxl_id, dxl.ERR_CRC))] if s else []
            inst, params = p.instruction, p.params
            if inst == dxl.INST_PING:
                ids = list(self.servos) if p.dxl_id == dxl.BROADCAST_ID else [p.dxl_id]
                return [(i, self._status(self.servos[i], i, 0, self.servos[i].table[0:2] +
                                         bytes([self.servos[i].table[dxl.ADDR_FIRMWARE]])))
                        for i in ids if i in self.servos]
            if inst == dxl.INST_SYNC_WRITE and len(params) >= 4:
                addr, size = params[0] | params[1] << 8, params[2] | params[3] << 8
                body = params[4:]
                for k in range(0, len(body) - size + 1, size + 1):
                    s = self.servos.get(body[k])
                    if s is not None:
                        s.write(addr, bytes(body[k + 1:k + 1 + size]))
                return []
            if inst == dxl.INST_SYNC_READ and len(params) >= 4:
                addr, size = params[0] | params[1] << 8, params[2] | params[3] << 8
                return [(i, self._status(self.servos[i], i, 0, self._read(i, addr, size)))
                        for i in params[4:] if i in self.servos]
            s = self.servos.get(p.dxl_id)
            if s is None:
                return []  # not ours (or broadcast of something that has no reply)
            if inst == dxl.INST_READ and len(params) == 4:
                addr, size = params[0] | params[1] << 8, params[2] | params[3] << 8
                if addr + size > len(s.table):
                    return [(p.dxl_id, self._status(s, p.dxl_id, dxl.ERR_DATA_LENGTH))]
                return [(p.dxl_id, self._status(s, p.dxl_id, 0, self._read(p.dxl_id, addr, size)))]
            if inst == dxl.INST_WRITE and len(params) >= 3:
                err = s.write(params[0] | params[1] << 8, bytes(params[2:]))
                return [(p.dxl_id, self._status(s, p.dxl_id, err))]
            if inst == dxl.INST_REBOOT:
                s.table[dxl.ADDR_HARDWARE_ERROR] = 0
                s.table[dxl.ADDR_TORQUE_ENABLE] = 0
                self.faults.set_hardware_error(p.dxl_id, None)
                return [(p.dxl_id, self._status(s, p.dxl_id, 0))]
            return [(p.dxl_id, self._status(s, p.dxl_id, dxl.ERR_INSTRUCTION))]
