"""build_runtime without ROS: absolute joint targets are named as the robot description publishes
them (no driver file read), tagged with the safety filter's source; end-effector deltas get LIBERO's
names and no filter."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from vam_control.build import build_runtime, release
from vam_stack.config import ConfigError
from vam_stack.paths import config_dir
from vam_stack.robot import load_robot
from vam_stack.topics import JOINT_TARGETS_SOURCE, LIBERO_ACTION_NAMES
from yam_driver.config import default_config_path, load_config

pytestmark = pytest.mark.unit

PARAMS = {"rt_priority": 0, "rtc": "off", "max_frame_age_s": 0.2, "max_state_age_s": 0.2, "on_overrun": "hold",
          "safety_config": str(config_dir() / "yam_safety.yaml")}


def policy(action_type: str = "absolute_joint", dim: int = 14, rate_hz: float = 30.0, proprio: int = 14):
    spec = SimpleNamespace(chunk=10, execute=5, action_dim=dim, proprio_dim=proprio, height=4, width=6, rate_hz=rate_hz,
                           action_type=action_type)
    return SimpleNamespace(spec=spec, reset=lambda instruction: None, infer=lambda obs: {})


def build(p):
    control = build_runtime(p, PARAMS, lambda sent: None, lambda tel: None)
    release(control.runtime, None, 1.0)
    return control


def test_absolute_targets_are_named_by_the_robot_description():
    control = build(policy())
    assert list(control.action_names) == load_robot().published_names()
    assert control.target_source == JOINT_TARGETS_SOURCE and control.period_s == pytest.approx(1 / 30)
    for bus in ("damiao", "dynamixel"):              # the driver files name the same joints (check_driver)
        assert load_config(default_config_path(bus)).joint_names == list(control.action_names)


def test_end_effector_deltas_are_named_as_libero_and_carry_no_filter_tag():
    control = build(policy("eef_delta", dim=7, rate_hz=10.0, proprio=8))
    assert control.action_names == tuple(LIBERO_ACTION_NAMES) and control.target_source == ""


def test_a_policy_the_safety_filter_does_not_fit_is_refused_naming_both():
    with pytest.raises(ConfigError, match="safety config is for 14 dims at 30.0 Hz, the policy sends 12 at 30.0 Hz"):
        build(policy(dim=12))
