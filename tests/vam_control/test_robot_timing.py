"""The robot's timing is written once (config/yam_robot.yaml: rate_hz, chunk, execute): the executor,
the safety filter, the driver, the leader arm and a YAM model preset take it from there; a file that
still states a rate must agree or is refused with both numbers."""
from __future__ import annotations

import pytest
import yaml

from vam_control.safety import SafetyConfig, load_safety_config
from vam_control.schedule import robot_config
from vam_model.networks.config import RobotConfig, load_config as load_model_config
from vam_stack.config import ConfigError
from vam_stack.paths import config_dir, models_dir
from vam_stack.robot import load_robot
from yam_driver.config import load_config
from yam_leader.leader import LeaderConfig

pytestmark = pytest.mark.unit


def test_every_config_takes_the_robots_rate():
    rate = load_robot().rate_hz
    assert rate == 30.0
    assert robot_config().rate_hz == load_safety_config().rate_hz == SafetyConfig().rate_hz == rate
    assert load_config(bus="damiao").rate_hz == load_config(bus="dynamixel").rate_hz == rate
    assert LeaderConfig().rate_hz == RobotConfig(action_type="absolute_joint").control_hz == rate
    for name, section in (("yam_safety.yaml", "yam_safety"), ("yam_driver_damiao.yaml", "yam_driver"),
                          ("yam_driver_dynamixel.yaml", "yam_driver"), ("yam_leader.yaml", "yam_driver")):
        assert "rate_hz" not in yaml.safe_load((config_dir() / name).read_text())[section], name   # written once


def test_a_stated_rate_must_agree(tmp_path):
    data = yaml.safe_load((config_dir() / "yam_safety.yaml").read_text())
    p = tmp_path / "s.yaml"
    data["yam_safety"]["rate_hz"] = 30.0                     # an old file that states the robot's rate loads
    p.write_text(yaml.safe_dump(data))
    assert load_safety_config(p).rate_hz == 30.0
    data["yam_safety"]["rate_hz"] = 50.0
    p.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match=r"safety rate_hz 50.0 differs from the robot's control rate 30.0 "
                                          r"\(config/yam_robot.yaml"):
        load_safety_config(p)
    with pytest.raises(ConfigError, match="yam_leader: rate_hz 50.0 differs from the robot's control rate 30.0"):
        LeaderConfig(rate_hz=50.0)
    with pytest.raises(ConfigError, match="robot.control_hz 25.0 differs from the robot's control rate 30.0"):
        RobotConfig(action_type="absolute_joint", control_hz=25.0)
    with pytest.raises(ConfigError, match="robot.chunk must be given for eef_delta"):
        RobotConfig(action_type="eef_delta", action_dim=7, proprio_dim=8)


def test_a_yam_model_takes_the_robots_chunk():
    robot = load_robot()
    r = RobotConfig(action_type="absolute_joint")
    assert (r.chunk, r.execute, r.control_hz, r.camera_hz) == (robot.chunk, robot.execute, robot.rate_hz, 30.0)
    assert (RobotConfig(chunk=4, execute=2).chunk, RobotConfig(chunk=4, execute=2).execute) == (4, 2)  # a model's own
    for preset in ("real", "tiny_real", "yam64"):
        data = yaml.safe_load((models_dir() / f"{preset}.yaml").read_text())["robot"]
        assert not {"chunk", "execute", "control_hz"} & set(data), preset           # written once
        r = load_model_config(preset).robot
        assert (r.chunk, r.execute, r.control_hz) == (robot.chunk, robot.execute, robot.rate_hz), preset
