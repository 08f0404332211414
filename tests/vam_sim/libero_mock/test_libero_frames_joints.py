"""LIBERO's frames at the mock's interface, and the kinematic joints (drawers, knob, door, plate push)."""
import cv2
import numpy as np
import pytest

from vam_sim.libero_mock import frames, make_env
from vam_sim.libero_mock.expert import expert_action, expert_mode

pytestmark = pytest.mark.unit


def test_frame_map_is_a_reflection_with_rotations_as_pseudovectors():
    p = np.array([0.1, -0.2, 0.3])
    np.testing.assert_allclose(frames.pos_from_libero(frames.pos_to_libero(p)), p)
    assert np.linalg.det(frames.M) == pytest.approx(-1.0)
    # a world-frame rotation in LIBERO equals the mapped rotation in the drawing frame
    w = np.array([0.05, -0.02, 0.08])
    r_d = cv2.Rodrigues(np.array([0.1, 0.2, -0.3]))[0]
    lhs = frames.rot_to_libero(cv2.Rodrigues(frames.rotvec_from_libero(w))[0] @ r_d)
    np.testing.assert_allclose(lhs, cv2.Rodrigues(w)[0] @ frames.rot_to_libero(r_d), atol=1e-12)
    # the gripper pointing straight down reads as LIBERO's half turn about x
    np.testing.assert_allclose(frames.rot_to_libero(np.diag([1.0, -1.0, -1.0])), np.diag([1.0, -1.0, -1.0]))


def test_actions_move_the_gripper_along_liberos_axes():
    env = make_env("goal", 0, 0, 0, render=False)
    for axis in range(3):
        for sign in (1.0, -1.0):
            env.reset()
            p0 = env.observe()["proprio"][:3].copy()
            a = np.zeros(7, np.float32)
            a[axis], a[6] = sign, -1.0
            env.step(a)
            d = env.observe()["proprio"][:3] - p0
            expected = np.zeros(3)
            expected[axis] = sign * env.cfg.max_translation
            np.testing.assert_allclose(d, expected, atol=1e-6)


def _run_expert(env, cap=300):
    modes = []
    while not env.done and len(modes) < cap:
        modes.append(expert_mode(env))
        env.step(expert_action(env))
    return modes


def test_drawer_opens_only_when_pulled_by_its_handle_with_closed_fingers():
    env = make_env("goal", 0, 0, 0, render=False)  # open the middle drawer of the cabinet
    env.reset()
    drawer = env.world["middle_drawer_1"]
    assert drawer.q == 0 and not env.success()
    # at the handle with open fingers, pulling slides off
    g = env.world.gripper
    g.pos = drawer.handle().copy()
    g.width = env.cfg.gripper_max_width
    pull = frames.action_to_libero(np.r_[drawer.axis(), 0, 0, 0, -1.0]).astype(np.float32)
    env.step(pull)
    assert drawer.q == 0
    env.reset()
    modes = _run_expert(env)
    assert env.success() and env.world["middle_drawer_1"].is_open()
    assert {"hook", "pull"} <= set(modes) and modes[0] == "approach"


def test_bowl_goes_into_the_top_drawer_after_it_is_opened():
    env = make_env("goal", 3, 0, 0, render=False)  # open the top drawer and put the bowl inside
    env.reset()
    _run_expert(env)
    assert env.success() and env.world["black_bowl_1"].support == "top_drawer_1"
    assert env.world["top_drawer_1"].is_open()


def test_stove_turns_on_by_pushing_its_knob_and_burner_glows():
    env = make_env("goal", 7, 0, 0)  # turn on the stove
    off = env.reset()["agentview"]
    modes = _run_expert(env)
    assert env.success() and "press" in modes
    on = env.observe()["agentview"]
    glow = (on[..., 0] > 230) & (on[..., 1] < 120) & (on[..., 2] < 60)
    assert glow.sum() > 0 and ((off[..., 0] > 230) & (off[..., 1] < 120) & (off[..., 2] < 60)).sum() == 0


def test_plate_is_pushed_into_the_region_in_front_of_the_stove():
    env = make_env("goal", 5, 0, 0, render=False)
    env.reset()
    assert env.world["plate_1"].support is None
    modes = _run_expert(env)
    assert env.success() and "push" in modes and env.world.gripper.held is None


def test_microwave_door_closes_and_a_shut_door_keeps_things_out():
    env = make_env("long", 9, 0, 0, render=False)  # put the mug in the microwave and close it
    env.reset()
    mw = env.world["microwave_1"]
    assert mw.is_open() and mw.accessible
    _run_expert(env, cap=520)
    assert env.success() and mw.is_closed() and not mw.accessible
    assert env.world["yellow_and_white_mug_1"].support == "microwave_1"
    assert mw.rest_height() == pytest.approx(mw.top)  # a shut microwave carries things on its top
