"""Damiao DM-J43xx / DM3507 CAN protocol in MIT mode: command packing, feedback and registers.

Facts (Damiao's documentation and i2rt, the YAM maker's SDK, commit
5d47b358bafb30c65e397f2ece506550a0db4594, `i2rt/motor_drivers/dm_driver.py`):
- Classic CAN 2.0A, 1 Mbit/s, 8-byte frames. Commands go to the motor's CAN id (MIT mode
  adds 0x000); each command is answered by one feedback frame on the motor's master id
  (i2rt's YAM convention: master id = CAN id + 0x10).
- Special commands on the CAN id: FF FF FF FF FF FF FF FC enable, ...FD disable,
  ...FE save current position as zero, ...FB clear error.
- Status request without moving: id 0x7FF, data [id_lo, id_hi, 0xCC, 0, ...] (Damiao's own
  DM_CAN library uses it; i2rt does not: it reads the state from each MIT command's reply).
- MIT command: position 16 bit, velocity 12, kp 12, kd 12, torque 12, big-endian nibbles:
  [p_hi, p_lo, v_hi8, v_lo4|kp_hi4, kp_lo8, kd_hi8, kd_lo4|t_hi4, t_lo8]; each value mapped
  linearly from [min, max] onto [0, 2^bits - 1]. Ranges are the motor's PMAX/VMAX/TMAX
  registers (see MOTOR_LIMITS), kp 0..500, kd 0..5.
- Feedback: [err<<4 | id&0xF, p_hi, p_lo, v_hi8, v_lo4|t_hi4, t_lo8, T_mos, T_rotor];
  err 0 disabled, 1 enabled, 8 over-voltage, 9 under-voltage, A over-current,
  B MOSFET over-temperature, C coil over-temperature, D communication loss, E overload.
- Registers (i2rt `i2rt/motor_config_tool/utils.py`, same commit): on id 0x7FF, data
  [id_lo, id_hi, op, reg, v0, v1, v2, v3] with op 0x33 read, 0x55 write, 0xAA save to flash;
  the reply (on the master id) repeats [id_lo, id_hi, op, reg] and carries the value
  little-endian in data[4:8]. Register numbers (Damiao's register table): 7 MST_ID,
  8 ESC_ID, 9 TIMEOUT (uint32, in 50 us steps: i2rt's `motor_config_tool/set_timeout.py`
  writes 8000 for the 400 ms it uses), 21 PMAX, 22 VMAX, 23 TMAX (float32).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

CMD_ENABLE = bytes([0xFF] * 7 + [0xFC])
CMD_DISABLE = bytes([0xFF] * 7 + [0xFD])
CMD_SAVE_ZERO = bytes([0xFF] * 7 + [0xFE])
CMD_CLEAR_ERROR = bytes([0xFF] * 7 + [0xFB])
STATUS_REQUEST_ID = 0x7FF
STATUS_REQUEST_CODE = 0xCC
REGISTER_READ = 0x33
REGISTER_WRITE = 0x55
REGISTER_SAVE = 0xAA
REG_MST_ID = 7  # uint32: master (feedback) id
REG_ESC_ID = 8  # uint32: CAN id
REG_TIMEOUT = 9  # uint32: command timeout in 50 us steps (0 = never times out)
REG_PMAX = 21  # float32: MIT position range, rad
REG_VMAX = 22  # float32: MIT velocity range, rad/s
REG_TMAX = 23  # float32: MIT torque range, Nm
FLOAT_REGISTERS = frozenset({REG_PMAX, REG_VMAX, REG_TMAX})
REGISTER_NAMES = {REG_MST_ID: "MST_ID", REG_ESC_ID: "ESC_ID", REG_TIMEOUT: "TIMEOUT",
                  REG_PMAX: "PMAX", REG_VMAX: "VMAX", REG_TMAX: "TMAX"}
TIMEOUT_STEP_S = 50e-6  # one TIMEOUT register step
I2RT_TIMEOUT_STEPS = 8000  # what i2rt writes to TIMEOUT (i2rt-robotics/i2rt @ 5d47b358bafb30c65e397f2ece506550a0db4594,
#   i2rt/motor_config_tool/set_timeout.py `timeout = 8000`): a YAM motor left without a frame for
I2RT_COMMAND_TIMEOUT_S = I2RT_TIMEOUT_STEPS * TIMEOUT_STEP_S   # 0.4 s disables itself and latches 0xD
DEFAULT_MASTER_OFFSET = 0x10

KP_RANGE = (0.0, 500.0)
KD_RANGE = (0.0, 5.0)


@dataclass(frozen=True)
class MotorLimits:
    """MIT scaling ranges of one motor type (symmetric: [-max, max])."""

    p_max: float  # rad
    v_max: float  # rad/s
    t_max: float  # Nm


# i2rt `i2rt/motor_drivers/utils.py` MotorType.get_motor_constants (commit 5d47b358bafb30c65e397f2ece506550a0db4594).
# DM4340's V_MAX: Damiao's factory table says 8 rad/s; i2rt (the YAM's maker) packs and decodes
# with 10, so a YAM motor is expected to hold 10 in its VMAX register. Whether it does is not
# assumed: `DamiaoBus.connect` reads PMAX/VMAX/TMAX from every motor and refuses one whose
# registers differ from this table.
MOTOR_LIMITS = {
    "DM4340": MotorLimits(12.5, 10.0, 28.0),
    "DM4310": MotorLimits(12.5, 30.0, 10.0),
    "DM3507": MotorLimits(12.5, 50.0, 5.0),  # i2rt's linear_3507 gripper motor (robots/config/linear_3507.yml)
}
LIMIT_REGISTERS = ((REG_PMAX, "p_max"), (REG_VMAX, "v_max"), (REG_TMAX, "t_max"))  # register -> MotorLimits field

STATE_DISABLED = 0x0
STATE_ENABLED = 0x1
STATE_COMM_LOSS = 0xD  # the motor's command timeout ran out: it disabled itself (cleared by FB)
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


def register_request(can_id: int, op: int, reg: int, value: bytes = bytes(4)) -> bytes:
    """A register frame for id 0x7FF: op REGISTER_READ / REGISTER_WRITE / REGISTER_SAVE."""
    if len(value) != 4:
        raise ValueError(f"register value must be 4 bytes, got {len(value)}")
    return bytes([can_id & 0xFF, (can_id >> 8) & 0xFF, op, reg]) + bytes(value)


def encode_register(reg: int, value: float | int) -> bytes:
    """Little-endian float32 (PMAX/VMAX/TMAX...) or uint32 (ids, TIMEOUT) as the motor stores it."""
    return struct.pack("<f", float(value)) if reg in FLOAT_REGISTERS else struct.pack("<I", int(value))


def decode_register(reg: int, raw: bytes) -> float | int:
    return struct.unpack("<f" if reg in FLOAT_REGISTERS else "<I", bytes(raw))[0]


@dataclass(frozen=True)
class RegisterReply:
    can_id: int  # the motor that answers (data[0:2])
    op: int  # REGISTER_READ / REGISTER_WRITE / REGISTER_SAVE, echoed
    reg: int  # register number, echoed
    value: float | int  # decoded from data[4:8]


def unpack_register_reply(data: bytes) -> RegisterReply:
    """Decode a register reply; a frame that is not 8 bytes or is no register reply is a ValueError."""
    if len(data) != 8:
        raise ValueError(f"register reply must be 8 bytes, got {len(data)}: {bytes(data).hex()}")
    if data[2] not in (REGISTER_READ, REGISTER_WRITE, REGISTER_SAVE):
        raise ValueError(f"not a register reply (byte 2 is {data[2]:#04x}): {bytes(data).hex()}")
    return RegisterReply(data[0] | data[1] << 8, data[2], data[3], decode_register(data[3], data[4:8]))
