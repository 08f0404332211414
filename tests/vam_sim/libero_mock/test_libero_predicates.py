"""Success predicates on constructed states."""
import numpy as np
import pytest

from vam_sim.libero_mock import make_env
from vam_sim.libero_mock.predicates import Atom, goal, holds

pytestmark = pytest.mark.unit


@pytest.fixture
def world():
    env = make_env("goal_ood", 0, 0, 0, render=False)  # the goal scene plus basket, juice and sauces
    env.reset()
    return env.world


def _put(world, name, x, y, support=None):
    e = world[name]
    z = 0.0 if support is None else world[support].rest_height()
    e.pos = np.array([x, y, z])
    e.support = support


def test_on_and_in(world):
    plate, bowl = world["plate_1"], world["black_bowl_1"]
    _put(world, "cream_cheese_1", *plate.pos[:2], support="plate_1")
    assert holds(Atom("on", "cream_cheese_1", "plate_1"), world)
    assert not holds(Atom("in", "cream_cheese_1", "plate_1"), world)  # a plate is no container
    _put(world, "cream_cheese_1", *bowl.pos[:2], support="black_bowl_1")
    assert holds(Atom("in", "cream_cheese_1", "black_bowl_1"), world)
    assert world["cream_cheese_1"].pos[2] == pytest.approx(bowl.pos[2] + bowl.kind.floor)
    assert not holds(Atom("on", "cream_cheese_1", "plate_1"), world)


def test_next_to(world):
    stove = world["flat_stove_1"]
    r = world["plate_1"].kind.radius + stove.kind.radius
    _put(world, "plate_1", stove.pos[0], stove.pos[1] - r - 0.03)
    assert holds(Atom("next_to", "plate_1", "flat_stove_1"), world, next_to_gap=0.07)
    _put(world, "plate_1", stove.pos[0], stove.pos[1] - r - 0.10)
    assert not holds(Atom("next_to", "plate_1", "flat_stove_1"), world, next_to_gap=0.07)
    _put(world, "plate_1", *stove.pos[:2], support="flat_stove_1")  # on it is not next to it
    assert not holds(Atom("next_to", "plate_1", "flat_stove_1"), world)


def test_at_table_center(world):
    _put(world, "black_bowl_1", 0.02, -0.02)
    assert holds(Atom("at", "black_bowl_1", "table_center"), world)
    _put(world, "black_bowl_1", 0.2, -0.02)
    assert not holds(Atom("at", "black_bowl_1", "table_center"), world)


def test_held_objects_satisfy_nothing(world):
    plate = world["plate_1"]
    _put(world, "cream_cheese_1", *plate.pos[:2], support="plate_1")
    world.gripper.held = "cream_cheese_1"
    assert not holds(Atom("on", "cream_cheese_1", "plate_1"), world)
    world.gripper.held = "plate_1"  # carrying the plate with the cheese on it
    assert not holds(Atom("on", "cream_cheese_1", "plate_1"), world)


def test_conjunction_order_and_errors(world):
    g = goal(("on", "cream_cheese_1", "plate_1"), ("in", "orange_juice_1", "basket_1"))
    assert g.first_unsatisfied(world) == 0 and not g.satisfied(world)
    _put(world, "cream_cheese_1", *world["plate_1"].pos[:2], support="plate_1")
    assert g.first_unsatisfied(world) == 1
    _put(world, "orange_juice_1", *world["basket_1"].pos[:2], support="basket_1")
    assert g.satisfied(world)
    with pytest.raises(ValueError, match="'beside'"):
        Atom("beside", "a", "b")
    with pytest.raises(KeyError, match="'teapot_1'"):
        holds(Atom("on", "teapot_1", "plate_1"), world)
