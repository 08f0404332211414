"""MujocoBus under the unchanged driver core and safety filter: the emulator tests' contract."""
import numpy as np
import pytest

from vam_control.safety import SafetyFilter, load_safety_config
from yam_driver.bus import BusError, BusMismatchError
from yam_driver.faults import Mode
from yam_driver.gravity import GravityModel
from vam_sim.yam_mujoco.bus import MujocoBus
from vam_sim.yam_mujoco.model import HOME
from yam_driver.arm_model import FINGER_TRAVEL

pytestmark = pytest.mark.adapter


def _home():
    return np.array(list(HOME) + [1.0] + list(HOME) + [1.0])


def test_round_trip_written_targets_are_read_back_after_settling(robot):
    bus = MujocoBus(robot.driver_cfg, robot.sim)
    with pytest.raises(BusError, match="not connected"):
        bus.write_targets(_home())
    with bus:
        start = bus.read_state()
        assert start.ok.all() and not start.errors
        np.testing.assert_allclose(start.position, _home(), atol=0.02)
        bus.write_targets(start.position)
        bus.enable()
        targets = start.position + np.where(np.arange(14) % 7 == 6, -0.4, 0.1)
        gravity = GravityModel(robot.driver_cfg)      # the driver's feed-forward: without it the arm sags
        result = bus.write_targets(targets, torque_ff=gravity.feedforward(start.position))
        assert not result.errors
        np.testing.assert_allclose(result.written, targets, atol=1e-9)  # no quantisation in simulation
        for _ in range(30):
            bus.write_targets(targets, torque_ff=gravity.feedforward(bus.read_state().position))
            robot.sim.step_control()
        np.testing.assert_allclose(bus.read_state().position, targets, atol=0.02)
        fingers = robot.sim.data.qpos[robot.sim.finger_qpos.ravel()]
        np.testing.assert_allclose(fingers, 0.6 * FINGER_TRAVEL, atol=1e-3)  # opening fraction 0.6 on the rail
    assert not bus.connected and not robot.sim.torque_enabled  # close turned torque off


def test_write_clips_to_the_driver_limits_and_refuses_non_finite(robot):
    with MujocoBus(robot.driver_cfg, robot.sim) as bus:
        targets = bus.read_state().position.copy()
        targets[0], targets[13] = 100.0, -3.0
        result = bus.write_targets(targets)
        assert result.written[0] == pytest.approx(bus.joint_map.upper[0])
        assert result.written[13] == pytest.approx(0.0)
        assert robot.sim.targets()[0] == pytest.approx(bus.joint_map.upper[0])
        targets[9] = np.nan
        with pytest.raises(ValueError, match="right_joint3"):
            bus.write_targets(targets)


def test_driver_core_runs_unchanged_and_latches_a_silent_joint(robot):
    driver = robot.driver()
    present = driver.start()
    assert driver.mode == Mode.RAMPING and robot.sim.torque_enabled
    goal = present.copy()
    goal[1] += 0.2
    for _ in range(45):
        driver.set_targets(goal)
        report = driver.step()
        robot.sim.step_control()
    assert driver.mode == Mode.RUNNING and abs(report.position[1] - goal[1]) < 0.02
    driver.bus.silent.add(3)
    for _ in range(3):
        driver.set_targets(goal)
        report = driver.step()
        robot.sim.step_control()
    assert driver.mode == Mode.FAULT and [f.joint for f in driver.faults] == ["left_joint4"]
    assert "simulated fault" in driver.faults[0].reason
    driver.shutdown()
    assert driver.mode == Mode.STOPPED and not robot.sim.torque_enabled


def test_missing_motor_at_connect_names_it(robot):
    bus = MujocoBus(robot.driver_cfg, robot.sim)
    bus.fail_connect.add(13)
    with pytest.raises(BusMismatchError, match="right_gripper"):
        bus.connect()


def test_safety_limit_violation_is_clipped_not_executed(robot):
    """A target beyond joint2's range and far from the arm goes through safety + driver: the
    simulated joint moves at most one tick's step per tick and never leaves the safe range."""
    safety = SafetyFilter(load_safety_config(), clock=robot.sim.clock)
    lo, hi, step = safety.cfg.bounds()
    driver = robot.driver()
    present = driver.start()
    safety.reset(present)
    bad = present.copy()
    bad[1], bad[8] = 5.0, -2.0  # beyond the upper limit (3.67 rad) and below the lower (0 rad)
    before = present.copy()
    for _ in range(60):
        sent = safety.filter(bad, now=robot.sim.time)
        assert "position" in sent.clipped
        assert np.all(np.abs(sent.sent - before) <= step + 1e-9)
        before = sent.sent
        driver.set_targets(sent.sent, stamp=robot.sim.time)
        driver.step()
        robot.sim.step_control()
        ctrl = robot.sim.targets()
        assert lo[1] <= ctrl[1] <= hi[1] + 1e-9 and lo[8] - 1e-9 <= ctrl[8] <= hi[8]
    pos = robot.sim.state()[0]
    assert present[1] + 0.5 < pos[1] <= hi[1] and lo[8] <= pos[8] < present[8] - 0.5  # moved toward, not past
    driver.shutdown()
