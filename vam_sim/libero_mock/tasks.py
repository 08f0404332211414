"""The seven task suites: LIBERO's four and the paper's compositional OOD counterparts.

ID suites follow LIBERO's task lists in order and wording (the instruction is the task name
in words, as openpi and lerobot give it) with LIBERO's goal predicates; articulated goals
(drawers, the stove knob, the microwave door, pushing the plate) are modelled kinematically
(world.py). The goal scene is LIBERO's libero_goal layout (BDDL regions, converted to the
drawing frame by frames.py); the other suites' layouts are the mock's own, with LIBERO's
objects. Limits count 20 Hz controller ticks, as LIBERO's evaluations do. OOD suites follow
the paper's App. B:
- spatial_ood: four new pick targets (butter, chocolate pudding, milk, orange juice) onto
  the familiar plate; six moves of the familiar black bowl from a relation seen in ID (on
  the cookie box, next to the plate, at the table centre) onto a destination never used in
  ID (the stove or the top of the cabinet).
- object_ood: libero_object's tasks, scenes and goals, with the named object's appearance
  bound to its swap partner's position (every class is in one swap pair).
- goal_ood: libero_goal's scene; each task pairs an object with a destination it never
  reaches in the ID goal suite.
"""
from __future__ import annotations

import difflib
import math
from dataclasses import dataclass

from .layout import Place
from .objects import words
from .predicates import Goal, goal

ID_LIMITS = {"spatial": 220, "object": 280, "goal": 300, "long": 520}
SUITES = ("spatial", "object", "goal", "long", "spatial_ood", "object_ood", "goal_ood")
OOD_OF = {"spatial_ood": "spatial", "object_ood": "object", "goal_ood": "goal"}
# Video-pretraining suites (never evaluated as benchmarks, never in the action data): scripted
# rollouts whose object -> destination pairings neither the ID nor the OOD suite uses.
PRETRAIN_SUITES = ("goal_video",)
PRETRAIN_OF = {"goal_video": "goal"}
ALL_SUITES = SUITES + PRETRAIN_SUITES
# LIBERO's own names for the four ID suites (libero_10 is `long` here); accepted everywhere.
LIBERO_NAMES = {"spatial": "libero_spatial", "object": "libero_object", "goal": "libero_goal", "long": "libero_10"}
ALIASES = {v: k for k, v in LIBERO_NAMES.items()} | {"10": "long", "libero_long": "long"}


def canonical_suite(name: str) -> str:
    """The mock's suite name for `name` (accepts LIBERO's: libero_goal, libero_10, 10, ...)."""
    name = str(name)
    if name in ALL_SUITES:
        return name
    if name in ALIASES:
        return ALIASES[name]
    close = difflib.get_close_matches(name, list(ALL_SUITES) + list(ALIASES), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise ValueError(f"unknown suite {name!r}{hint}; expected one of {list(ALL_SUITES)} or LIBERO's "
                     f"{sorted(ALIASES)}")


@dataclass(frozen=True)
class TaskSpec:
    """One task: language, goal predicate, step limit and the scene it starts from."""

    suite: str  # suite name, one of ALL_SUITES
    index: int  # 0..9 within the suite (0..N-1 for a pretraining suite)
    name: str  # snake_case task name, as LIBERO's BDDL file names
    instruction: str  # the language instruction given to the policy
    predicate: Goal  # success = this conjunction holds
    limit: int  # max episode steps (LIBERO's 20 Hz controller ticks, one action each)
    scene: tuple[Place, ...]  # starting placements
    layout_key: str  # tasks sharing a key share one nominal layout
    swap: tuple[str, str] | None = None  # two instances whose positions are exchanged (object_ood)


def _P(name: str, *where) -> Place:
    return Place(name, tuple(where))


# ---- libero_spatial ------------------------------------------------------------------
def _spatial_fixtures(drawer_open: bool = False) -> list[Place]:
    return [_P("wooden_cabinet_1", "xy", -0.30, 0.24), _P("flat_stove_1", "xy", 0.27, 0.22),
            _P("top_drawer_1", "drawer", "wooden_cabinet_1", 0.165, 1.0 if drawer_open else 0.0)]


_SPATIAL_SOURCES = [  # (relation words, placements before the target, target placement)
    ("between the plate and the ramekin",
     [_P("plate_1", "xy", 0.17, -0.14), _P("ramekin_1", "xy", -0.18, -0.14)],
     ("between", "plate_1", "ramekin_1")),
    ("next to the ramekin", [_P("ramekin_1", "free")], ("next_to", "ramekin_1")),
    ("from table center", [], ("center",)),
    ("on the cookie box", [_P("cookie_box_1", "free")], ("on", "cookie_box_1")),
    ("in the top drawer of the wooden cabinet", [], ("in", "top_drawer_1")),
    ("on the ramekin", [_P("ramekin_1", "free")], ("on", "ramekin_1")),
    ("next to the cookie box", [_P("cookie_box_1", "free")], ("next_to", "cookie_box_1")),
    ("on the stove", [], ("on", "flat_stove_1")),
    ("next to the plate", [_P("plate_1", "free")], ("next_to", "plate_1")),
    ("on the wooden cabinet", [], ("on", "wooden_cabinet_1")),
]


def _complete(scene: list[Place], extra: list[str]) -> tuple[Place, ...]:
    have = {p.name for p in scene}
    return tuple(scene + [_P(n, "free") for n in extra if n not in have])


def _spatial() -> list[TaskSpec]:
    tasks = []
    for i, (rel, before, target) in enumerate(_SPATIAL_SOURCES):
        scene = _spatial_fixtures(drawer_open=target == ("in", "top_drawer_1")) + before + [_P("black_bowl_1", *target)]
        scene = _complete(scene, ["plate_1", "ramekin_1", "cookie_box_1", "black_bowl_2"])
        name = f"pick_up_the_black_bowl_{rel.replace(' ', '_')}_and_place_it_on_the_plate"
        instr = f"pick up the black bowl {rel} and place it on the plate"
        tasks.append(TaskSpec("spatial", i, name, instr, goal(("on", "black_bowl_1", "plate_1")),
                              ID_LIMITS["spatial"], scene, f"spatial/{i}"))
    return tasks


def _spatial_ood() -> list[TaskSpec]:
    tasks = []
    for i, obj in enumerate(["butter", "chocolate_pudding", "milk", "orange_juice"]):
        scene = _complete(_spatial_fixtures() + [_P(f"{obj}_1", "free")],
                          ["plate_1", "ramekin_1", "cookie_box_1", "black_bowl_1", "black_bowl_2"])
        instr = f"pick up the {words(obj)} and place it on the plate"
        tasks.append(TaskSpec("spatial_ood", i, instr.replace(" ", "_"), instr,
                              goal(("on", f"{obj}_1", "plate_1")), 0, scene, f"spatial_ood/{i}"))
    sources = [("on the cookie box", [_P("cookie_box_1", "free")], ("on", "cookie_box_1")),
               ("next to the plate", [_P("plate_1", "free")], ("next_to", "plate_1")),
               ("at the table center", [], ("center",))]
    dests = [("the stove", "flat_stove_1"), ("the top of the wooden cabinet", "wooden_cabinet_1")]
    for rel, before, where in sources:
        for dwords, dname in dests:
            i = len(tasks)
            scene = _complete(_spatial_fixtures() + before + [_P("black_bowl_1", *where)],
                              ["plate_1", "ramekin_1", "cookie_box_1", "black_bowl_2"])
            instr = f"pick up the black bowl {rel} and place it on {dwords}"
            tasks.append(TaskSpec("spatial_ood", i, instr.replace(" ", "_"), instr,
                                  goal(("on", "black_bowl_1", dname)), 0, scene, f"spatial_ood/{i}"))
    return tasks


# ---- libero_object -------------------------------------------------------------------
OBJECT_CLASSES = ["alphabet_soup", "cream_cheese", "salad_dressing", "bbq_sauce", "ketchup",
                  "tomato_sauce", "butter", "milk", "chocolate_pudding", "orange_juice"]
# Swap pairs for object_ood: every class is in exactly one pair (the paper's example first).
SWAP_PAIRS = [("butter", "chocolate_pudding"), ("alphabet_soup", "tomato_sauce"),
              ("cream_cheese", "milk"), ("ketchup", "bbq_sauce"), ("salad_dressing", "orange_juice")]
PARTNER = {a: b for a, b in SWAP_PAIRS} | {b: a for a, b in SWAP_PAIRS}


def _object(ood: bool) -> list[TaskSpec]:
    suite = "object_ood" if ood else "object"
    tasks = []
    for i, obj in enumerate(OBJECT_CLASSES):
        partner = PARTNER[obj]
        others = [c for c in OBJECT_CLASSES if c not in (obj, partner)]
        # A fixed, task-specific choice of four distractors (rotating through the classes).
        distractors = [others[(i + 2 * j) % len(others)] for j in range(4)]
        scene = tuple([_P("basket_1", "xy", 0.24, 0.13), _P(f"{obj}_1", "free"),
                       _P(f"{partner}_1", "free")] + [_P(f"{d}_1", "free") for d in distractors])
        instr = f"pick up the {words(obj)} and place it in the basket"
        tasks.append(TaskSpec(suite, i, instr.replace(" ", "_"), instr,
                              goal(("in", f"{obj}_1", "basket_1")), 0, scene, f"object/{i}",
                              (f"{obj}_1", f"{partner}_1") if ood else None))
    return tasks


# ---- libero_goal ---------------------------------------------------------------------
# LIBERO's goal scene: BDDL region centres (LIBERO's table axes) -> drawing frame (x = -y_L, y = -x_L).
def _at(x: float, y: float, *yaw) -> tuple:
    return ("xy", -y, -x, *yaw)


GOAL_SCENE = (
    _P("wooden_cabinet_1", *_at(0.036, -0.25, -math.pi / 2)),  # drawers open towards the table centre
    _P("top_drawer_1", "drawer", "wooden_cabinet_1", 0.165),
    _P("middle_drawer_1", "drawer", "wooden_cabinet_1", 0.095),
    _P("bottom_drawer_1", "drawer", "wooden_cabinet_1", 0.025),
    _P("flat_stove_1", *_at(-0.329, 0.202)),   # knob at LIBERO's stove root, burner 0.15 m in front
    _P("wine_rack_1", *_at(-0.24, -0.251)),
    _P("plate_1", *_at(0.05, -0.02)), _P("black_bowl_1", *_at(-0.09, 0.0)),
    _P("wine_bottle_1", *_at(-0.20, -0.05)), _P("cream_cheese_1", *_at(-0.05, 0.13)),
)
# goal_ood pairs objects with destinations never seen together in ID; four of its objects
# (basket, orange juice, bbq sauce, tomato sauce) are not in LIBERO's goal scene and join it.
GOAL_OOD_SCENE = GOAL_SCENE + (_P("basket_1", *_at(0.17, 0.22)), _P("orange_juice_1", "free"),
                               _P("bbq_sauce_1", "free"), _P("tomato_sauce_1", "free"))
_GOAL_ID = [  # (instruction, goal atoms, expert preconditions), LIBERO's order and predicates
    ("open the middle drawer of the cabinet", [("open", "middle_drawer_1")], []),
    ("put the bowl on the stove", [("on", "black_bowl_1", "flat_stove_1")], []),
    ("put the wine bottle on top of the cabinet", [("on", "wine_bottle_1", "wooden_cabinet_1")], []),
    ("open the top drawer and put the bowl inside", [("in", "black_bowl_1", "top_drawer_1")],
     [("open", "top_drawer_1")]),
    ("put the bowl on top of the cabinet", [("on", "black_bowl_1", "wooden_cabinet_1")], []),
    ("push the plate to the front of the stove", [("at", "plate_1", "stove_front")], []),
    ("put the cream cheese in the bowl", [("on", "cream_cheese_1", "black_bowl_1")], []),
    ("turn on the stove", [("turnon", "flat_stove_1")], []),
    ("put the bowl on the plate", [("on", "black_bowl_1", "plate_1")], []),
    ("put the wine bottle on the rack", [("on", "wine_bottle_1", "wine_rack_1")], []),
]
_GOAL_OOD = [  # object -> destination pairs never seen together in _GOAL_ID (the paper's App. B)
    ("put the wine bottle on the stove", [("on", "wine_bottle_1", "flat_stove_1")]),
    ("put the wine bottle on the plate", [("on", "wine_bottle_1", "plate_1")]),
    ("put the wine bottle in the bowl", [("in", "wine_bottle_1", "black_bowl_1")]),
    ("put the cream cheese in the basket", [("in", "cream_cheese_1", "basket_1")]),
    ("put the cream cheese on the plate", [("on", "cream_cheese_1", "plate_1")]),
    ("put the cream cheese on the stove", [("on", "cream_cheese_1", "flat_stove_1")]),
    ("put the cream cheese on top of the cabinet", [("on", "cream_cheese_1", "wooden_cabinet_1")]),
    ("put the orange juice on the stove", [("on", "orange_juice_1", "flat_stove_1")]),
    ("put the bbq sauce on the plate", [("on", "bbq_sauce_1", "plate_1")]),
    ("put the tomato sauce on top of the cabinet", [("on", "tomato_sauce_1", "wooden_cabinet_1")]),
]


def _goal(ood: bool) -> list[TaskSpec]:
    if ood:
        return [TaskSpec("goal_ood", i, instr.replace(" ", "_"), instr, goal(*atoms), 0, GOAL_OOD_SCENE, "goal_ood")
                for i, (instr, atoms) in enumerate(_GOAL_OOD)]
    return [TaskSpec("goal", i, instr.replace(" ", "_"), instr, goal(*atoms, pre=tuple(pre)), 0, GOAL_SCENE, "goal")
            for i, (instr, atoms, pre) in enumerate(_GOAL_ID)]


# ---- goal_video: the video-pretraining set of the paper study (issue "The paper's finding") ----
# The goal_ood scene (so the four objects the ID data never shows move too), with every
# graspable object paired with every destination, except the pairs any goal or goal_ood task
# uses. Pairs are compared as (object, destination) whatever the relation word, so "in the
# bowl" and "on the bowl" are one pair. Kept apart by construction here, and by a test that
# also compares instructions and goal atoms with both suites.
_VIDEO_OBJECTS = ("black_bowl_1", "wine_bottle_1", "cream_cheese_1", "orange_juice_1", "bbq_sauce_1",
                  "tomato_sauce_1")
_VIDEO_DESTS = (  # (destination, relation, instruction template, expert preconditions)
    ("flat_stove_1", "on", "put the {} on the stove", []),
    ("plate_1", "on", "put the {} on the plate", []),
    ("black_bowl_1", "in", "put the {} in the bowl", []),
    ("wooden_cabinet_1", "on", "put the {} on top of the cabinet", []),
    ("wine_rack_1", "on", "put the {} on the rack", []),
    ("basket_1", "in", "put the {} in the basket", []),
    ("top_drawer_1", "in", "open the top drawer and put the {} inside", [("open", "top_drawer_1")]),
)


def goal_pairs(tasks: list[TaskSpec]) -> set[tuple[str, str]]:
    """(object, destination) of every two-place goal atom of `tasks`."""
    return {(a.obj, a.ref) for t in tasks for a in t.predicate.atoms if a.ref}


def _goal_video() -> list[TaskSpec]:
    used = goal_pairs(_goal(False)) | goal_pairs(_goal(True))
    tasks = []
    for obj in _VIDEO_OBJECTS:
        name = "bowl" if obj == "black_bowl_1" else words(obj)     # the goal suites say "the bowl"
        for dest, rel, template, pre in _VIDEO_DESTS:
            if dest == obj or (obj, dest) in used:
                continue
            instr = template.format(name)
            tasks.append(TaskSpec("goal_video", len(tasks), instr.replace(" ", "_"), instr,
                                  goal((rel, obj, dest), pre=tuple(pre)), 0, GOAL_OOD_SCENE, "goal_ood"))
    return tasks


# ---- libero_10 (long) ----------------------------------------------------------------
_LIVING2 = (_P("basket_1", "xy", 0.24, 0.14), _P("alphabet_soup_1", "free"), _P("cream_cheese_1", "free"),
            _P("tomato_sauce_1", "free"), _P("ketchup_1", "free"), _P("orange_juice_1", "free"),
            _P("milk_1", "free"), _P("butter_1", "free"))
_CABINET_LOW = (_P("white_cabinet_1", "xy", -0.22, 0.22), _P("bottom_drawer_1", "drawer", "white_cabinet_1", 0.025, 1.0))
_LONG = [  # (instruction, scene, goal atoms in the expert's order, layout key): LIBERO's libero_10
    ("put both the alphabet soup and the tomato sauce in the basket", _LIVING2,
     [("in", "alphabet_soup_1", "basket_1"), ("in", "tomato_sauce_1", "basket_1")], "living2"),
    ("put both the cream cheese box and the butter in the basket", _LIVING2,
     [("in", "cream_cheese_1", "basket_1"), ("in", "butter_1", "basket_1")], "living2"),
    ("turn on the stove and put the moka pot on it",
     (_P("flat_stove_1", "xy", 0.2, 0.2), _P("moka_pot_1", "free"), _P("frypan_1", "free")),
     [("turnon", "flat_stove_1"), ("on", "moka_pot_1", "flat_stove_1")], "kitchen3"),
    ("put the black bowl in the bottom drawer of the cabinet and close it",
     _CABINET_LOW + (_P("wine_rack_1", "xy", 0.22, 0.24), _P("black_bowl_1", "free"), _P("wine_bottle_1", "free")),
     [("in", "black_bowl_1", "bottom_drawer_1"), ("close", "bottom_drawer_1")], "kitchen4"),
    ("put the white mug on the left plate and put the yellow and white mug on the right plate",
     (_P("plate_1", "xy", -0.17, -0.12), _P("plate_2", "xy", 0.17, -0.12), _P("white_mug_1", "free"),
      _P("yellow_and_white_mug_1", "free"), _P("red_mug_1", "free")),
     [("on", "white_mug_1", "plate_1"), ("on", "yellow_and_white_mug_1", "plate_2")], "living5"),
    ("pick up the book and place it in the back compartment of the caddy",
     (_P("caddy_back_1", "xy", 0.2, 0.2), _P("caddy_front_1", "front_of", "caddy_back_1", 0.0), _P("book_1", "free"),
      _P("yellow_and_white_mug_1", "free")),
     [("in", "book_1", "caddy_back_1")], "study1"),
    ("put the white mug on the plate and put the chocolate pudding to the right of the plate",
     (_P("plate_1", *_at(0.15, 0.0)), _P("white_mug_1", *_at(-0.1, -0.15)), _P("chocolate_pudding_1", *_at(-0.05, 0.1)),
      _P("red_mug_1", *_at(-0.2, 0.0))),
     [("on", "white_mug_1", "plate_1"), ("at", "chocolate_pudding_1", "plate_right")], "living6"),
    ("put both the alphabet soup and the cream cheese box in the basket",
     (_P("basket_1", "xy", -0.22, 0.14), _P("alphabet_soup_1", "free"), _P("cream_cheese_1", "free"),
      _P("tomato_sauce_1", "free"), _P("ketchup_1", "free"), _P("orange_juice_1", "free"), _P("milk_1", "free")),
     [("in", "alphabet_soup_1", "basket_1"), ("in", "cream_cheese_1", "basket_1")], "living1"),
    ("put both moka pots on the stove",
     (_P("flat_stove_1", "xy", 0.0, 0.2), _P("flat_stove_1", "joint", 1.438 / 2.1), _P("moka_pot_1", "free"),
      _P("moka_pot_2", "free"), _P("black_bowl_1", "free")),  # LIBERO starts this stove already on
     [("on", "moka_pot_1", "flat_stove_1"), ("on", "moka_pot_2", "flat_stove_1"), ("turnon", "flat_stove_1")],
     "kitchen8"),
    ("put the yellow and white mug in the microwave and close it",
     (_P("microwave_1", "xy", -0.24, 0.2), _P("microwave_1", "joint", 1.0), _P("white_mug_1", "free"),
      _P("yellow_and_white_mug_1", "free")),
     [("in", "yellow_and_white_mug_1", "microwave_1"), ("close", "microwave_1")], "kitchen6"),
]


def _long() -> list[TaskSpec]:
    return [TaskSpec("long", i, instr.replace(" ", "_"), instr, goal(*atoms), ID_LIMITS["long"], scene, f"long/{key}")
            for i, (instr, scene, atoms, key) in enumerate(_LONG)]


def _with_limits(tasks: list[TaskSpec], suite: str, factor: float) -> list[TaskSpec]:
    base = ID_LIMITS[PRETRAIN_OF.get(suite, OOD_OF.get(suite, suite))]
    limit = int(round(base * (factor if suite in OOD_OF else 1.0)))
    return [TaskSpec(t.suite, t.index, t.name, t.instruction, t.predicate, limit, t.scene,
                     t.layout_key, t.swap) for t in tasks]


_BUILDERS = {"spatial": _spatial, "object": lambda: _object(False), "goal": lambda: _goal(False),
             "long": _long, "spatial_ood": _spatial_ood, "object_ood": lambda: _object(True),
             "goal_ood": lambda: _goal(True), "goal_video": _goal_video}


def suite_tasks(suite: str, ood_limit_factor: float = 1.5) -> list[TaskSpec]:
    """The tasks of `suite` (one of ALL_SUITES or a LIBERO alias; ten for every benchmark suite),
    with their episode limits."""
    suite = canonical_suite(suite)
    return _with_limits(_BUILDERS[suite](), suite, ood_limit_factor)
