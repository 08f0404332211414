"""Dynamixel Protocol 2.0 framing: CRC-16, byte stuffing, packet building and parsing.

The bus side talks through the real `dynamixel_sdk`; this module is what the servo emulator
uses to understand the SDK's bytes, and what tests use to pin the wire format.

Wire format (from the ROBOTIS Protocol 2.0 specification):
  instruction: FF FF FD 00 | ID | LEN_L LEN_H | INST | PARAM... | CRC_L CRC_H
  status:      FF FF FD 00 | ID | LEN_L LEN_H | 0x55 | ERR | PARAM... | CRC_L CRC_H
LEN counts everything after itself (instruction, parameters, CRC) *after* byte stuffing.
Stuffing: inside INST..PARAM, every FF FF FD is followed by an extra FD. The CRC is the
CRC-16 (polynomial 0x8005, initial value 0, no reflection) of every byte before the CRC,
computed over the stuffed packet.
"""
from __future__ import annotations

from dataclasses import dataclass

HEADER = b"\xff\xff\xfd\x00"
BROADCAST_ID = 0xFE

# Instructions.
INST_PING = 0x01
INST_READ = 0x02
INST_WRITE = 0x03
INST_REBOOT = 0x08
INST_STATUS = 0x55
INST_SYNC_READ = 0x82
INST_SYNC_WRITE = 0x83

# Status-packet error byte: bit 7 is the hardware alert, the low 7 bits an instruction error.
ERR_ALERT = 0x80
ERR_RESULT_FAIL = 0x01
ERR_INSTRUCTION = 0x02
ERR_CRC = 0x03
ERR_DATA_RANGE = 0x04
ERR_DATA_LENGTH = 0x05
ERR_DATA_LIMIT = 0x06
ERR_ACCESS = 0x07

# X-series control table addresses used by the driver (bytes in parentheses).
ADDR_MODEL_NUMBER = 0  # (2)
ADDR_FIRMWARE = 6  # (1)
ADDR_ID = 7  # (1)
ADDR_OPERATING_MODE = 11  # (1) 3 = position control
ADDR_TORQUE_ENABLE = 64  # (1)
ADDR_HARDWARE_ERROR = 70  # (1) bit field, see HARDWARE_ERROR_BITS
ADDR_POSITION_D_GAIN = 80  # (2)
ADDR_POSITION_P_GAIN = 84  # (2)
ADDR_GOAL_POSITION = 116  # (4)
ADDR_PRESENT_CURRENT = 126  # (2) signed, ~2.69 mA per unit on XM430
ADDR_PRESENT_VELOCITY = 128  # (4) signed, 0.229 rev/min per unit
ADDR_PRESENT_POSITION = 132  # (4) signed, 4096 per revolution, 2048 = 0 rad
STATE_BLOCK_LEN = 10  # current (2) + velocity (4) + position (4), one sync read

# Hardware Error Status (address 70) bits.
HARDWARE_ERROR_BITS = {
    0: "input voltage error",
    2: "overheating",
    3: "motor encoder error",
    4: "electrical shock (over-current)",
    5: "overload",
}

TICKS_PER_REV = 4096
CENTER_TICKS = 2048
VELOCITY_UNIT_RAD_S = 0.229 * 2.0 * 3.141592653589793 / 60.0
CURRENT_UNIT_A = 0.00269

MODEL_NUMBERS = {
    "XM430-W350": 1020,
    "XL430-W250": 1060,
    "XM540-W270": 1120,
    "XL330-M288": 1200,
}


def _make_crc_table() -> list[int]:
    table = []
    for i in range(256):
        crc = i << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x8005) if crc & 0x8000 else (crc << 1)
        table.append(crc & 0xFFFF)
    return table


_CRC_TABLE = _make_crc_table()


def crc16(data: bytes | bytearray) -> int:
    """CRC-16/BUYPASS (poly 0x8005, init 0), as Protocol 2.0 defines it."""
    crc = 0
    for b in data:
        crc = ((crc << 8) ^ _CRC_TABLE[((crc >> 8) ^ b) & 0xFF]) & 0xFFFF
    return crc


def stuff(body: bytes) -> bytes:
    """Insert FD after every FF FF FD inside the instruction/parameter region."""
    out = bytearray()
    for b in body:
        out.append(b)
        if b == 0xFD and len(out) >= 3 and out[-3] == 0xFF and out[-2] == 0xFF:
            out.append(0xFD)
    return bytes(out)


def unstuff(body: bytes) -> bytes:
    """Remove the FD that stuffing inserted after FF FF FD."""
    out = bytearray()
    i = 0
    while i < len(body):
        b = body[i]
        out.append(b)
        if b == 0xFD and len(out) >= 3 and out[-3] == 0xFF and out[-2] == 0xFF:
            if i + 1 < len(body) and body[i + 1] == 0xFD:
                i += 1  # skip the stuffed byte
        i += 1
    return bytes(out)


def build_packet(dxl_id: int, body: bytes) -> bytes:
    """Frame `body` (instruction or 0x55+error, then parameters) with header, length and CRC."""
    stuffed = stuff(body)
    length = len(stuffed) + 2
    head = HEADER + bytes([dxl_id & 0xFF, length & 0xFF, (length >> 8) & 0xFF])
    packet = head + stuffed
    crc = crc16(packet)
    return packet + bytes([crc & 0xFF, crc >> 8])


def build_status(dxl_id: int, error: int, params: bytes = b"") -> bytes:
    return build_packet(dxl_id, bytes([INST_STATUS, error & 0xFF]) + params)


def build_instruction(dxl_id: int, inst: int, params: bytes = b"") -> bytes:
    return build_packet(dxl_id, bytes([inst]) + params)


@dataclass
class Packet:
    """One decoded packet: id, instruction byte (0x55 for status), unstuffed parameters."""

    dxl_id: int
    instruction: int
    params: bytes
    crc_ok: bool


def parse_stream(buffer: bytearray) -> list[Packet]:
    """Consume every complete packet at the front of `buffer` (mutated in place).

    Garbage before a header is dropped; an incomplete packet stays in the buffer.
    """
    packets: list[Packet] = []
    while True:
        start = buffer.find(HEADER)
        if start < 0:
            # keep a possible partial header (up to 3 bytes) for the next read
            del buffer[: max(0, len(buffer) - 3)]
            return packets
        if start:
            del buffer[:start]
        if len(buffer) < 7:
            return packets
        length = buffer[5] | (buffer[6] << 8)
        total = 7 + length
        if length < 3 or length > 1024:
            del buffer[:1]  # not a real header; resynchronise
            continue
        if len(buffer) < total:
            return packets
        raw = bytes(buffer[:total])
        del buffer[:total]
        crc = raw[-2] | (raw[-1] << 8)
        body = unstuff(raw[7:-2])
        packets.append(Packet(raw[4], body[0], body[1:], crc16(raw[:-2]) == crc))


def hardware_error_text(bits: int) -> str:
    """Readable names of the set bits of the Hardware Error Status register."""
    names = [text for bit, text in HARDWARE_ERROR_BITS.items() if bits & (1 << bit)]
    return ", ".join(names) if names else f"unknown hardware error 0x{bits:02x}"
