"""Driver configuration: shipped files, validation messages, driver-unit <-> motor mapping."""
import copy
import math

import numpy as np
import pytest
import yaml

from vam_stack.config import ConfigError, from_dict
from yam_driver.config import DriverConfig, JointMap, load_config

pytestmark = pytest.mark.unit


def _raw(bus: str) -> dict:
    from yam_driver.config import default_config_path

    return copy.deepcopy(yaml.safe_load(default_config_path(bus).read_text())["yam_driver"])


@pytest.mark.parametrize("bus", ["damiao", "dynamixel"])
def test_shipped_configs_load_with_14_joints(bus):
    cfg = load_config(bus=bus)
    assert cfg.bus == bus
    assert len(cfg.joint_names) == 14
    assert cfg.joint_names[6] == "left_gripper" and cfg.joint_names[13] == "right_gripper"


def test_damiao_config_carries_the_yam_motor_facts():
    cfg = load_config(bus="damiao")
    arm = cfg.arms[0]
    assert [j.motor for j in arm.joints] == ["DM4340"] * 3 + ["DM4310"] * 4
    assert [j.id for j in arm.joints] == list(range(1, 8))
    assert [cfg.feedback_id(j) for j in arm.joints] == list(range(0x11, 0x18))
    assert [j.kp for j in arm.joints[:6]] == [80, 80, 80, 10, 10, 10]


def test_wrong_joint_count_names_the_arm_and_count():
    raw = _raw("damiao")
    raw["arms"][1]["joints"] = raw["arms"][1]["joints"][:6]
    with pytest.raises(ConfigError, match=r"arm 'right': expected 7 joints .* got 6"):
        from_dict(DriverConfig, raw)


def test_wrong_arm_count():
    raw = _raw("damiao")
    raw["arms"] = raw["arms"][:1]
    with pytest.raises(ConfigError, match="expected 2 arms"):
        from_dict(DriverConfig, raw)


def test_duplicate_id_on_one_port_is_named():
    raw = _raw("dynamixel")
    raw["arms"][0]["joints"][4]["id"] = 2
    with pytest.raises(ConfigError, match=r"id 2 used twice on port '/dev/ttyUSB0': left_joint2 and left_joint5"):
        from_dict(DriverConfig, raw)


def test_unknown_key_gets_a_hint_and_bad_values_are_quoted():
    raw = _raw("damiao")
    raw["watchdog"] = 0.1
    with pytest.raises(ConfigError, match="did you mean 'watchdog_s'"):
        from_dict(DriverConfig, raw)
    raw = _raw("damiao")
    raw["arms"][0]["joints"][0]["direction"] = 2
    with pytest.raises(ConfigError, match="direction must be 1 or -1, got 2"):
        from_dict(DriverConfig, raw)
    raw = _raw("dynamixel")
    raw["baudrate"] = 1234567
    with pytest.raises(ConfigError, match="baudrate .* 1234567"):
        from_dict(DriverConfig, raw)
    raw = _raw("damiao")
    raw["on_fault"] = "panic"
    with pytest.raises(ConfigError, match="'panic'"):
        from_dict(DriverConfig, raw)


def test_damiao_motor_type_and_range_are_checked():
    raw = _raw("damiao")
    raw["arms"][0]["joints"][0]["motor"] = "DM9999"
    with pytest.raises(ConfigError, match="'DM9999'"):
        from_dict(DriverConfig, raw)
    raw = _raw("damiao")
    raw["arms"][0]["joints"][0]["offset"] = 11.0
    with pytest.raises(ConfigError, match="exceeds the MIT range"):
        from_dict(DriverConfig, raw)


def test_dynamixel_range_must_fit_one_turn():
    raw = _raw("dynamixel")
    raw["arms"][0]["joints"][1]["offset"] = 0.0  # joint2 [0, 3.65] no longer fits [-pi, pi)
    with pytest.raises(ConfigError, match="left_joint2: motor range .* single-turn"):
        from_dict(DriverConfig, raw)


def test_gripper_limits_are_a_fraction():
    raw = _raw("damiao")
    raw["arms"][0]["joints"][6]["upper"] = 1.5
    with pytest.raises(ConfigError, match="opening fraction"):
        from_dict(DriverConfig, raw)


def test_joint_map_round_trip_with_direction_offset_and_gripper():
    raw = _raw("damiao")
    raw["arms"][0]["joints"][2]["direction"] = -1
    raw["arms"][0]["joints"][2]["offset"] = 0.3
    cfg = from_dict(DriverConfig, raw)
    jm = JointMap.from_config(cfg)
    x = np.linspace(0.1, 0.9, 14)
    m = jm.to_motor(x)
    assert math.isclose(m[2], -x[2] + 0.3)
    assert math.isclose(m[6], 0.0 + x[6] * -6.57)  # gripper fraction -> -6.57 rad fully open
    np.testing.assert_allclose(jm.to_driver(m), x, atol=1e-12)
