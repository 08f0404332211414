"""Fault injection shared by the servo emulators.

Per motor id: drop the next N replies, corrupt the next N replies (bad CRC / malformed
frame), go silent (stop answering until told otherwise), cut the wire (frames to the motor lost
before it sees them: Damiao), delay every reply, raise a hardware error flag, or report a wrong
position in the next N well-formed replies (a glitch). Thread-safe: tests set faults while the emulator thread answers.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass

# Generic hardware error kinds; each emulator maps them onto its bus's own codes.
HARDWARE_ERRORS = ("overheat", "overcurrent", "overload", "voltage")


@dataclass
class _MotorFaults:
    drop_next: int = 0  # replies still to drop
    corrupt_next: int = 0  # replies still to corrupt
    silent: bool = False  # never answer while set
    delay_s: float = 0.0  # wait this long before every reply
    hardware_error: str | None = None  # one of HARDWARE_ERRORS, or None
    glitch_rad: float = 0.0  # added to the position of the next `glitch_next` replies (a well-formed lie)
    glitch_next: int = 0
    cut: bool = False  # the wire is cut (a stalled adapter, a loose connector): frames to the motor are lost,
    #   it sees none (its command timeout runs) and answers none


class FaultInjector:
    """What to do with the next reply of each motor."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._faults: dict[int, _MotorFaults] = {}
        self.dropped = 0  # replies dropped so far (silent or drop_next)
        self.corrupted = 0  # replies corrupted so far

    def _get(self, motor_id: int) -> _MotorFaults:
        return self._faults.setdefault(motor_id, _MotorFaults())

    def drop(self, motor_id: int, count: int = 1) -> None:
        """Drop the next `count` replies of `motor_id`."""
        if count < 0:
            raise ValueError(f"count must be >= 0, got {count!r}")
        with self._lock:
            self._get(motor_id).drop_next = count

    def corrupt(self, motor_id: int, count: int = 1) -> None:
        """Corrupt the next `count` replies of `motor_id` (bad CRC / malformed frame)."""
        if count < 0:
            raise ValueError(f"count must be >= 0, got {count!r}")
        with self._lock:
            self._get(motor_id).corrupt_next = count

    def silence(self, motor_id: int, silent: bool = True) -> None:
        """Make `motor_id` stop answering (or answer again with silent=False)."""
        with self._lock:
            self._get(motor_id).silent = silent

    def delay(self, motor_id: int, seconds: float) -> None:
        """Delay every reply of `motor_id` by `seconds` (0 to stop)."""
        if seconds < 0:
            raise ValueError(f"delay must be >= 0, got {seconds!r}")
        with self._lock:
            self._get(motor_id).delay_s = seconds

    def set_hardware_error(self, motor_id: int, kind: str | None) -> None:
        """Raise (or clear with None) a hardware error flag on `motor_id`."""
        if kind is not None and kind not in HARDWARE_ERRORS:
            raise ValueError(f"hardware error must be one of {HARDWARE_ERRORS} or None, got {kind!r}")
        with self._lock:
            self._get(motor_id).hardware_error = kind

    def cut(self, motor_id: int, cut: bool = True) -> None:
        """Cut (or, with cut=False, restore) the wire to `motor_id`: frames to it are lost before it sees them."""
        with self._lock:
            self._get(motor_id).cut = cut

    def is_cut(self, motor_id: int) -> bool:
        with self._lock:
            return self._get(motor_id).cut

    def glitch(self, motor_id: int, offset_rad: float, count: int = 1) -> None:
        """The next `count` replies of `motor_id` report its position `offset_rad` off (well-formed frames)."""
        if count < 0:
            raise ValueError(f"count must be >= 0, got {count!r}")
        with self._lock:
            f = self._get(motor_id)
            f.glitch_rad, f.glitch_next = float(offset_rad), count

    def next_glitch(self, motor_id: int) -> float:
        """Consume one reply's position offset (0 when none is pending)."""
        with self._lock:
            f = self._get(motor_id)
            if f.glitch_next <= 0:
                return 0.0
            f.glitch_next -= 1
            return f.glitch_rad

    def hardware_error(self, motor_id: int) -> str | None:
        with self._lock:
            return self._get(motor_id).hardware_error

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()

    def next_reply(self, motor_id: int) -> tuple[str, float]:
        """Consume one reply decision: ("send" | "drop" | "corrupt", delay in seconds)."""
        with self._lock:
            f = self._get(motor_id)
            if f.silent:
                self.dropped += 1
                return "drop", 0.0
            if f.drop_next > 0:
                f.drop_next -= 1
                self.dropped += 1
                return "drop", 0.0
            if f.corrupt_next > 0:
                f.corrupt_next -= 1
                self.corrupted += 1
                return "corrupt", f.delay_s
            return "send", f.delay_s
