"""Reach/grasp diagnostics: the expert grasps the named object; a wrong grasp is reported as such."""
import numpy as np
import pytest

from vam_sim.libero_mock import expert_action, make_env
from vam_sim.libero_mock.reach import ReachTracker, reach_stats


@pytest.mark.unit
def test_expert_episode_grasps_the_named_object_and_reaches_it():
    env = make_env("goal", 1, 0, 3)
    env.reset()
    tr = ReachTracker.for_env(env)
    tr.update()
    start = tr.closest
    assert start > 0.05
    while not env.done:
        env.step(expert_action(env))
        tr.update()
    s = tr.summary()
    assert env.termination == "success"
    assert s == {"object": env.task.predicate.atoms[0].obj, "closest_xy_m": 0.0, "grasped_named": True,
                 "grasped_other": False}


@pytest.mark.unit
def test_grasping_an_object_no_atom_names_counts_as_other():
    env = make_env("goal", 1, 0, 3)
    env.reset()
    tr = ReachTracker(env)
    w = env.world
    named = {a.obj for a in env.task.predicate.atoms}
    other = next(e for e in w.entities.values() if e.kind.movable and e.name not in named and e.support is None)
    w.gripper.pos = np.array([other.pos[0], other.pos[1], other.top - other.kind.grasp_depth])
    for _ in range(15):                                        # close the fingers on it
        env.step(np.array([0, 0, 0, 0, 0, 0, 1], np.float32))
        tr.update()
    assert w.gripper.held == other.name
    s = tr.summary()
    assert s["grasped_other"] and not s["grasped_named"] and s["closest_xy_m"] > 0.0


@pytest.mark.unit
def test_reach_stats_aggregates_and_skips_episodes_without_a_tracker():
    eps = [{"reach": {"object": "a", "closest_xy_m": 0.0, "grasped_named": True, "grasped_other": False}},
           {"reach": {"object": "a", "closest_xy_m": 0.04, "grasped_named": False, "grasped_other": True}},
           {"reach": {"object": "a", "closest_xy_m": 0.10, "grasped_named": False, "grasped_other": False}},
           {"success": False}]                                 # e.g. real LIBERO: no kinematic world
    eps.append({"reach": {"object": "d", "closest_xy_m": 0.02, "grasped_named": None, "grasped_other": False}})
    assert reach_stats(eps) == {"episodes": 4, "object_episodes": 3, "grasped_named": 1, "grasped_other": 1,
                                "closest_xy_cm_median": 3.0}
    assert reach_stats([{"success": True}]) is None
    assert ReachTracker.for_env(object()) is None


@pytest.mark.unit
@pytest.mark.parametrize("task", [0, 5, 7])       # open the drawer, push the plate, turn on the stove
def test_tasks_that_place_nothing_are_not_counted_as_missed_grasps(task):
    env = make_env("goal", task, 0, 3)
    env.reset()
    tr = ReachTracker.for_env(env)
    tr.update()
    while not env.done:
        env.step(expert_action(env))
        tr.update()
    assert env.termination == "success" and tr.summary()["grasped_named"] is None
