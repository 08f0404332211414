"""Pinned wire formats: Protocol 2.0 CRC/stuffing/framing and Damiao MIT packing."""
import random

import dynamixel_sdk as sdk
import pytest

from yam_driver import damiao_protocol as dmp
from yam_driver import dxl_protocol as dxl

pytestmark = pytest.mark.unit


def test_ping_packet_matches_the_protocol_2_example():
    # ROBOTIS e-Manual, Protocol 2.0 PING example for ID 1.
    assert dxl.build_instruction(1, dxl.INST_PING) == bytes.fromhex("FFFFFD0001030001194E")


def test_crc_agrees_with_the_sdk_on_random_data():
    rng = random.Random(0)
    ph = sdk.PacketHandler(2.0)
    for _ in range(50):
        data = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 80)))
        assert dxl.crc16(data) == ph.updateCRC(0, list(data), len(data))


def test_stuffing_inserts_and_removes_fd():
    body = bytes([0x03, 0x74, 0x00, 0xFF, 0xFF, 0xFD, 0x01])
    stuffed = dxl.stuff(body)
    assert stuffed == bytes([0x03, 0x74, 0x00, 0xFF, 0xFF, 0xFD, 0xFD, 0x01])
    assert dxl.unstuff(stuffed) == body


def test_parse_stream_skips_garbage_keeps_partial_and_flags_bad_crc():
    good = dxl.build_status(3, 0, bytes([0xFF, 0xFF, 0xFD, 0x10]))  # needs stuffing
    bad = bytearray(dxl.build_status(4, 0, b"\x01\x02"))
    bad[-1] ^= 0x55
    buffer = bytearray(b"\x00\x13" + good + bytes(bad) + good[:5])
    packets = dxl.parse_stream(buffer)
    assert [(p.dxl_id, p.crc_ok) for p in packets] == [(3, True), (4, False)]
    assert packets[0].instruction == dxl.INST_STATUS
    assert packets[0].params == bytes([0x00, 0xFF, 0xFF, 0xFD, 0x10])  # error byte, then data
    assert bytes(buffer) == good[:5]  # incomplete packet waits for more bytes


def test_hardware_error_text_names_bits():
    assert dxl.hardware_error_text(0b100100) == "overheating, overload"


@pytest.mark.parametrize("motor", sorted(dmp.MOTOR_LIMITS))
def test_mit_command_round_trip_within_quantisation(motor):
    lim = dmp.MOTOR_LIMITS[motor]
    cmd = dmp.MitCommand(position=1.2345, velocity=-2.5, kp=80.0, kd=1.5, torque=0.75)
    out = dmp.unpack_mit(dmp.pack_mit(cmd, lim), lim)
    assert abs(out.position - cmd.position) <= 25.0 / 65535
    assert abs(out.velocity - cmd.velocity) <= 2 * lim.v_max / 4095
    assert abs(out.kp - cmd.kp) <= 500.0 / 4095
    assert abs(out.kd - cmd.kd) <= 5.0 / 4095
    assert abs(out.torque - cmd.torque) <= 2 * lim.t_max / 4095
    assert dmp.quantize_position(cmd.position, lim) == out.position


def test_mit_packing_bit_layout_and_clipping():
    lim = dmp.MOTOR_LIMITS["DM4310"]
    data = dmp.pack_mit(dmp.MitCommand(100.0, -100.0, 500.0, 0.0, 10.0), lim)
    # position clipped to +PMAX -> 0xFFFF; velocity clipped to -VMAX -> 0x000;
    # kp 500 -> 0xFFF; kd 0 -> 0x000; torque +TMAX -> 0xFFF
    assert data == bytes([0xFF, 0xFF, 0x00, 0x0F, 0xFF, 0x00, 0x0F, 0xFF])


def test_feedback_round_trip_and_error_codes():
    lim = dmp.MOTOR_LIMITS["DM4340"]
    fb = dmp.Feedback(motor_id=3, state=0xB, position=-0.5, velocity=1.0, torque=-3.0, temp_mos=41, temp_rotor=37)
    out = dmp.unpack_feedback(dmp.pack_feedback(fb, lim), lim)
    assert (out.motor_id, out.state, out.temp_mos, out.temp_rotor) == (3, 0xB, 41.0, 37.0)
    assert out.error == "MOSFET over-temperature"
    assert abs(out.position + 0.5) < 1e-3 and abs(out.velocity - 1.0) < 1e-2 and abs(out.torque + 3.0) < 2e-2
    assert dmp.Feedback(1, dmp.STATE_ENABLED, 0, 0, 0, 0, 0).error is None
    with pytest.raises(ValueError, match="8 bytes"):
        dmp.unpack_feedback(b"\x11\x22\x33\x44", lim)


def test_status_request_layout():
    assert dmp.status_request(0x105) == bytes([0x05, 0x01, 0xCC, 0, 0, 0, 0, 0])


def test_motor_limits_are_i2rts():
    """i2rt motor_drivers/utils.py get_motor_constants (commit 5d47b358): DM4340 10 rad/s (Damiao's
    factory table says 8), DM3507 for the linear_3507 gripper."""
    assert dmp.MOTOR_LIMITS["DM4340"] == dmp.MotorLimits(12.5, 10.0, 28.0)
    assert dmp.MOTOR_LIMITS["DM4310"] == dmp.MotorLimits(12.5, 30.0, 10.0)
    assert dmp.MOTOR_LIMITS["DM3507"] == dmp.MotorLimits(12.5, 50.0, 5.0)


def test_register_frames_layout_and_reply_decoding():
    # i2rt motor_config_tool/utils.py: [id_lo, id_hi, 0x33, reg, 0, 0, 0, 0] on 0x7FF
    assert dmp.register_request(0x102, dmp.REGISTER_READ, dmp.REG_VMAX) == bytes([0x02, 0x01, 0x33, 22, 0, 0, 0, 0])
    write = dmp.register_request(3, dmp.REGISTER_WRITE, dmp.REG_TIMEOUT, dmp.encode_register(dmp.REG_TIMEOUT, 8000))
    assert write == bytes([3, 0, 0x55, 9]) + (8000).to_bytes(4, "little")
    reply = dmp.unpack_register_reply(bytes([3, 0, 0x33, 22]) + bytes.fromhex("00002041"))   # 10.0f little-endian
    assert (reply.can_id, reply.op, reply.reg, reply.value) == (3, 0x33, 22, 10.0)
    assert dmp.unpack_register_reply(write).value == 8000
    with pytest.raises(ValueError, match="not a register reply"):
        dmp.unpack_register_reply(bytes([3, 0, 0xCC, 0, 0, 0, 0, 0]))
    with pytest.raises(ValueError, match="8 bytes"):
        dmp.unpack_register_reply(bytes([3, 0, 0x33]))


def test_emulated_motor_answers_register_reads_and_writes():
    from yam_driver.emulators import DamiaoEmulator, EmulatedMotor

    emu = DamiaoEmulator("vam-reg-unit", [EmulatedMotor(2, 0x12, "DM4310")], can_timeout_s=0.4)
    try:
        def ask(op, reg, value=bytes(4)):
            _, data = emu._handle(dmp.STATUS_REQUEST_ID, dmp.register_request(2, op, reg, value))
            return dmp.unpack_register_reply(data)

        assert ask(dmp.REGISTER_READ, dmp.REG_VMAX).value == 30.0
        assert ask(dmp.REGISTER_READ, dmp.REG_TIMEOUT).value == 8000      # 400 ms in 50 us steps
        assert ask(dmp.REGISTER_READ, dmp.REG_MST_ID).value == 0x12
        assert ask(dmp.REGISTER_WRITE, dmp.REG_VMAX, dmp.encode_register(dmp.REG_VMAX, 25.0)).value == 25.0
        assert emu.motors[2].limits() == dmp.MotorLimits(12.5, 25.0, 10.0)   # it now scales with 25 rad/s
        assert emu._handle(dmp.STATUS_REQUEST_ID, dmp.register_request(2, dmp.REGISTER_READ, 99)) is None
    finally:
        emu.stop()
