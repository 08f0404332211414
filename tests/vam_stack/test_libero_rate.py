"""LIBERO's controller rate is written once (vam_stack.libero.CONTROL_HZ): the mocked environment and
the LIBERO model presets take it from there; a file that still states it must agree or is refused
naming both numbers and the file."""
from __future__ import annotations

import pytest
import yaml

from vam_model.networks.config import RobotConfig, load_config
from vam_sim.libero_mock.config import LiberoMockConfig
from vam_stack.config import ConfigError
from vam_stack.libero import CONTROL_HZ
from vam_stack.paths import config_dir, models_dir

pytestmark = pytest.mark.unit

LIBERO_PRESETS = ("libero", "libero64", "tiny")


def test_every_libero_config_takes_the_one_rate():
    assert CONTROL_HZ == 20.0
    assert LiberoMockConfig().control_hz == LiberoMockConfig.load().control_hz == CONTROL_HZ
    assert "control_hz" not in yaml.safe_load((config_dir() / "libero_mock.yaml").read_text())["libero_mock"]
    for preset in LIBERO_PRESETS:
        data = yaml.safe_load((models_dir() / f"{preset}.yaml").read_text())["robot"]
        assert not {"control_hz", "camera_hz"} & set(data), preset          # written once
        r = load_config(preset).robot
        assert r.control_hz == r.camera_hz == CONTROL_HZ, preset             # one frame per controller tick


def test_a_stated_libero_rate_must_agree(tmp_path):
    p = tmp_path / "mock.yaml"
    p.write_text("libero_mock:\n  control_hz: 20.0\n")
    assert LiberoMockConfig.from_file(p).control_hz == 20.0                  # an old file that states it loads
    p.write_text("libero_mock:\n  control_hz: 25.0\n")
    with pytest.raises(ConfigError, match=r"mock.yaml \[libero_mock\]: libero_mock control_hz 25.0 differs from "
                                          r"LIBERO's controller rate 20.0 \(vam_stack.libero.CONTROL_HZ"):
        LiberoMockConfig.from_file(p)
    assert RobotConfig(action_type="eef_delta", action_dim=7, proprio_dim=8, chunk=17, execute=10,
                       control_hz=20.0).control_hz == 20.0
    with pytest.raises(ConfigError, match="robot.control_hz 30.0 differs from LIBERO's controller rate 20.0"):
        RobotConfig(action_type="eef_delta", action_dim=7, proprio_dim=8, chunk=17, execute=10, control_hz=30.0)
