"""Driver core on both emulated buses: ramp, watchdog, fault latching, shutdown paths, loop."""
import dataclasses
import os
import signal
import threading
import time

import numpy as np
import pytest

from yam_driver.bus import BusError, BusMismatchError
from yam_driver.config import load_config
from yam_driver.driver import YamDriver
from yam_driver.faults import Mode
from yam_driver.emulators import EmulatedRig

pytestmark = pytest.mark.adapter
BUSES = ["dynamixel", "damiao"]


def _cfg(bus: str, **kw):
    return dataclasses.replace(load_config(bus=bus), reply_timeout_ms=20.0, rate_hz=10.0, **kw)


class FakeClock:
    """Driver clock under test control (bus I/O still uses real time)."""

    def __init__(self):
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture(params=BUSES)
def bus_kind(request):
    return request.param


@pytest.fixture
def rig(bus_kind):
    with EmulatedRig(_cfg(bus_kind), tau_s=0.003) as r:
        yield r


def _all_torque(rig) -> list[bool]:
    return [rig.torque_enabled(n) for n in rig.config.joint_names]


def test_start_holds_present_position_then_ramps_without_a_jump(rig):
    clock = FakeClock()
    driver = YamDriver(rig.config, clock=clock)
    with driver:
        present = driver._present.copy()
        np.testing.assert_allclose(present, rig.positions(), atol=2e-3)
        assert all(_all_torque(rig))
        target = present.copy()
        target[0] += 0.3  # joint: 0.3 rad away
        target[13] = 0.9 if present[13] < 0.5 else 0.1  # gripper fraction
        driver.set_targets(target)
        ramp_step = driver._max_speed * rig.config.ramp_speed_scale * rig.config.period_s
        previous = present.copy()
        first = None
        for _ in range(200):
            report = driver.step()
            if first is None:
                first = report
            sent = np.isfinite(report.written)  # a joint whose read failed this tick is not written
            step = np.abs(report.written - previous)[sent]
            assert np.all(step <= ramp_step[sent] + 2e-3), step  # never more than one ramp step
            previous = np.where(sent, report.written, previous)
            if report.mode == Mode.RUNNING:
                break
        assert first.mode == Mode.RAMPING
        assert abs(first.written[0] - present[0]) <= ramp_step[0] + 2e-3  # leaves from where it was
        assert report.mode == Mode.RUNNING
        np.testing.assert_allclose(report.written, target, atol=2e-3)


def test_watchdog_holds_on_stale_targets_and_resumes_with_a_ramp(rig):
    clock = FakeClock()
    with YamDriver(rig.config, clock=clock) as driver:
        present = driver._present.copy()
        target = present + np.where(np.arange(14) % 7 == 6, 0.0, 0.02)
        driver.set_targets(target)
        for _ in range(20):
            report = driver.step()
        assert report.mode == Mode.RUNNING
        clock.t += rig.config.watchdog_s + 0.01  # no new target within the window
        report = driver.step()
        assert report.mode == Mode.HOLDING
        np.testing.assert_allclose(report.commanded, driver._hold, atol=1e-9)
        np.testing.assert_allclose(driver._hold, report.position, atol=1e-9)  # the measured position
        moved = target.copy()
        moved[2] += 0.2
        driver.set_targets(moved)
        report = driver.step()
        assert report.mode == Mode.RAMPING
        assert report.target_age_s == 0.0


def test_no_target_yet_means_hold_the_start_position(rig):
    with YamDriver(rig.config) as driver:
        present = driver._present.copy()
        for _ in range(3):
            report = driver.step()
        assert report.mode == Mode.RAMPING and report.target_age_s is None
        np.testing.assert_allclose(report.written, np.clip(present, driver._lower, driver._upper), atol=2e-3)


def test_dropped_replies_are_retried_without_a_fault(rig):
    with YamDriver(rig.config) as driver:
        driver.set_targets(driver._present)
        faults, motor_id = rig.faults("left_joint5")
        faults.drop(motor_id, 2)
        reports = [driver.step() for _ in range(3)]
        assert not driver.faults
        assert all(r.mode != Mode.FAULT for r in reports)
        assert sum(r.retries for r in reports) >= 1


def test_silent_motor_latches_a_named_fault_and_the_rest_holds(rig):
    with YamDriver(rig.config) as driver:
        driver.set_targets(driver._present)
        driver.step()
        faults, motor_id = rig.faults("right_joint2")
        faults.silence(motor_id)
        reports = [driver.step() for _ in range(rig.config.fault_after_failures)]
        assert reports[0].mode != Mode.FAULT and "right_joint2" in reports[0].errors
        assert reports[-1].mode == Mode.FAULT
        [fault] = driver.faults
        assert fault.joint == "right_joint2" and "ticks in a row" in fault.reason
        hold = driver._hold.copy()
        driver.set_targets(hold + 0.05)  # new targets are ignored while faulted
        report = driver.step()
        # every joint is written every tick (a Damiao motor left without frames for its 400 ms command timeout
        # disables itself): the faulted one at its last command, the rest at the hold (issue 71 row 0)
        np.testing.assert_allclose(report.written, hold, atol=2e-3)
        assert not report.read_ok[8] and np.isfinite(report.position[8])   # its last reading, marked unread
        assert rig.torque_enabled("left_joint1")


def test_corrupt_replies_every_tick_latch_a_fault(rig):
    with YamDriver(rig.config) as driver:
        faults, motor_id = rig.faults("left_joint6")
        faults.corrupt(motor_id, 1000)
        for _ in range(rig.config.fault_after_failures):
            driver.step()
        assert [f.joint for f in driver.faults] == ["left_joint6"]


def test_hardware_error_latches_at_once_and_torque_off_when_configured(bus_kind):
    with EmulatedRig(_cfg(bus_kind, on_fault="torque_off"), tau_s=0.003) as rig:
        with YamDriver(rig.config) as driver:
            driver.set_targets(driver._present)
            driver.step()
            rig.set_hardware_error("left_gripper", "overcurrent")
            report = driver.step()
            assert report.mode == Mode.FAULT
            [fault] = report.new_faults
            assert fault.joint == "left_gripper" and "hardware error" in fault.reason
            assert not any(_all_torque(rig))
            assert np.isnan(driver.step().written).all()  # torque off: nothing is written


def test_clear_faults_rereads_and_ramps_again(rig):
    with YamDriver(rig.config) as driver:
        faults, motor_id = rig.faults("left_joint1")
        faults.silence(motor_id)
        for _ in range(rig.config.fault_after_failures):
            driver.step()
        assert driver.mode == Mode.FAULT
        faults.silence(motor_id, False)
        driver.clear_faults()
        assert driver.mode == Mode.RAMPING and not driver.faults
        assert driver.step().read_ok.all()


def test_set_targets_validates_shape_and_values(rig):
    driver = YamDriver(rig.config)
    with pytest.raises(ValueError, match=r"14 values .* shape \(7,\)"):
        driver.set_targets(np.zeros(7))
    bad = np.zeros(14)
    bad[4] = np.inf
    with pytest.raises(ValueError, match="left_joint5"):
        driver.set_targets(bad)


def test_out_of_range_target_is_clipped_and_flagged(rig):
    with YamDriver(rig.config) as driver:
        target = driver._present.copy()
        target[3] = 10.0
        driver.set_targets(target)
        report = driver.step()
        assert report.clipped[3] and report.clipped.sum() == 1


def test_missing_motor_fails_start_naming_it(bus_kind):
    with EmulatedRig(_cfg(bus_kind), skip_ids={"right": [7]}) as rig:
        driver = YamDriver(rig.config)
        with pytest.raises(BusMismatchError, match="right_gripper"):
            driver.start()
        assert driver.mode == Mode.STOPPED


def test_start_refuses_joints_far_outside_limits(bus_kind):
    cfg = _cfg(bus_kind)
    with EmulatedRig(cfg) as probe:
        initial = (probe.joint_map.lower + probe.joint_map.upper) / 2
    initial[4] = probe.joint_map.upper[4] + 0.3
    with EmulatedRig(cfg, initial=initial) as rig:
        driver = YamDriver(rig.config)
        with pytest.raises(BusError, match="left_joint5"):
            driver.start()
        assert not any(_all_torque(rig))


# --- shutdown on every exit path -------------------------------------------------------
def test_normal_exit_holds_then_disables_torque(rig):
    with YamDriver(rig.config) as driver:
        driver.set_targets(driver._present + 0.01)
        for _ in range(5):
            driver.step()
    assert driver.mode == Mode.STOPPED and driver.shutdown_errors == []
    assert not any(_all_torque(rig))
    assert not driver.bus.connected


def test_exception_inside_the_with_block_still_shuts_down(rig):
    with pytest.raises(RuntimeError, match="policy crashed"):
        with YamDriver(rig.config) as driver:
            driver.step()
            raise RuntimeError("policy crashed")
    assert driver.mode == Mode.STOPPED
    assert not any(_all_torque(rig))


def test_exception_in_the_loop_shuts_down(rig):
    driver = YamDriver(rig.config)
    driver.start()
    real_read = driver.bus.read_state
    calls = {"n": 0}

    def flaky_read(deadline=None, mask=None):
        calls["n"] += 1
        if calls["n"] == 3:
            raise OSError("USB adapter unplugged")
        return real_read(deadline, mask)

    driver.bus.read_state = flaky_read
    with pytest.raises(OSError, match="unplugged"):
        driver.run(max_ticks=10, handle_signals=False)
    assert driver.mode == Mode.STOPPED
    assert not any(_all_torque(rig))


def test_sigterm_during_run_shuts_down(rig):
    driver = YamDriver(rig.config)
    driver.start()
    driver.set_targets(driver._present)
    timer = threading.Timer(0.15, os.kill, (os.getpid(), signal.SIGTERM))
    previous = signal.getsignal(signal.SIGTERM)
    timer.start()
    try:
        stats = driver.run(duration_s=5.0)
    finally:
        timer.cancel()
    assert stats.stop_reason == "SIGTERM"
    assert signal.getsignal(signal.SIGTERM) is previous  # handler restored
    assert driver.mode == Mode.STOPPED
    assert not any(_all_torque(rig))


def test_torque_stays_on_when_configured_and_the_final_hold_is_written(bus_kind):
    with EmulatedRig(_cfg(bus_kind, torque_off_on_exit=False), tau_s=0.003) as rig:
        with YamDriver(rig.config) as driver:
            driver.set_targets(driver._present + 0.02)
            for _ in range(5):
                driver.step()
        assert all(_all_torque(rig))
        time.sleep(0.03)
        before = rig.positions()
        time.sleep(0.03)
        np.testing.assert_allclose(rig.positions(), before, atol=2e-3)  # holding still


def test_run_is_deadline_paced_and_reports_rate_and_io_times(rig):
    with YamDriver(rig.config) as driver:
        driver.set_targets(driver._present)
        stats = driver.run(max_ticks=4, handle_signals=False)
    assert stats.ticks == 4 and stats.stop_reason == "max_ticks"
    assert stats.achieved_rate_hz > 0
    assert 0 < stats.io_p50_ms <= stats.io_p99_ms


def test_report_carries_velocity_while_moving(bus_kind):
    with EmulatedRig(_cfg(bus_kind), tau_s=0.3) as rig, YamDriver(rig.config) as driver:
        target = driver._present.copy()
        target[1] += 0.5
        driver.set_targets(target)
        speeds = [driver.step().velocity[1] for _ in range(4)]
        assert np.nanmax(speeds) > 0.0  # joint2 lags behind the ramp, moving in + direction
        assert np.isfinite(driver.step().effort).all()


def test_hardware_error_before_start_refuses_to_start(bus_kind):
    with EmulatedRig(_cfg(bus_kind), tau_s=0.003) as rig:
        rig.set_hardware_error("right_joint1", "overheat")
        driver = YamDriver(rig.config)
        with pytest.raises(BusError, match="right_joint1.*hardware error"):
            driver.start()
        assert not any(_all_torque(rig)) and driver.mode == Mode.STOPPED


def test_holding_keeps_damiao_motors_alive_and_a_stalled_driver_faults():
    """The motors' own CAN timeout (i2rt: 400 ms) needs a command every tick, also when holding."""
    with EmulatedRig(_cfg("damiao"), tau_s=0.003, can_timeout_s=0.3) as rig:
        driver = YamDriver(rig.config)
        driver.start()
        t_end = time.monotonic() + 0.4
        while time.monotonic() < t_end:  # no targets at all: the driver holds, every tick
            driver.step()
            time.sleep(0.01)
        assert not driver.faults and all(_all_torque(rig))
        time.sleep(0.45)  # the driver stalls longer than the motors' timeout
        report = driver.step()
        assert report.mode == Mode.FAULT
        assert len(driver.faults) == 14 and "communication loss" in driver.faults[0].reason
        driver.shutdown()


def test_a_tick_racing_shutdown_from_another_thread_never_writes_after_torque_off():
    """A MultiThreadedExecutor can run a driver tick in a pool thread while destroy_node shuts the
    driver down: ticks and shutdown take one lock, and no write reaches the bus after torque off."""
    with EmulatedRig(_cfg("damiao"), tau_s=0.003) as rig:
        driver = YamDriver(rig.config)
        driver.start()
        events: list[str] = []
        bus = driver.bus
        write, disable = bus.write_targets, bus.disable

        def logged_write(*a, **kw):
            events.append("write")
            time.sleep(0.002)                     # widen the window a racing shutdown would hit
            return write(*a, **kw)

        def logged_disable(*a, **kw):
            events.append("disable")
            out = disable(*a, **kw)
            time.sleep(0.02)                      # a slow torque-off: a tick without the lock would write now
            return out

        bus.write_targets, bus.disable = logged_write, logged_disable
        driver.set_targets(driver._present.copy())
        ticks = []

        def spin():
            while True:
                report = driver.try_step()
                if report is None:
                    return
                ticks.append(report.tick)

        t = threading.Thread(target=spin)
        t.start()
        time.sleep(0.3)
        driver.shutdown()
        t.join(5)
        assert not t.is_alive() and len(ticks) > 5
        assert driver.mode == Mode.STOPPED and driver.try_step() is None
        assert "disable" in events and "write" not in events[events.index("disable"):], events[-6:]
        assert not any(_all_torque(rig))
        with pytest.raises(RuntimeError, match="started driver"):
            driver.step()
