"""Damiao DM-J43xx CAN protocol in MIT mode: command packing and feedback decoding.

Facts (Damiao's documentation and open-source drivers such as i2rt's `dm_driver.py`):
- Classic CAN 2.0A, 1 Mbit/s, 8-byte frames. Commands go to the motor's CAN id (MIT mode
  adds 0x000); each command is answered by one feedback frame on the motor's master id
  (i2rt's YAM convention: master id = CAN id + 0x10).
- Special commands on the CAN id: FF FF FF FF FF FF FF FC enable, ...FD disable,
  ...FE save current position as zero, ...FB clear error.
- Status request without moving: id 0x7FF, data [id_lo, id_hi, 0xCC, 0, ...].
- MIT command: position 16 bit, velocity 12, kp 12, kd 12, torque 12, big-endian nibbles:
  [p_hi, p_lo, v_hi8, v_lo4|kp_hi4, kp_lo8, kd_hi8, kd_lo4|t_hi4, t_lo8]; each value mapped
  linearly from [min, max] onto [0, 2^bits - 1]. Ranges are the motor's PMAX/VMAX/TMAX
  registers (defaults DM4340: 12.5 rad, 8 rad/s, 28 Nm; DM4310: 12.5, 30, 10), kp 0..500,
  kd 0..5.
- Feedback: [err<<4 | id&0xF, p_hi, p_lo, v_hi8, v_lo4|t_hi4, t_lo8, T_mos, T_rotor];
  err 0 disabled, 1 enabled, 8 over-voltage, 9 under-voltage, A over-current,
  B MOSFET over-temperature, C coil over-temperature, D communication loss, E overload.
"""
from __future__ import annotations

from dataclasses import dataclass

CMD_ENABLE = bytes([0xFF] * 7 + [0xFC])
CMD_DISABLE = bytes([0xFF] * 7 + [0xFD])
CMD_SAVE_ZERO = bytes([0xFF] * 7 + [0xFE])
CMD_CLEAR_ERROR = bytes([0xFF] * 7 + [0xFB])
STATUS_REQUEST_ID = 0x7FF
STATUS_REQUEST_CODE = 0xCC
DEFAULT_MASTER_OFFSET = 0x10

KP_RANGE = (0.0, 500.0)
KD_RANGE = (0.0, 5.0)


@dataclass(frozen=True)
class MotorLimits:
    """MIT scaling ranges of one motor type (symmetric: [-max, max])."""

    p_max: float  # rad
    v_max: float  # rad/s
    t_max: float  # Nm


MOTOR_LIMITS = {
    "DM4340": MotorLimits(12.5, 8.0, 28.0),
    "DM4310": MotorLimits(12.5, 30.0, 10.0),
}

STATE_DISABLED = 0x0
STATE_ENABLED = 0x1
ERROR_CODES = {
    0x8: "over-voltage",
    0x9: "under-voltage",
    0xA: "over-current",
    0xB: "MOSFET over-temperature",
    0xC: "coil over-temperature",
    0xD: "communication loss",
    0xE: "overload",
}


def float_to_uint(x: float, lo: float, hi: float, bits: int) -> int:
    """Clip x to [lo, hi] and map it onto 0 .. 2^bits-1 (rounded to nearest)."""
    x = min(max(x, lo), hi)
    return int(round((x - lo) * ((1 << bits) - 1) / (hi - lo)))


def uint_to_float(u: int, lo: float, hi: float, bits: int) -> float:
    return lo + u * (hi - lo) / ((1 << bits) - 1)


@dataclass(frozen=True)
class MitCommand:
    position: float  # rad
    velocity: float  # rad/s
    kp: float  # Nm/rad
    kd: float  # Nm s/rad
    torque: float  # Nm feed-forward


def pack_mit(cmd: MitCommand, limits: MotorLimits) -> bytes:
    p = float_to_uint(cmd.position, -limits.p_max, limits.p_max, 16)
    v = float_to_uint(cmd.velocity, -limits.v_max, limits.v_max, 12)
    kp = float_to_uint(cmd.kp, *KP_RANGE, 12)
    kd = float_to_uint(cmd.kd, *KD_RANGE, 12)
    t = float_to_uint(cmd.torque, -limits.t_max, limits.t_max, 12)
    return bytes([
        p >> 8, p & 0xFF,
        v >> 4, ((v & 0xF) << 4) | (kp >> 8), kp & 0xFF,
        kd >> 4, ((kd & 0xF) << 4) | (t >> 8), t & 0xFF,
    ])


def unpack_mit(data: bytes, limits: MotorLimits) -> MitCommand:
    """Decode an MIT command frame (what the motor, or its emulator, sees)."""
    if len(data) != 8:
        raise ValueError(f"MIT command must be 8 bytes, got {len(data)}: {bytes(data).hex()}")
    p = (data[0] << 8) | data[1]
    v = (data[2] << 4) | (data[3] >> 4)
    kp = ((data[3] & 0xF) << 8) | data[4]
    kd = (data[5] << 4) | (data[6] >> 4)
    t = ((data[6] & 0xF) << 8) | data[7]
    return MitCommand(
        uint_to_float(p, -limits.p_max, limits.p_max, 16),
        uint_to_float(v, -limits.v_max, limits.v_max, 12),
        uint_to_float(kp, *KP_RANGE, 12),
        uint_to_float(kd, *KD_RANGE, 12),
        uint_to_float(t, -limits.t_max, limits.t_max, 12),
    )


def quantize_position(position: float, limits: MotorLimits) -> float:
    """The position a motor actually receives for `position` (16-bit MIT quantisation)."""
    u = float_to_uint(position, -limits.p_max, limits.p_max, 16)
    return uint_to_float(u, -limits.p_max, limits.p_max, 16)


@dataclass(frozen=True)
class Feedback:
    motor_id: int  # low 4 bits of the CAN id, as the frame carries it
    state: int  # 0 disabled, 1 enabled, else an error code (see ERROR_CODES)
    position: float  # rad
    velocity: float  # rad/s
    torque: float  # Nm
    temp_mos: float  # deg C
    temp_rotor: float  # deg C

    @property
    def error(self) -> str | None:
        """Readable error, or None when the state is disabled/enabled."""
        if self.state in (STATE_DISABLED, STATE_ENABLED):
            return None
        return ERROR_CODES.get(self.state, f"unknown error code 0x{self.state:x}")


def pack_feedback(fb: Feedback, limits: MotorLimits) -> bytes:
    p = float_to_uint(fb.position, -limits.p_max, limits.p_max, 16)
    v = float_to_uint(fb.velocity, -limits.v_max, limits.v_max, 12)
    t = float_to_uint(fb.torque, -limits.t_max, limits.t_max, 12)
    return bytes([
        ((fb.state & 0xF) << 4) | (fb.motor_id & 0xF),
        p >> 8, p & 0xFF,
        v >> 4, ((v & 0xF) << 4) | (t >> 8), t & 0xFF,
        int(min(max(fb.temp_mos, 0), 255)), int(min(max(fb.temp_rotor, 0), 255)),
    ])


def unpack_feedback(data: bytes, limits: MotorLimits) -> Feedback:
    """Decode a feedback frame; a frame that is not 8 bytes is corrupt (ValueError)."""
    if len(data) != 8:
        raise ValueError(f"feedback frame must be 8 bytes, got {len(data)}: {bytes(data).hex()}")
    p = (data[1] << 8) | data[2]
    v = (data[3] << 4) | (data[4] >> 4)
    t = ((data[4] & 0xF) << 8) | data[5]
    return Feedback(
        motor_id=data[0] & 0xF,
        state=data[0] >> 4,
        position=uint_to_float(p, -limits.p_max, limits.p_max, 16),
        velocity=uint_to_float(v, -limits.v_max, limits.v_max, 12),
        torque=uint_to_float(t, -limits.t_max, limits.t_max, 12),
        temp_mos=float(data[6]),
        temp_rotor=float(data[7]),
    )


def status_request(can_id: int) -> bytes:
    return bytes([can_id & 0xFF, (can_id >> 8) & 0xFF, STATUS_REQUEST_CODE, 0, 0, 0, 0, 0])
