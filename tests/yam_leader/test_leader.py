"""The leader-arm teleoperator's core on an emulated Dynamixel leader (the real SDK over a pty)."""
import numpy as np
import pytest

from vam_stack.config import ConfigError
from vam_control.safety import SafetyFilter, load_safety_config
from yam_driver.buses import make_bus
from yam_driver.emulators import EmulatedRig
from vam_stack.paths import config_dir
from yam_leader.leader import LeaderConfig, LeaderTeleop
from yam_leader.mapping import load_leader

pytestmark = pytest.mark.unit

POSE = np.array([0.1, 1.0, 1.2, 0.0, 0.2, 0.0, 0.5, -0.1, 1.1, 1.0, 0.1, -0.2, 0.3, 0.9])


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


@pytest.fixture
def leader():
    _, cfg = load_leader(config_dir() / "yam_leader.yaml")
    with EmulatedRig(cfg, initial=POSE) as rig:
        bus = make_bus(rig.config)
        bus.connect()
        try:
            yield rig, bus
        finally:
            bus.close()


def _teleop(clock):
    safety = SafetyFilter(load_safety_config(), clock=clock)
    names = tuple(load_leader(config_dir() / "yam_leader.yaml")[1].joint_names)
    return LeaderTeleop(LeaderConfig(), safety, names)


def test_the_leader_is_followed_through_the_safety_filter_and_never_powered(leader):
    rig, bus = leader
    clock = Clock()
    tele = _teleop(clock)
    r = bus.read_state()
    assert r.ok.all()
    np.testing.assert_allclose(r.position, POSE, atol=0.003)          # the reading is in the follower's units
    assert tele.tick(r.position, r.ok, clock.t, clock.t).command is None  # nothing before engage
    ok, msg = tele.engage(r.position, POSE + 0.05)
    assert ok, msg
    # a hand moves left joint 1 by 0.03 rad a period: each reading becomes the raw command, and the target
    # follows it within the filter's per-tick step (2 rad/s at 30 Hz = 0.067 rad)
    for k in range(1, 6):
        rig.move_by_hand("left_joint1", POSE[0] + 0.03 * k)
        clock.t += 1 / 30
        r = bus.read_state()
        t = tele.tick(r.position, r.ok, clock.t, clock.t)
        assert t.state == "engaged" and t.command is not None
        assert t.command[0] == pytest.approx(POSE[0] + 0.03 * k, abs=0.003)
    assert abs(t.target[0] - t.command[0]) < 0.07                  # the filter walked from the follower's pose
    assert not any(rig.torque_enabled(n) for n in ("left_joint1", "right_gripper"))   # the leader stays unpowered


def test_engage_refuses_a_leader_far_from_the_follower(leader):
    rig, bus = leader
    tele = _teleop(Clock())
    far = POSE.copy()
    far[9] += 0.4
    ok, msg = tele.engage(bus.read_state().position, far)
    assert not ok and "right_joint3" in msg and tele.state == "idle"


def test_a_reading_that_jumps_disengages_and_names_the_joint(leader):
    rig, bus = leader
    clock = Clock()
    tele = _teleop(clock)
    assert tele.engage(bus.read_state().position, POSE)[0]
    rig.glitch("right_joint2", 0.8)                                 # one reply 0.8 rad off: not a hand
    clock.t += 1 / 30
    r = bus.read_state()
    t = tele.tick(r.position, r.ok, clock.t, clock.t)
    assert t.target is None and t.state == "fault" and "right_joint2" in t.reason
    clock.t += 1 / 30
    r = bus.read_state()                                            # good again, but a fault stays until re-engaged
    assert tele.tick(r.position, r.ok, clock.t, clock.t).target is None


def test_failed_reads_disengage_after_the_configured_count():
    clock = Clock()
    tele = _teleop(clock)
    assert tele.engage(POSE, POSE)[0]
    ok = np.ones(14, bool)
    ok[4] = False
    for k in range(3):
        clock.t += 1 / 30
        t = tele.tick(POSE, ok, clock.t, clock.t)
        assert t.target is None
    assert t.state == "fault" and "3 failed" in t.reason and "left_joint5" in t.reason


@pytest.mark.parametrize("field,value", [("engage_tolerance_rad", 0.0), ("engage_tolerance_rad", 2.0),
                                         ("max_jump_rad", float("inf")), ("max_failed_reads", 0), ("rate_hz", 0.0)])
def test_config_values_that_would_switch_protection_off_are_errors(field, value):
    with pytest.raises(ConfigError, match=field):
        LeaderConfig(**{field: value})


def test_the_rate_must_be_the_safety_filters():
    with pytest.raises(ValueError, match="rate_hz"):
        LeaderTeleop(LeaderConfig(rate_hz=50.0), SafetyFilter(load_safety_config()), tuple(f"j{i}" for i in range(14)))
