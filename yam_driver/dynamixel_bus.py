"""Dynamixel Protocol 2.0 bus on the real `dynamixel_sdk`.

Per port (one per arm, or one shared): GroupSyncWrite of Goal Position (address 116, 4
bytes), GroupSyncRead of the 10-byte block Present Current/Velocity/Position (126..135, so
Present Position is address 132, 4 bytes), Torque Enable (64) written per servo with a
status reply. Missed sync-read replies are retried per servo with single READs while the
tick budget lasts. A status packet with the alert bit set makes the bus read Hardware Error
Status (70) to name the error. A sync write has no status reply, so "written" means "sent";
a servo that missed it shows up in the next reads (and, if it stays silent, as a fault).

The SDK's stock PortHandler needs two adjustments, both made in `TimedPortHandler`:
- Reply timeout. The SDK waits `2 * LATENCY_TIMER + 2` ms (34 ms) on top of the transfer
  time, sized for an FTDI adapter at its default 16 ms latency timer. On a pseudo-terminal
  (or an adapter set to 1 ms latency) a reply arrives in well under a millisecond, and a
  34 ms wait for a missing reply would eat the whole 33 ms tick. The timeout here is
  `reply_timeout_ms` from the config plus the transfer time at the configured baud rate.
- Waiting. The SDK polls the port in a busy loop (the serial port is opened with
  timeout=0). That spins a core and, in one process, starves the emulator thread of the
  GIL. Here a read that finds nothing waiting blocks in select() for up to 0.5 ms.
The baud rate must be one the SDK lists (1 Mbit/s default); a pty accepts any listed rate.
Its clock is also switched from time.time() to time.monotonic().
"""
from __future__ import annotations

import math
import select
import termios
import time

import dynamixel_sdk as sdk
import numpy as np

from . import dxl_protocol as dxl
from .bus import BusError, BusMismatchError, BusReading, JointBus, WriteResult
from .config import DriverConfig

RAD_PER_TICK = 2.0 * math.pi / dxl.TICKS_PER_REV
MIN_ROUND_MS = 1.0  # a retry round needs at least this much of the budget left


CONNECT_REPLY_TIMEOUT_MS = 100.0  # PING window at connect (per try); ticks use reply_timeout_ms
# what a serial port that went away raises from inside the SDK (pyserial's SerialException is an
# OSError; a flush on a dead tty is a termios.error): caught per port, a fault of that arm's joints
PORT_ERRORS = (OSError, ValueError, TypeError, termios.error)


class TimedPortHandler(sdk.PortHandler):
    """PortHandler with a configurable reply timeout, a monotonic clock and no busy wait."""

    def __init__(self, port_name: str, reply_timeout_ms: float, poll_s: float = 0.0005):
        super().__init__(port_name)
        self.reply_timeout_ms = reply_timeout_ms
        self.poll_s = poll_s

    def setPacketTimeout(self, packet_length):  # noqa: N802 (SDK name)
        self.packet_start_time = self.getCurrentTime()
        self.packet_timeout = self.tx_time_per_byte * packet_length + self.reply_timeout_ms

    def getCurrentTime(self):  # noqa: N802
        return time.monotonic() * 1000.0

    def readPort(self, length):  # noqa: N802
        if self.ser.in_waiting == 0:
            select.select([self.ser.fileno()], [], [], self.poll_s)
        return self.ser.read(length)


class StatusSyncRead(sdk.GroupSyncRead):
    """GroupSyncRead that keeps each servo's status error byte and which ids answered.

    The stock class stops at the first missing reply and discards the error bytes; here
    `status[id] = (comm_result, error_byte)` records every id it got to.
    """

    def rxPacket(self):  # noqa: N802
        self.last_result = False
        self.status: dict[int, tuple[int, int]] = {}
        result = sdk.COMM_RX_FAIL
        for dxl_id in self.data_dict:
            data, result, error = self.ph.readRx(self.port, dxl_id, self.data_length)
            self.status[dxl_id] = (result, error)
            if result != sdk.COMM_SUCCESS:
                return result
            self.data_dict[dxl_id] = data
        self.last_result = True
        return result


def rad_to_ticks(rad: np.ndarray) -> np.ndarray:
    ticks = np.rint(rad / RAD_PER_TICK) + dxl.CENTER_TICKS
    return np.clip(ticks, 0, dxl.TICKS_PER_REV - 1).astype(np.int64)


def ticks_to_rad(ticks: np.ndarray) -> np.ndarray:
    return (np.asarray(ticks, np.float64) - dxl.CENTER_TICKS) * RAD_PER_TICK


def _signed(value: int, bits: int) -> int:
    return value - (1 << bits) if value & (1 << (bits - 1)) else value


class _Port:
    """One serial port and the joints on it."""

    def __init__(self, name: str, cfg: DriverConfig):
        self.name = name
        self.handler = TimedPortHandler(name, cfg.reply_timeout_ms)
        self.packet = sdk.PacketHandler(2.0)
        self.indices: list[int] = []  # joint indices (0..13)
        self.ids: list[int] = []  # servo ids, same order
        self.writer = sdk.GroupSyncWrite(self.handler, self.packet, dxl.ADDR_GOAL_POSITION, 4)
        self.reader = StatusSyncRead(self.handler, self.packet, dxl.ADDR_PRESENT_CURRENT, dxl.STATE_BLOCK_LEN)
        self.torque_reader = StatusSyncRead(self.handler, self.packet, dxl.ADDR_TORQUE_ENABLE, 1)
        self.lost = ""  # why the port failed (an unplugged adapter); no I/O on it until `reopen`


class DynamixelBus(JointBus):
    """All 14 joints on one or two Protocol 2.0 ports (see module docstring)."""

    def __init__(self, config: DriverConfig):
        if config.bus != "dynamixel":
            raise ValueError(f"DynamixelBus needs bus: dynamixel, got {config.bus!r}")
        super().__init__(config)
        self.ports: dict[str, _Port] = {}
        self._joint_cfg = [j for _, j in config.joints]
        for idx, (arm, joint) in enumerate(config.joints):
            port = self.ports.setdefault(arm.port, _Port(arm.port, config))
            port.indices.append(idx)
            port.ids.append(joint.id)
        self._torque_due = 0.0   # monotonic time of the next Torque Enable read (config.torque_check_period_s)

    # --- connect / torque ------------------------------------------------------------
    def connect(self) -> None:
        opened: list[_Port] = []
        try:
            for port in self.ports.values():
                port.handler.baudrate = self.config.baudrate  # openPort() applies it
                try:
                    ok = port.handler.openPort()
                except Exception as e:  # serial.SerialException, OSError
                    raise BusError(f"cannot open Dynamixel port {port.name!r}: {e}") from e
                if not ok:
                    raise BusError(f"cannot open Dynamixel port {port.name!r} at {self.config.baudrate} baud")
                opened.append(port)
                for idx, dxl_id in zip(port.indices, port.ids):
                    self._check_servo(port, idx, dxl_id)
            self.connected = True
            self._write_gains()
        except BaseException:
            for port in opened:
                port.handler.closePort()
            self.connected = False
            raise

    def _check_servo(self, port: _Port, idx: int, dxl_id: int) -> None:
        name = self.joint_names[idx]
        result = sdk.COMM_RX_TIMEOUT
        # Start-up is not time-critical: give PING a generous reply window (a loaded host can
        # be slow to answer), and drop any late reply before retrying so replies stay in step.
        tick_timeout = port.handler.reply_timeout_ms
        port.handler.reply_timeout_ms = max(tick_timeout, CONNECT_REPLY_TIMEOUT_MS)
        try:
            for _ in range(self.config.connect_retries):
                model, result, _err = port.packet.ping(port.handler, dxl_id)
                if result == sdk.COMM_SUCCESS:
                    break
                port.handler.clearPort()
        finally:
            port.handler.reply_timeout_ms = tick_timeout
        if result != sdk.COMM_SUCCESS:
            raise BusMismatchError(
                f"joint {name!r}: Dynamixel id {dxl_id} on {port.name!r} did not answer PING "
                f"({port.packet.getTxRxResult(result)}); check the id in the config and the wiring"
            )
        want = self._joint_cfg[idx].motor
        if want and dxl.MODEL_NUMBERS[want] != model:
            raise BusMismatchError(
                f"joint {name!r}: Dynamixel id {dxl_id} on {port.name!r} is model number {model}, "
                f"config says {want!r} ({dxl.MODEL_NUMBERS[want]})"
            )

    def _write_gains(self) -> None:
        for port in self.ports.values():
            for idx, dxl_id in zip(port.indices, port.ids):
                j = self._joint_cfg[idx]
                for addr, value in ((dxl.ADDR_POSITION_P_GAIN, j.kp), (dxl.ADDR_POSITION_D_GAIN, j.kd)):
                    if value > 0:
                        self._write_register(port, idx, dxl_id, addr, int(round(value)), 2)

    def _write_register(self, port: _Port, idx: int, dxl_id: int, addr: int, value: int, size: int) -> None:
        fn = port.packet.write1ByteTxRx if size == 1 else port.packet.write2ByteTxRx
        result, err = sdk.COMM_TX_FAIL, 0
        for _ in range(self.config.connect_retries):
            result, err = fn(port.handler, dxl_id, addr, value)
            if result == sdk.COMM_SUCCESS and not (err & 0x7F):
                return
        reason = port.packet.getTxRxResult(result) if result != sdk.COMM_SUCCESS else port.packet.getRxPacketError(err)
        raise BusError(f"joint {self.joint_names[idx]!r} (id {dxl_id}): write of address {addr} failed: {reason}")

    def prepare_reset(self) -> list[str]:
        """The driver's fault-reset hook: reopen every port marked lost (see `reopen_lost`)."""
        return [f"port {name} reopened" for name in self.reopen_lost()]

    def reopen_lost(self) -> list[str]:
        """Reopen every port marked lost (the adapter is back); returns the names reopened. A port
        that still fails stays lost, its reason updated."""
        reopened = []
        for port in self.ports.values():
            if not port.lost:
                continue
            try:
                if port.handler.is_open:
                    port.handler.closePort()
                if not port.handler.openPort():
                    raise OSError("openPort returned False")
            except PORT_ERRORS as e:
                port.lost = f"reopen failed: {type(e).__name__}: {e}"
                continue
            port.lost = ""
            reopened.append(port.name)
        return reopened

    def _set_torque(self, on: int) -> dict[int, str]:
        failures: dict[int, str] = {}
        for port in self.ports.values():
            if port.lost:
                failures.update({idx: f"joint {self.joint_names[idx]!r}: port {port.name!r} lost ({port.lost})"
                                 for idx in port.indices})
                continue
            for idx, dxl_id in zip(port.indices, port.ids):
                try:
                    self._write_register(port, idx, dxl_id, dxl.ADDR_TORQUE_ENABLE, on, 1)
                except BusError as e:
                    failures[idx] = str(e)
                except PORT_ERRORS as e:   # the port is gone
                    failures[idx] = f"joint {self.joint_names[idx]!r}: port {port.name!r} failed: {e}"
        return failures

    def enable(self) -> None:
        failures = self._set_torque(1)
        self.torque_enabled = True  # some joints may be on: treat as enabled for shutdown
        if failures:
            raise BusError("torque enable failed: " + "; ".join(failures.values()))

    def disable(self) -> dict[int, str]:
        failures = self._set_torque(0)
        self.torque_enabled = False
        return failures

    def _close_ports(self) -> None:
        for port in self.ports.values():
            if port.handler.is_open:
                port.handler.closePort()

    # --- read ------------------------------------------------------------------------
    def read_state(self, deadline: float | None = None, mask: np.ndarray | None = None) -> BusReading:
        if not self.connected:
            raise BusError("read_state called on a bus that is not connected")
        deadline = self._deadline(deadline)
        mask = np.ones(self.n, bool) if mask is None else np.asarray(mask, bool)
        n = self.n
        pos, vel, eff = np.full(n, np.nan), np.full(n, np.nan), np.full(n, np.nan)
        ok, hw = np.zeros(n, bool), np.zeros(n, bool)
        errors: dict[int, str] = {}
        retries = 0
        check_torque = self.torque_enabled and time.monotonic() >= self._torque_due
        off = np.zeros(n, bool) if check_torque else None
        for port in self.ports.values():
            wanted = {dxl_id: idx for idx, dxl_id in zip(port.indices, port.ids) if mask[idx]}
            try:
                if port.lost:
                    raise OSError(port.lost)
                got, reasons, r = self._read_port(port, list(wanted), deadline)
                retries += r
                for dxl_id, idx in wanted.items():
                    if dxl_id not in got:
                        errors[idx] = f"no valid reply from id {dxl_id} ({reasons.get(dxl_id, 'not tried')})"
                        continue
                    data, err = got[dxl_id]
                    self._decode(data, idx, pos, vel, eff)
                    ok[idx] = True
                    if err & dxl.ERR_ALERT:
                        hw[idx] = True
                        errors[idx] = "hardware error: " + self._hardware_error_text(port, dxl_id)
                if check_torque:
                    for dxl_id, on in self._read_torque(port, [i for i in wanted if i in got]).items():
                        off[wanted[dxl_id]] = not on
            except PORT_ERRORS as e:  # the port is gone (unplugged adapter): that arm's joints, not the other's
                port.lost = port.lost or f"{type(e).__name__}: {e}"
                for dxl_id, idx in wanted.items():
                    ok[idx] = False
                    errors[idx] = f"port {port.name!r} lost ({port.lost})"
        if check_torque:
            self._torque_due = time.monotonic() + self.config.torque_check_period_s
        return self._reading_from_motor(pos, vel, eff, ok, hw, errors, retries, torque_off=off)

    def _read_torque(self, port: _Port, ids: list[int]) -> dict[int, bool]:
        """Torque Enable (64) of `ids` in one sync read: a servo can drop torque without an error flag
        (a brown-out reset, a write from another tool). Servos that do not answer are left out."""
        if not ids:
            return {}
        port.torque_reader.clearParam()
        for dxl_id in ids:
            port.torque_reader.addParam(dxl_id)
        port.torque_reader.status = {}
        port.torque_reader.txRxPacket()
        out = {}
        for dxl_id in ids:
            result, _err = port.torque_reader.status.get(dxl_id, (None, 0))
            data = port.torque_reader.data_dict.get(dxl_id)
            if result == sdk.COMM_SUCCESS and data is not None and len(data) == 1:
                out[dxl_id] = bool(data[0])
        return out

    def _read_port(self, port: _Port, ids: list[int], deadline: float):
        """Sync-read `ids`; re-read the ones that failed in rounds while the deadline allows.

        A sync read stops at the first servo that fails (the SDK consumes the later replies
        while waiting for it), so each retry round sync-reads the servos not yet heard from
        with the suspect moved to the end: one silent servo costs one timeout per round and
        never starves the healthy servos behind it. Returns ({id: (data, error byte)},
        {id: last failure text}, number of retry rounds). A round that starts late gets a
        shorter reply timeout, so the read ends by the deadline.
        """
        todo = list(ids)
        got: dict[int, tuple[bytes, int]] = {}
        reasons: dict[int, str] = {}
        rounds = 0
        while todo:
            left_ms = (deadline - time.monotonic()) * 1000.0
            if rounds and (rounds > self.config.max_retries or left_ms < MIN_ROUND_MS):
                break
            rounds += 1
            # never wait past the deadline: a late round gets a shorter reply timeout
            port.handler.reply_timeout_ms = max(MIN_ROUND_MS, min(self.config.reply_timeout_ms, left_ms))
            if len(todo) == 1:
                data, result, err = port.packet.readTxRx(
                    port.handler, todo[0], dxl.ADDR_PRESENT_CURRENT, dxl.STATE_BLOCK_LEN)
                status = {todo[0]: (result, err)}
                if result == sdk.COMM_SUCCESS:
                    port.reader.data_dict[todo[0]] = data
            else:
                port.reader.clearParam()
                for dxl_id in todo:
                    port.reader.addParam(dxl_id)
                port.reader.status = {}
                port.reader.txRxPacket()
                status = port.reader.status
            suspects = []
            for dxl_id in list(todo):
                result, err = status.get(dxl_id, (None, 0))
                if result == sdk.COMM_SUCCESS and len(port.reader.data_dict.get(dxl_id) or ()) == dxl.STATE_BLOCK_LEN:
                    got[dxl_id] = (bytes(port.reader.data_dict[dxl_id]), err)
                    todo.remove(dxl_id)
                elif result is not None:
                    reasons[dxl_id] = port.packet.getTxRxResult(result)
                    suspects.append(dxl_id)
            todo = [i for i in todo if i not in suspects] + suspects
        port.handler.reply_timeout_ms = self.config.reply_timeout_ms
        return got, reasons, max(0, rounds - 1)

    @staticmethod
    def _decode(data, idx: int, pos: np.ndarray, vel: np.ndarray, eff: np.ndarray) -> None:
        b = bytes(data)
        current = _signed(int.from_bytes(b[0:2], "little"), 16)
        velocity = _signed(int.from_bytes(b[2:6], "little"), 32)
        position = _signed(int.from_bytes(b[6:10], "little"), 32)
        pos[idx] = ticks_to_rad(position)
        vel[idx] = velocity * dxl.VELOCITY_UNIT_RAD_S
        eff[idx] = current * dxl.CURRENT_UNIT_A

    def _hardware_error_text(self, port: _Port, dxl_id: int) -> str:
        bits, result, _ = port.packet.read1ByteTxRx(port.handler, dxl_id, dxl.ADDR_HARDWARE_ERROR)
        if result != sdk.COMM_SUCCESS:
            return "alert bit set (Hardware Error Status unreadable)"
        return dxl.hardware_error_text(bits)

    # --- write -----------------------------------------------------------------------
    def _write(self, motor_rad: np.ndarray, mask: np.ndarray, deadline: float,
               torque_ff: np.ndarray | None = None) -> WriteResult:
        # Protocol 2.0 position control has no torque feed-forward: the servo's own position loop
        # carries the load (torque_ff is ignored; the driver sends none on this bus)
        written = np.full(self.n, np.nan)
        errors: dict[int, str] = {}
        retries = 0
        ticks = rad_to_ticks(motor_rad)
        for port in self.ports.values():
            port.writer.clearParam()
            sent = [i for i in port.indices if mask[i]]
            if not sent:
                continue
            for idx in sent:
                dxl_id = port.ids[port.indices.index(idx)]
                port.writer.addParam(dxl_id, int(ticks[idx]).to_bytes(4, "little", signed=True))
            try:
                if port.lost:
                    raise OSError(port.lost)
                result = port.writer.txPacket()
                for _ in range(self.config.max_retries):
                    if result == sdk.COMM_SUCCESS or time.monotonic() >= deadline:
                        break
                    retries += 1
                    result = port.writer.txPacket()
            except PORT_ERRORS as e:  # the port is gone: that arm's joints, not the other's
                port.lost = port.lost or f"{type(e).__name__}: {e}"
                for idx in sent:
                    errors[idx] = f"port {port.name!r} lost ({port.lost})"
                continue
            if result != sdk.COMM_SUCCESS:
                for idx in sent:
                    errors[idx] = f"sync write failed ({port.packet.getTxRxResult(result)})"
                continue
            for idx in sent:
                written[idx] = ticks_to_rad(ticks[idx])
        return WriteResult(written, errors, retries)
