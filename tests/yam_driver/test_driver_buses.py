"""Both buses against their emulators: the real dynamixel_sdk on a pty, python-can's virtual bus."""
import dataclasses
import time

import numpy as np
import pytest

from yam_driver.bus import BusMismatchError
from yam_driver.buses import make_bus
from yam_driver.config import load_config
from yam_driver.emulators import EmulatedRig

pytestmark = pytest.mark.adapter
BUSES = ["dynamixel", "damiao"]


def _cfg(bus: str, **kw):
    return dataclasses.replace(load_config(bus=bus), reply_timeout_ms=20.0, rate_hz=10.0, **kw)


@pytest.fixture(params=BUSES)
def rig(request):
    with EmulatedRig(_cfg(request.param), tau_s=0.003) as r:
        yield r


@pytest.fixture
def bus(rig):
    b = make_bus(rig.config)
    b.connect()
    yield b
    b.close()


def _read(bus, budget_s=0.1):
    return bus.read_state(time.monotonic() + budget_s)


def _settle(bus, written, timeout_s=1.0):
    t_end = time.monotonic() + timeout_s
    while True:
        reading = _read(bus)
        if reading.ok.all() and np.allclose(reading.position, written, atol=2e-3) or time.monotonic() > t_end:
            return reading
        time.sleep(0.005)


def test_round_trip_targets_written_equal_targets_read_after_the_lag(rig, bus):
    start = _read(bus)
    assert start.ok.all(), start.errors
    np.testing.assert_allclose(start.position, rig.positions(), atol=2e-3)
    bus.write_targets(start.position)
    bus.enable()
    targets = start.position + np.where(np.arange(14) % 7 == 6, -0.2, 0.1)
    result = bus.write_targets(targets)
    assert not result.errors
    np.testing.assert_allclose(result.written, targets, atol=1e-3)  # only quantisation differs
    reading = _settle(bus, result.written)
    np.testing.assert_allclose(reading.position, result.written, atol=2e-3)
    np.testing.assert_allclose(rig.positions(), result.written, atol=2e-3)


def test_write_clips_to_limits_and_reports_what_was_sent(bus):
    reading = _read(bus)
    targets = reading.position.copy()
    targets[0] = 100.0
    targets[13] = -3.0  # gripper fraction below 0
    result = bus.write_targets(targets)
    assert abs(result.written[0] - bus.joint_map.upper[0]) < 2e-3
    assert abs(result.written[13] - 0.0) < 2e-3


def test_non_finite_target_is_refused_naming_the_joint(bus):
    targets = _read(bus).position.copy()
    targets[9] = np.nan
    with pytest.raises(ValueError, match="right_joint3"):
        bus.write_targets(targets)


def test_dropped_reply_is_retried_within_the_budget(rig, bus):
    faults, motor_id = rig.faults("left_joint3")
    faults.drop(motor_id, 1)
    reading = _read(bus)
    assert reading.ok.all(), reading.errors
    assert reading.retries >= 1 and faults.dropped == 1


def test_corrupt_reply_is_retried_within_the_budget(rig, bus):
    faults, motor_id = rig.faults("right_joint5")
    faults.corrupt(motor_id, 1)
    reading = _read(bus)
    assert reading.ok.all(), reading.errors
    assert reading.retries >= 1 and faults.corrupted == 1


def test_silent_motor_is_reported_by_joint_others_still_read(rig, bus):
    faults, motor_id = rig.faults("right_gripper")
    faults.silence(motor_id)
    reading = _read(bus, 0.05)
    assert not reading.ok[13]
    assert reading.ok[:13].all(), reading.errors
    assert "reply" in reading.errors[13]


def test_one_silent_servo_does_not_starve_the_others_on_its_port(rig, bus):
    faults, motor_id = rig.faults("left_joint2")
    faults.silence(motor_id)
    reading = _read(bus, 0.1)
    assert not reading.ok[1]
    assert reading.ok[np.arange(14) != 1].all(), reading.errors


def test_masked_joints_are_not_requested(rig, bus):
    mask = np.ones(14, bool)
    mask[5] = False
    faults, motor_id = rig.faults("left_joint6")
    faults.silence(motor_id)
    reading = bus.read_state(time.monotonic() + 0.1, mask=mask)
    assert reading.ok[mask].all() and not reading.ok[5] and 5 not in reading.errors


def test_delayed_reply_inside_the_timeout_is_accepted(rig, bus):
    faults, motor_id = rig.faults("left_joint1")
    faults.delay(motor_id, 0.002)
    reading = _read(bus)
    assert reading.ok.all(), reading.errors


def test_reply_delayed_past_the_budget_is_reported(rig, bus):
    faults, motor_id = rig.faults("left_joint2")
    faults.delay(motor_id, 0.08)
    reading = _read(bus, 0.04)
    assert not reading.ok[1]
    faults.delay(motor_id, 0.0)


def test_hardware_error_flag_is_reported_with_its_reason(rig, bus):
    rig.set_hardware_error("left_joint4", "overheat")
    reading = _read(bus)
    assert reading.ok[3] and reading.hardware_error[3]
    assert reading.hardware_error.sum() == 1
    expected = "overheating" if rig.config.bus == "dynamixel" else "coil over-temperature"
    assert expected in reading.errors[3]


def test_torque_enable_and_disable_reach_every_motor(rig, bus):
    bus.write_targets(_read(bus).position)
    bus.enable()
    assert all(rig.torque_enabled(n) for n in rig.config.joint_names)
    assert bus.disable() == {}
    assert not any(rig.torque_enabled(n) for n in rig.config.joint_names)


@pytest.mark.parametrize("bus_kind", BUSES)
def test_missing_id_fails_at_connect_naming_the_joint(bus_kind):
    with EmulatedRig(_cfg(bus_kind), skip_ids={"left": [3]}) as rig:
        b = make_bus(rig.config)
        with pytest.raises(BusMismatchError, match=r"left_joint3.*(id 3|0x3)"):
            b.connect()
        assert not b.connected


def test_dynamixel_model_mismatch_fails_at_connect():
    cfg = _cfg("dynamixel")
    arm = cfg.arms[1]
    joints = list(arm.joints)
    joints[0] = dataclasses.replace(joints[0], motor="XL330-M288")
    cfg = dataclasses.replace(cfg, arms=[cfg.arms[0], dataclasses.replace(arm, joints=joints)])
    with EmulatedRig(cfg) as rig:
        with pytest.raises(BusMismatchError, match=r"right_joint1.*model number 1020.*XL330-M288"):
            make_bus(rig.config).connect()


@pytest.mark.parametrize("bus_kind", BUSES)
def test_both_arms_on_one_shared_port(bus_kind):
    cfg = _cfg(bus_kind)
    left, right = cfg.arms
    right = dataclasses.replace(right, port=left.port,
                                joints=[dataclasses.replace(j, id=j.id + 7) for j in right.joints])
    cfg = dataclasses.replace(cfg, arms=[left, right])
    with EmulatedRig(cfg, tau_s=0.003) as rig:
        assert len(rig.emulators) == 1
        with make_bus(rig.config) as b:
            reading = _read(b)
            assert reading.ok.all(), reading.errors
            np.testing.assert_allclose(reading.position, rig.positions(), atol=2e-3)


def test_sdk_and_emulator_agree_on_byte_stuffing():
    """A value containing FF FF FD is stuffed by the SDK on write and by the emulator on reply."""
    import dynamixel_sdk as sdk

    from yam_driver.dynamixel_bus import TimedPortHandler
    from yam_driver.emulators import DynamixelEmulator

    with DynamixelEmulator([5]) as emu:
        port = TimedPortHandler(emu.port_name, reply_timeout_ms=20.0)
        assert port.openPort()
        ph = sdk.PacketHandler(2.0)
        try:
            value = int.from_bytes(b"\x00\xff\xff\xfd", "little")
            assert ph.write4ByteTxRx(port, 5, 200, value) == (sdk.COMM_SUCCESS, 0)
            assert emu.servos[5].table[200:204] == b"\x00\xff\xff\xfd"
            assert ph.read4ByteTxRx(port, 5, 200) == (value, sdk.COMM_SUCCESS, 0)
        finally:
            port.closePort()
