"""The leader's joint mapping (build, signs, offsets, trigger ends) and its calibration, on emulated
leaders: Dynamixel (GELLO's build, the real SDK over a pty) and Damiao (i2rt's signs, virtual CAN)."""
from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pytest
import yaml

from vam_stack.config import ConfigError, load_yaml
from vam_stack.paths import config_dir
from vam_control.safety import SafetyFilter, load_safety_config
from yam_driver.buses import make_bus
from yam_driver.emulators import EmulatedRig
from yam_leader.calibration import calibrate, median_servo_angles, write_leader
from yam_leader.leader import LeaderConfig, LeaderTeleop
from yam_leader.mapping import BUILDS, compose, load_leader

pytestmark = pytest.mark.unit

SHIPPED = config_dir() / "yam_leader.yaml"
# a follower pose inside every joint's range (left joint1..6, gripper, right joint1..6, gripper)
POSE = np.array([0.4, 1.1, 0.9, -0.3, 0.5, -0.6, 0.8, -0.5, 0.7, 1.3, 0.2, -0.4, 0.9, 0.3])
HOME = np.array([0.0] * 6 + [1.0] + [0.0] * 6 + [1.0])          # the driver files' rest pose, grippers open
ARM = [i for i in range(14) if i % 7 != 6]
OLD = (-0.2565, -1.825, -1.565, 0.0, 0.0, 0.0)     # the offsets of the file before signs (every joint +1)


def _data() -> dict:
    return load_yaml(SHIPPED)


def _write(tmp_path, data, name="leader.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _with_offsets(mapping, shift):
    """The same build with every arm's offsets moved by `shift` (6,): a leader whose horns sit elsewhere."""
    arms = [dataclasses.replace(a, offsets=tuple(np.add(a.offsets, shift)), gripper_released=0.3,
                                gripper_squeezed=1.25) for a in mapping.arms]
    return dataclasses.replace(mapping, arms=arms)


def _read(bus) -> np.ndarray:
    return bus.joint_map.to_driver(median_servo_angles(bus, reads=3))


# --- the shipped file and its checks -----------------------------------------------------------

def test_the_shipped_leader_is_gellos_yam_build_composed_into_its_bus():
    mapping, cfg = load_leader(SHIPPED)
    assert mapping.build == "gello_yam" and cfg.bus == BUILDS["gello_yam"].bus == "dynamixel"
    for arm in cfg.arms:
        assert [j.direction for j in arm.joints] == [1, -1, -1, -1, 1, 1, 1]   # GELLO's signs, the gripper +1
        assert (arm.gripper_open, arm.gripper_closed) == (0.0, 1.0)              # released opens the gripper
    assert cfg.joint_names[:7] == ["left_joint1", "left_joint2", "left_joint3", "left_joint4", "left_joint5",
                                   "left_joint6", "left_gripper"]
    assert BUILDS["i2rt_passive"].signs == (1, -1, 1, -1, 1, 1)


def _set(data, key, value, arm=0):
    data["yam_leader"]["arms"][arm][key] = value
    return data


def _unsigned(data, build):
    """`build` with both arms' signs left to the build."""
    data["yam_leader"]["build"] = build
    for arm in data["yam_leader"]["arms"]:
        arm.pop("signs")
    return data


@pytest.mark.parametrize("edit, match", [
    (lambda d: _set(d, "signs", [1, 0.5, -1, -1, 1, 1]), r"left'?: signs\[1\] \(joint2\) must be 1 or -1, got 0.5"),
    (lambda d: _set(d, "signs", [1, -1, -1, 1, 1, 1]), r"signs \[1, -1, -1, 1, 1, 1\] differ from build gello_yam's"),
    (lambda d: _set(d, "signs", [1, -1, -1, -1, 1]), r"signs needs 6 values .*got 5: \[1, -1, -1, -1, 1\]"),
    (lambda d: _set(d, "signs", [1, -1, True, -1, 1, 1]), r"expected a number, got True"),
    (lambda d: _set(d, "offsets", [0.0, 1.8, float("inf"), 0.0, 0.0, 0.0]),
     r"offsets\[2\] \(joint3\) must be finite, got inf"),
    (lambda d: _set(d, "offsets", [0.0] * 7), r"offsets needs 6 values .*got 7"),
    (lambda d: _set(d, "gripper_squeezed", 0.0), r"gripper_released and gripper_squeezed are equal \(0.0\)"),
    (lambda d: d["yam_leader"].pop("build") and d, r"missing required field 'build'"),
    (lambda d: d["yam_leader"].update(build="gello") or d, r"build must be one of \['gello_yam', 'i2rt_passive', "
                                                           r"'custom'\] .*got 'gello'"),
    (lambda d: _unsigned(d, "i2rt_passive"),
     r"build i2rt_passive is read on a damiao bus, the leader's yam_driver section says bus: dynamixel"),
    (lambda d: d["yam_leader"].update(build="custom") or _set(d, "signs", None, 1),
     r"'right': build custom needs its signs"),
    (lambda d: d["yam_driver"]["arms"][1].update(gripper_open=0.0) or d, r"arm 'right' sets \['gripper_open'\]: "
                                                                         r"a leader's signs, offsets"),
    (lambda d: d.pop("yam_leader") and d, r"missing section 'yam_leader'"),
])
def test_a_bad_mapping_is_refused_at_load_quoting_the_value(tmp_path, edit, match):
    data = copy.deepcopy(_data())
    data["yam_driver"]["arms"][1]["joints"] = copy.deepcopy(data["yam_driver"]["arms"][1]["joints"])
    with pytest.raises(ConfigError, match=match):
        load_leader(_write(tmp_path, edit(data)))


def test_a_direction_or_offset_in_the_bus_section_is_refused(tmp_path):
    data = _data()
    data["yam_driver"]["arms"][0]["joints"][2]["direction"] = -1       # (the YAML alias: both arms)
    with pytest.raises(ConfigError, match=r"sets \['joint3.direction'\]"):
        load_leader(_write(tmp_path, data))


def test_offsets_that_put_a_joint_across_the_servos_turn_are_refused_naming_it(tmp_path):
    data = _set(_data(), "offsets", [-0.2565, 0.0, 1.565, 0.0, 0.0, 0.0])   # joint2 [0, 3.65] from servo 0 to -3.65
    with pytest.raises(ConfigError, match="left_joint2: motor range .* leaves the single-turn range"):
        load_leader(_write(tmp_path, data))


# --- each build's signs, read through an emulated leader of that build --------------------------

def _i2rt_passive_bus() -> dict:
    """The leader's bus as i2rt's passive leader: Damiao motors over CAN (DM4310 stands in for its
    DM3507 wrists, which yam_driver's schema does not know), ids 1..7."""
    from yam_driver.config import DriverConfig

    raw = copy.deepcopy(_data()["yam_driver"])
    raw.update(bus="damiao")
    raw.pop("baudrate")
    if "gravity_factor" in {f.name for f in dataclasses.fields(DriverConfig)}:
        raw["gravity_factor"] = [0.0] * 6    # (a newer driver schema asks Damiao arms for it; a leader is unpowered)
    for arm, port in zip(raw["arms"], ("can_left", "can_right")):
        arm["port"] = port
        arm["joints"] = [dict(j, motor="DM4310") for j in arm["joints"]]
    return raw


@pytest.mark.parametrize("build", sorted(BUILDS))
def test_each_builds_signs_read_the_follower_pose_and_plus_one_everywhere_mirrors_them(build):
    mapping, cfg = load_leader(SHIPPED)
    raw = _i2rt_passive_bus() if build == "i2rt_passive" else cfg
    mapping = dataclasses.replace(mapping, build=build,
                                  arms=[dataclasses.replace(a, signs=None) for a in mapping.arms])
    truth = compose(mapping, raw)                          # a leader of this build, at its offsets
    assert [j.direction for j in truth.arms[0].joints[:6]] == list(BUILDS[build].signs)
    with EmulatedRig(truth, initial=POSE) as rig:
        bus = make_bus(compose(mapping, rig.config))
        bus.connect()
        try:
            np.testing.assert_allclose(_read(bus)[ARM], POSE[ARM], atol=0.003)   # the build's signs: the pose
        finally:
            bus.close(disable_torque=False)
        # the old mapping (every joint +1; offsets that keep +1 on one servo turn, the old file's): the
        # joints with sign -1 read mirrored
        plus = dataclasses.replace(mapping, build="custom", arms=[dataclasses.replace(a, signs=(1,) * 6, offsets=OLD)
                                                                  for a in mapping.arms])
        bus = make_bus(compose(plus, rig.config))
        bus.connect()
        try:
            got = _read(bus)
        finally:
            bus.close(disable_torque=False)
    signs = np.tile(np.r_[BUILDS[build].signs, 1], 2)
    old = np.tile(np.r_[OLD, 0.0], 2)
    for i in ARM:
        servo = signs[i] * POSE[i] + truth.joints[i][1].offset
        assert got[i] == pytest.approx(servo - old[i], abs=0.003), truth.joint_names[i]
    mirrored = [truth.joint_names[i] for i in ARM if abs(got[i] - POSE[i]) > 0.1 and signs[i] < 0]
    assert len(mirrored) == 2 * list(BUILDS[build].signs).count(-1)


# --- calibration -------------------------------------------------------------------------------

def test_calibration_finds_the_horns_and_a_follower_target_equals_the_leader_pose(tmp_path):
    mapping, cfg = load_leader(SHIPPED)
    horns = np.array([0.2, -0.15, 0.1, -0.3, 0.25, -0.1])          # where this leader's horns really sit
    truth = compose(_with_offsets(mapping, horns), cfg)
    with EmulatedRig(truth, initial=HOME) as rig:                   # the leader held at the follower's home pose
        bus = make_bus(compose(mapping, rig.config))                # read with the file's (uncalibrated) offsets
        bus.connect()
        try:
            assert np.abs(_read(bus)[ARM] - HOME[ARM]).max() > 0.1  # uncalibrated: it does not read home
            servo = median_servo_angles(bus)
            grippers = [n for n in truth.joint_names if n.endswith("gripper")]
            ends = []
            for fraction in (1.0, 0.0):                             # triggers released, then squeezed
                for n in grippers:
                    rig.move_by_hand(n, fraction)
                ends.append(median_servo_angles(bus))
        finally:
            bus.close(disable_torque=False)
        new = calibrate(mapping, servo, HOME, "test", (ends[0], ends[1]))
        for arm in new.arms:
            np.testing.assert_allclose(arm.offsets, np.add(mapping.arms[0].offsets, horns), atol=0.002)
            assert arm.gripper_released == pytest.approx(0.3, abs=0.002)
            assert arm.gripper_squeezed == pytest.approx(1.25, abs=0.002)
        # round trip through the file the command writes
        out = write_leader(SHIPPED, new, tmp_path / "calibrated.yaml")
        back, back_cfg = load_leader(out)
        assert back == new and back.calibrated == "test"
        # the calibrated leader moved to a pose: the teleop's target is that pose
        for i, n in enumerate(truth.joint_names):
            rig.move_by_hand(n, float(POSE[i]))
        bus = make_bus(compose(back, rig.config))
        bus.connect()
        try:
            reading = bus.read_state()
        finally:
            bus.close(disable_torque=False)
    np.testing.assert_allclose(reading.position, POSE, atol=0.003)
    clock = lambda: 100.0  # noqa: E731
    tele = LeaderTeleop(LeaderConfig(), SafetyFilter(load_safety_config(), clock=clock), tuple(back_cfg.joint_names))
    assert tele.engage(reading.position, POSE)[0]                   # the follower stands at the same pose
    tick = tele.tick(reading.position, reading.ok, 100.0, 100.0)
    np.testing.assert_allclose(tick.target, POSE, atol=0.003)
    assert tick.limited == ()


def test_the_calibrate_command_on_an_emulated_leader(tmp_path, capsys):
    from vam_cli.main import main

    out = tmp_path / "leader.yaml"
    assert main(["leader", "calibrate", "--emulated", "--gripper", "--pose", "home", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "largest arm-joint error" in text and f"wrote {out}" in text
    mapping, _ = load_leader(out)
    assert mapping.build == "gello_yam" and "--pose home --gripper" in mapping.calibrated
    with pytest.raises(FileExistsError, match="--out"):                # an earlier calibration is never replaced
        main(["leader", "calibrate", "--emulated", "--out", str(out)])
    with pytest.raises(ValueError, match="12 finite values"):
        main(["leader", "calibrate", "--emulated", "--pose", "0,0,0", "--out", str(tmp_path / "x.yaml")])
    assert not (tmp_path / "x.yaml").exists()
