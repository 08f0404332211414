"""Shared fixtures: a simulated robot per test, and a skip when offscreen rendering is absent."""
import pytest

from vam_sim.yam_mujoco.robot import build_sim_robot
from vam_sim.yam_mujoco.sim import RenderUnavailable


@pytest.fixture
def robot():
    r = build_sim_robot(task="handover", seed=3)
    yield r
    r.close()


@pytest.fixture
def render_ok(robot):
    """Skip (with the backend's own message) where MuJoCo cannot render offscreen."""
    try:
        robot.sim.render("top")
    except RenderUnavailable as e:
        pytest.skip(f"offscreen rendering unavailable here: {e}")
    return True
