"""A run config's inherited fields are documented where they are declared (RunConfig), and
field_docs finds them there: the MuJoCo world node generates its teleop parameters from
YamRunConfig, which failed with 'fields without a comment' once the shared fields moved to RunConfig."""
from __future__ import annotations

import dataclasses

import pytest

from vam_sim.run_config import RunConfig
from vam_sim.yam_mujoco.runner import YamRunConfig
from vam_stack.config import field_docs

pytestmark = pytest.mark.unit


def test_every_run_config_field_has_its_comment():
    docs = field_docs(YamRunConfig)
    assert set(docs) == {f.name for f in dataclasses.fields(YamRunConfig)}
    assert docs["episodes"] == field_docs(RunConfig)["episodes"]          # inherited: RunConfig's own comment
    assert docs["record_image_every"] == "1 = all"                         # on the statement's last line
    assert docs["expert_noise"].startswith("expert only: std [rad]")       # the subclass's own field


def test_the_world_node_builds_its_parameters():
    pytest.importorskip("rclpy")
    from vam_sim.yam_mujoco import node

    names = {p.name for p in node.PARAMS}
    assert {"teleop_noise", "teleop_noise_where"} <= names
