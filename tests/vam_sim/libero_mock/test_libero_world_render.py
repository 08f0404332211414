"""Kinematic world (grasp, release, supports, clamps) and the OpenCV cameras."""
import cv2
import numpy as np
import pytest

from vam_sim.libero_mock import frames, make_env
from vam_sim.libero_mock.world import R_DOWN

pytestmark = pytest.mark.unit


def _move_to(env, target, grip, tol=0.002):
    for _ in range(200):
        d = np.asarray(target) - env.world.gripper.pos
        if np.linalg.norm(d) < tol:
            break
        a = np.zeros(7)
        a[:3] = np.clip(d / env.cfg.max_translation, -1, 1)   # drawing frame ...
        a[6] = grip
        env.step(frames.action_to_libero(a).astype(np.float32))  # ... sent in LIBERO's axes


def _hold(env, grip, n):
    for _ in range(n):
        env.step(np.array([0, 0, 0, 0, 0, 0, grip], np.float32))


def test_grasp_carry_release_onto_a_support():
    env = make_env("goal", 8, 0, 0, render=False)  # put the bowl on the plate
    env.reset()
    w = env.world
    bowl, plate = w["black_bowl_1"], w["plate_1"]
    _move_to(env, [*bowl.pos[:2], 0.2], -1)
    _move_to(env, [*bowl.pos[:2], bowl.top - bowl.kind.grasp_depth], -1)
    _hold(env, 1.0, 12)
    assert w.gripper.held == "black_bowl_1" and w.gripper.width == pytest.approx(bowl.kind.grip_width)
    _move_to(env, [w.gripper.pos[0], w.gripper.pos[1], 0.2], 1)
    offset = bowl.pos[2] - w.gripper.pos[2]
    assert offset < 0  # hangs below the fingertips' height reference
    _move_to(env, [*plate.pos[:2], 0.2], 1)
    np.testing.assert_allclose(bowl.pos[:2], plate.pos[:2], atol=0.003)
    _hold(env, -1.0, 1)
    assert w.gripper.held is None
    assert bowl.support == "plate_1" and bowl.pos[2] == pytest.approx(plate.top)
    assert env.success() and env.done


def test_closing_on_nothing_grasps_nothing_and_tcp_stays_above_objects():
    env = make_env("spatial", 3, 0, 0, render=False)  # bowl starts on the cookie box
    env.max_steps = 10_000  # the first move never arrives (it tries to go through the box)
    env.reset()
    w = env.world
    box = w["cookie_box_1"]
    _move_to(env, [*box.pos[:2] + 0.02, 0.0], -1)  # tries to go through the box
    assert w.gripper.pos[2] >= box.top - box.kind.grasp_depth - 1e-9
    _move_to(env, [0.0, 0.05, 0.15], -1)
    _hold(env, 1.0, 12)
    assert w.gripper.held is None and w.gripper.width == pytest.approx(0.0)


def test_carrying_a_support_carries_what_rests_on_it():
    env = make_env("goal", 0, 0, 0, render=False)
    env.reset()
    w = env.world
    plate, cheese = w["plate_1"], w["cream_cheese_1"]
    cheese.pos = plate.pos + np.array([0.05, 0.0, plate.top])
    cheese.support = "plate_1"
    w.gripper.pos = np.array([*plate.pos[:2], plate.top - plate.kind.grasp_depth])
    _hold(env, 1.0, 12)
    assert w.gripper.held == "plate_1"
    before = cheese.pos.copy()
    env.step(np.array([1, 0, 1, 0, 0, 0, 1], np.float32))  # LIBERO +x (towards the camera) and up
    np.testing.assert_allclose(cheese.pos - before, [0, -env.cfg.max_translation, env.cfg.max_translation], atol=1e-9)


def test_rotation_is_integrated_and_tilt_limited():
    env = make_env("spatial", 0, 0, 0, render=False)
    env.reset()
    r0 = cv2.Rodrigues(env.observe()["proprio"][3:6].astype(np.float64))[0]
    env.step(np.array([0, 0, 0, 0, 0, 1.0, -1], np.float32))  # yaw by max_rotation about LIBERO's world z
    r1 = cv2.Rodrigues(env.observe()["proprio"][3:6].astype(np.float64))[0]
    np.testing.assert_allclose(cv2.Rodrigues(r1 @ r0.T)[0].ravel(), [0, 0, env.cfg.max_rotation], atol=1e-5)
    env.world.gripper.rot = R_DOWN.copy()
    for _ in range(10):
        env.step(np.array([0, 0, 0, 1.0, 0, 0, -1], np.float32))
    tilt = np.arccos(-env.world.gripper.rot[2, 2])
    assert tilt <= env.cfg.max_tilt + 1e-9


def test_cameras_see_the_gripper_move_and_descend():
    env = make_env("spatial", 7, 0, 0)
    o0 = env.reset()
    o1, *_ = env.step(np.array([1, 0, 0, 0, 0, 0, -1], np.float32))
    assert np.abs(o1["agentview"].astype(int) - o0["agentview"]).sum() > 0
    # LIBERO's image directions (agent view, 180-degree-rotated renders): +x down, +y left, +z up
    for axis, (drow, dcol) in ((0, (1, 0)), (1, (0, -1)), (2, (-1, 0))):
        env.reset()
        p = env.observe()["proprio"][:3]
        before = np.array(env.project(p[None])["agentview"][0])
        a = np.zeros(7, np.float32)
        a[axis], a[6] = 1.0, -1.0
        for _ in range(4):
            env.step(a)
        after = np.array(env.project(env.observe()["proprio"][:3][None])["agentview"][0])
        d = after - before
        assert np.sign(np.round(d / np.abs(d).max())).tolist() == [drow, dcol], (axis, d)
    env.reset()
    # The wrist camera looks down at the target bowl; it grows as the gripper descends.
    bowl = env.world["black_bowl_1"]
    _move_to(env, [*bowl.pos[:2], 0.35], -1)
    dark_far = (env.observe()["wrist"].max(axis=2) < 45).sum()
    _move_to(env, [*bowl.pos[:2], bowl.top + 0.02], -1)
    dark_near = (env.observe()["wrist"].max(axis=2) < 45).sum()
    assert dark_near > 2 * dark_far > 0


def test_renders_are_deterministic():
    a, b = make_env("long", 4, 1, 0), make_env("long", 4, 1, 0)
    np.testing.assert_array_equal(a.reset()["stacked"], b.reset()["stacked"])
