"""Restarting a YAM on Damiao motors after the process commanding them died with torque on.

Each motor's command timeout (i2rt sets 400 ms) disables it and latches communication loss
(state 0xD) when commands stop; i2rt's `motor_on` clears that with FF..FB and enables again
(i2rt/motor_drivers/dm_driver.py, commit 5d47b358bafb30c65e397f2ece506550a0db4594). The bus
does the same at connect, at enable and at the driver's fault reset; every other error code
is still refused, named with its code.
"""
import dataclasses
import logging
import time

import numpy as np
import pytest

from yam_driver import damiao_protocol as dmp
from yam_driver.bus import BusError
from yam_driver.buses import make_bus
from yam_driver.config import load_config
from yam_driver.driver import YamDriver
from yam_driver.faults import Mode
from yam_driver.emulators import DamiaoEmulator, EmulatedMotor, EmulatedRig

pytestmark = pytest.mark.adapter
BUS_LOG = "yam_driver.damiao_bus"


def _cfg(**kw):
    return dataclasses.replace(load_config(bus="damiao"), **kw)


def _paced(driver, ticks: int, until=None, targets=None) -> list:
    """`ticks` driver steps at the configured rate (or fewer, once `until(report)` holds), with
    `targets` sent fresh before each (a policy streaming them) when given."""
    reports = []
    t_next = time.monotonic()
    for _ in range(ticks):
        if targets is not None:
            driver.set_targets(targets)
        reports.append(driver.step())
        if until is not None and until(reports[-1]):
            break
        t_next += driver.config.period_s
        time.sleep(max(0.0, t_next - time.monotonic()))
    return reports


def _cleared_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == BUS_LOG and "communication loss" in r.getMessage()]


def test_a_new_driver_restarts_an_arm_a_killed_driver_left_in_communication_loss(caplog):
    """Emulates `kill -9` of the driver process while the arm holds torque: the process gets no
    shutdown, sends no torque off, its CAN sockets just close, so the motors get no more
    frames. (In-process: python-can's cross-process interface, udp_multicast, needs msgpack,
    which this environment does not have; the virtual bus lives in one process.) After 0.6 s
    every motor's 400 ms timeout has latched communication loss (0xD) and disabled it, and the
    unpowered arm sagged. A new driver on the same motors must connect (clearing 0xD, one log
    line naming the motors), enable without moving anything, start its commands at the measured
    pose and ramp to a target. (Reply timeout and fault count are loosened so that emulator
    threads starved on a loaded 2-core host do not fault the first driver: not what is tested.)"""
    cfg = _cfg(reply_timeout_ms=20.0, fault_after_failures=6)
    with EmulatedRig(cfg, tau_s=0.02, can_timeout_s=0.4) as rig:
        names = rig.config.joint_names
        old = YamDriver(rig.config)
        old.start()
        away = old._present + np.where(np.arange(14) % 7 == 6, -0.1, 0.1)
        reports = _paced(old, 30, targets=away)     # 1 s at 30 Hz: the arm moved, torque on
        assert reports[-1].mode in (Mode.RAMPING, Mode.RUNNING) and not old.faults
        assert all(rig.torque_enabled(n) for n in names)

        old.bus.close(disable_torque=False)         # the kill: no more frames, torque left on
        time.sleep(0.6)
        for n in names:
            m = rig.damiao_motor(n)
            assert (m.error, m.enabled) == (dmp.STATE_COMM_LOSS, False), n
        for n in ("left_joint2", "right_joint2"):   # limp, the arm sagged away from the last command
            rig.move_by_hand(n, rig.positions()[names.index(n)] - 0.15)
        measured = rig.positions()

        new = YamDriver(rig.config)
        caplog.clear()
        with caplog.at_level(logging.INFO, logger=BUS_LOG):
            present = new.connect()
        lines = _cleared_lines(caplog)
        assert len(lines) == 1 and all(n in lines[0] for n in names), lines
        np.testing.assert_allclose(present, measured, atol=2e-3)
        for n in names:                              # FB leaves the motor disabled with error 0
            m = rig.damiao_motor(n)
            assert (m.error, m.enabled) == (0, False), n

        written: list[np.ndarray] = []
        write = new.bus.write_targets

        def spy(targets, *args, **kwargs):
            result = write(targets, *args, **kwargs)
            written.append(result.written.copy())
            return result

        new.bus.write_targets = spy
        try:
            new.enable()
            assert all(rig.torque_enabled(n) for n in names)
            np.testing.assert_allclose(rig.positions(), measured, atol=2e-3)   # torque on moved nothing
            np.testing.assert_allclose(written[0], present, atol=1e-3)          # goal before torque on = measured
            goal = present + np.where(np.arange(14) % 7 == 6, 0.05, -0.12)
            reports = _paced(new, 120, until=lambda r: r.mode == Mode.RUNNING, targets=goal)
            ramp_step = new._max_speed * cfg.ramp_speed_scale * cfg.period_s
            first = reports[0].written
            assert np.all(np.abs(first - present) <= ramp_step + 1e-3), first - present   # no jump
            assert reports[-1].mode == Mode.RUNNING and not new.faults
            _paced(new, 15, targets=goal)
            np.testing.assert_allclose(rig.positions(), goal, atol=5e-3)
            assert len(_cleared_lines(caplog)) == 1            # enable found nothing more to clear
        finally:
            new.shutdown()


def test_over_temperature_at_connect_is_still_refused_naming_the_code():
    with EmulatedRig(_cfg(), can_timeout_s=0.4) as rig:
        rig.set_hardware_error("right_joint1", "overheat")
        driver = YamDriver(rig.config)
        with pytest.raises(BusError, match=r"right_joint1: hardware error coil over-temperature \(error code 0xc\)"):
            driver.connect()
        assert driver.mode == Mode.STOPPED
        assert rig.damiao_motor("right_joint1").error == 0xC          # never cleared behind the operator's back
        assert rig.emulators["can_right"].seen["clear"] == 0


def test_enable_clears_communication_loss_and_still_refuses_other_errors(caplog):
    """The clear_faults path: torque was on, commands stopped for longer than the timeout."""
    with EmulatedRig(_cfg(reply_timeout_ms=20.0), tau_s=0.003, can_timeout_s=0.3) as rig:
        bus = make_bus(rig.config)
        bus.connect()
        try:
            bus.write_targets(bus.read_state(time.monotonic() + 0.1).position)
            bus.enable()
            time.sleep(0.4)
            reading = bus.read_state(time.monotonic() + 0.1)
            assert reading.hardware_error.all() and "communication loss (error code 0xd)" in reading.errors[0]
            with caplog.at_level(logging.INFO, logger=BUS_LOG):
                bus.enable()
            assert len(_cleared_lines(caplog)) == 1
            assert all(rig.torque_enabled(n) for n in rig.config.joint_names)
            rig.set_hardware_error("left_joint5", "overcurrent")
            with pytest.raises(BusError, match=r"left_joint5.*over-current \(error code 0xa\)"):
                bus.enable()
        finally:
            bus.close()


def test_fault_reset_after_a_stall_clears_communication_loss_and_ramps_again(caplog):
    """A driver that stalled past the motors' timeout faults all 14 joints (communication loss);
    the operator's `clear_faults()` must bring the arm back without a power cycle."""
    with EmulatedRig(_cfg(reply_timeout_ms=20.0), tau_s=0.003, can_timeout_s=0.3) as rig:
        driver = YamDriver(rig.config)
        driver.start()
        try:
            _paced(driver, 5)
            time.sleep(0.4)                                   # the stall
            assert driver.step().mode == Mode.FAULT and len(driver.faults) == 14
            with caplog.at_level(logging.INFO, logger=BUS_LOG):
                driver.clear_faults()
            assert driver.mode == Mode.RAMPING and not driver.faults
            assert len(_cleared_lines(caplog)) == 1
            assert all(rig.torque_enabled(n) for n in rig.config.joint_names)
            goal = driver._present + 0.05 * (np.arange(14) % 7 != 6)
            reports = _paced(driver, 60, until=lambda r: r.mode == Mode.RUNNING, targets=goal)
            assert reports[-1].mode == Mode.RUNNING
        finally:
            driver.shutdown()


def test_emulated_motor_latches_communication_loss_and_clear_error_leaves_it_disabled():
    with DamiaoEmulator("vam-restart-unit", [EmulatedMotor(1, 0x11)], can_timeout_s=0.05) as emu:
        assert emu.motors[1].registers[dmp.REG_TIMEOUT] == 1000           # 50 us steps
        emu._handle(1, dmp.CMD_ENABLE)
        time.sleep(0.08)
        assert (emu.motor(1).error, emu.motor(1).enabled) == (0xD, False)
        _, reply = emu._handle(1, dmp.CMD_CLEAR_ERROR)
        fb = dmp.unpack_feedback(reply, dmp.MOTOR_LIMITS["DM4340"])
        assert (fb.state, emu.motor(1).enabled) == (dmp.STATE_DISABLED, False)
        _, reply = emu._handle(1, dmp.CMD_ENABLE)
        assert dmp.unpack_feedback(reply, dmp.MOTOR_LIMITS["DM4340"]).state == dmp.STATE_ENABLED
