"""Damiao bus against motors as the YAM's are: their own MIT ranges (PMAX/VMAX/TMAX registers),
state read from a status request or from MIT replies, and the emulator's load model."""
import dataclasses
import time

import numpy as np
import pytest

from vam_stack.config import ConfigError
from yam_driver import damiao_protocol as dmp
from yam_driver.bus import BusMismatchError
from yam_driver.buses import make_bus
from yam_driver.config import load_config
from yam_driver.emulators import DamiaoEmulator, EmulatedMotor, EmulatedRig

pytestmark = pytest.mark.adapter


def _cfg(**kw):
    return dataclasses.replace(load_config(bus="damiao"), reply_timeout_ms=20.0, rate_hz=10.0, **kw)


def _read(bus, budget_s=0.1):
    return bus.read_state(time.monotonic() + budget_s)


# --- the motors' own ranges ----------------------------------------------------------------
def test_a_motor_whose_vmax_register_differs_from_its_type_is_refused_naming_joint_and_values():
    with EmulatedRig(_cfg(), tau_s=0.003) as rig:
        rig.set_register("left_joint2", dmp.REG_VMAX, 8.0)       # Damiao's factory VMAX for a DM4340
        bus = make_bus(rig.config)
        with pytest.raises(BusMismatchError, match=r"left_joint2: VMAX register 8\.0 rad/s, config \(DM4340\) 10\.0"):
            bus.connect()
        assert not bus.connected
        rig.set_register("left_joint2", dmp.REG_VMAX, 10.0)
        rig.set_register("right_gripper", dmp.REG_TMAX, 5.0)    # a DM3507's TMAX where the config says DM4310
        with pytest.raises(BusMismatchError,
                           match=r"right_gripper: TMAX register 5\.0 Nm, config \(DM4310\) 10\.0") as e:
            bus.connect()
        assert "left_joint2" not in str(e.value)


def test_the_table_ranges_are_what_connect_finds_on_default_motors():
    with EmulatedRig(_cfg(), tau_s=0.003) as rig:
        with make_bus(rig.config) as bus:
            assert _read(bus).ok.all()
        emu = rig.emulators["can_left"]
        assert emu.seen["register"] == 3 * 7                  # PMAX, VMAX, TMAX of each motor


def test_a_motor_that_does_not_answer_register_reads_is_refused_unless_told_to_trust_the_table():
    with EmulatedRig(_cfg(), tau_s=0.003, answer_registers=False) as rig:
        bus = make_bus(rig.config)
        with pytest.raises(BusMismatchError, match=r"did not answer a register read.*left_joint1 PMAX.*"
                                                   r"damiao_check_registers: false"):
            bus.connect()
        trusting = make_bus(dataclasses.replace(rig.config, damiao_check_registers=False))
        with trusting:
            assert _read(trusting).ok.all()


def test_a_gripper_on_a_dm3507_connects_and_scales_with_its_ranges():
    cfg = _cfg()
    arms = [dataclasses.replace(a, joints=a.joints[:-1] + [dataclasses.replace(a.joints[-1], motor="DM3507")])
            for a in cfg.arms]
    cfg = dataclasses.replace(cfg, arms=arms)
    with EmulatedRig(cfg, tau_s=0.003) as rig:
        assert rig.damiao_motor("left_gripper").limits() == dmp.MOTOR_LIMITS["DM3507"]
        with make_bus(rig.config) as bus:
            reading = _read(bus)
            assert reading.ok.all(), reading.errors
            np.testing.assert_allclose(reading.position, rig.positions(), atol=2e-3)


# --- state from a status request or from MIT replies ------------------------------------------
def test_config_refuses_an_unknown_state_read_quoting_it():
    with pytest.raises(ConfigError, match=r"damiao_state_read must be one of .*'mit_reply'.* got 'mit'"):
        _cfg(damiao_state_read="mit")


@pytest.mark.parametrize("mode", ["status_request", "mit_reply"])
def test_both_state_reads_round_trip(mode):
    with EmulatedRig(_cfg(damiao_state_read=mode), tau_s=0.003,
                     answer_status_request=mode == "status_request") as rig:
        with make_bus(rig.config) as bus:
            start = _read(bus)
            assert start.ok.all(), start.errors
            np.testing.assert_allclose(start.position, rig.positions(), atol=2e-3)
            bus.write_targets(start.position)
            bus.enable()
            targets = start.position + np.where(np.arange(14) % 7 == 6, -0.2, 0.1)
            result = bus.write_targets(targets)
            assert not result.errors
            t_end = time.monotonic() + 1.0
            while time.monotonic() < t_end:
                reading = _read(bus)
                if reading.ok.all() and np.allclose(reading.position, result.written, atol=2e-3):
                    break
                time.sleep(0.005)
            np.testing.assert_allclose(reading.position, result.written, atol=2e-3)
            assert not reading.torque_off.any()
        seen = rig.emulators["can_left"].seen
        if mode == "mit_reply":
            assert seen["status"] == 0 and seen["mit"] > 10
        else:
            assert seen["status"] > 10


def test_mit_reply_reads_resend_the_last_command_and_before_any_write_command_no_torque():
    with EmulatedRig(_cfg(damiao_state_read="mit_reply"), tau_s=0.003) as rig:
        with make_bus(rig.config) as bus:
            before = rig.positions()
            _read(bus)
            first = rig.damiao_motor("left_joint3").last_mit
            lim = dmp.MOTOR_LIMITS["DM4340"]
            assert (first.kp, first.kd) == (0.0, 0.0)
            assert abs(first.torque) <= lim.t_max / 4095 + 1e-12   # 0 Nm to within half a step (12 bits
            #   over +-TMAX have no exact zero: 0.007 Nm on a DM4340)
            assert abs(first.position - rig.motor_position("left_joint3")) < 1e-3   # at the present position
            np.testing.assert_allclose(rig.positions(), before, atol=1e-9)           # nothing moved
            start = _read(bus).position
            bus.write_targets(start)
            bus.enable()
            ff = np.zeros(14)
            ff[2] = -1.5
            bus.write_targets(start + 0.05, torque_ff=ff)
            sent = rig.damiao_motor("left_joint3").last_mit
            for _ in range(3):
                assert _read(bus).ok.all()
                again = rig.damiao_motor("left_joint3").last_mit
                assert again == sent                           # the same frame, re-sent
            assert abs(sent.kp - 80.0) < 0.2 and abs(sent.kd - 5.0) < 0.01 and abs(sent.torque + 1.5) < 0.02
            m = rig.damiao_motor("left_joint3")
            assert abs(m.target - sent.position) < 1e-9 and abs(m.t_ff + 1.5) < 0.02


def test_firmware_ignoring_status_requests_is_refused_at_connect_naming_the_setting():
    with EmulatedRig(_cfg(), tau_s=0.003, answer_status_request=False) as rig:
        bus = make_bus(rig.config)
        with pytest.raises(BusMismatchError, match=r"answer an MIT frame but not the status request.*"
                                                   r"left_joint1.*damiao_state_read: mit_reply"):
            bus.connect()
        assert not bus.connected
        assert not any(rig.torque_enabled(n) for n in rig.config.joint_names)
        assert rig.emulators["can_left"].seen["mit"] >= 7     # the probe that found it out


def test_a_motor_only_slow_to_answer_status_requests_is_not_taken_for_firmware_ignoring_them():
    """Its replies to every status request round at connect are lost (a loaded host, a busy bus);
    the MIT probe finds it alive, and asked once more it answers: connect goes on."""
    cfg = _cfg()
    with EmulatedRig(cfg, tau_s=0.003) as rig:
        faults, motor_id = rig.faults("right_joint4")
        faults.drop(motor_id, cfg.connect_retries)
        with make_bus(rig.config) as bus:
            assert _read(bus).ok.all()
        assert faults.dropped == cfg.connect_retries


# --- load model --------------------------------------------------------------------------------
def _mit(emu, can_id, position, kp, kd, t_ff, limits):
    return emu._handle(can_id, dmp.pack_mit(dmp.MitCommand(position, 0.0, kp, kd, t_ff), limits))


def _settle(emu, can_id, position, kp, kd, t_ff, limits, seconds=0.2):
    t_end = time.monotonic() + seconds
    while time.monotonic() < t_end:
        _mit(emu, can_id, position, kp, kd, t_ff, limits)
        time.sleep(0.005)
    _, reply = _mit(emu, can_id, position, kp, kd, t_ff, limits)
    return dmp.unpack_feedback(reply, limits)


def test_emulated_load_settles_where_stiffness_and_feed_forward_balance_it():
    lim = dmp.MOTOR_LIMITS["DM4340"]
    emu = DamiaoEmulator("vam-load-unit", [EmulatedMotor(1, 0x11, position=0.3)], tau_s=0.01,
                         load_fn=lambda q: {1: 2.0})     # 2 Nm pushing the angle positive, not started: no thread
    try:
        emu._handle(1, dmp.CMD_ENABLE)
        fb = _settle(emu, 1, 0.3, 80.0, 1.0, 0.0, lim)
        assert abs(emu.motor(1).position - (0.3 + 2.0 / 80.0)) < 1e-3   # 2/80 rad off the target
        assert abs(fb.torque + 2.0) < 0.05                                 # kp*(target - q) holds the load
        fb = _settle(emu, 1, 0.3, 80.0, 1.0, -2.0, lim)
        assert abs(emu.motor(1).position - 0.3) < 1e-3                     # t_ff = -load: on target
        assert abs(fb.torque + 2.0) < 0.05
    finally:
        emu.stop()


def test_without_a_load_model_feed_forward_moves_nothing():
    lim = dmp.MOTOR_LIMITS["DM4340"]
    emu = DamiaoEmulator("vam-noload-unit", [EmulatedMotor(1, 0x11, position=0.3)], tau_s=0.01)
    try:
        emu._handle(1, dmp.CMD_ENABLE)
        fb = _settle(emu, 1, 0.3, 80.0, 1.0, -2.0, lim)
        assert abs(emu.motor(1).position - 0.3) < 4e-4 and abs(fb.torque + 2.0) < 0.05   # 16-bit target only
    finally:
        emu.stop()


def test_rig_load_in_driver_units_is_cancelled_by_the_bus_feed_forward():
    """The rig's load_fn speaks joint space (driver units in, joint Nm out), like torque_ff."""
    cfg = _cfg()
    j2 = cfg.joint_names.index("left_joint2")
    seen = []

    def load(q):
        seen.append(q.copy())
        tau = np.zeros(14)
        tau[j2] = -3.0                       # gravity pulls left_joint2 negative
        return tau

    with EmulatedRig(cfg, tau_s=0.005, load_fn=load) as rig:
        with make_bus(rig.config) as bus:
            start = _read(bus).position
            bus.write_targets(start)
            bus.enable()
            for ff, expected in ((np.zeros(14), -3.0 / 80.0), (-np.array(load(start)), 0.0)):
                t_end = time.monotonic() + 0.3
                while time.monotonic() < t_end:
                    bus.write_targets(start, torque_ff=ff)
                    time.sleep(0.01)
                reading = _read(bus)
                moved = reading.position[j2] - start[j2]
                assert abs(moved - expected) < 1.5e-3, (ff[j2], moved)
                others = np.arange(14) != j2
                np.testing.assert_allclose(reading.position[others], start[others], atol=2e-3)
        assert seen and seen[-1].shape == (14,) and abs(seen[-1][j2] - start[j2]) < 0.05
