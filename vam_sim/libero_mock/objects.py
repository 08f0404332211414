"""Object catalogue of the mocked LIBERO tabletop: shapes, sizes, roles and colours.

Each kind is a box or an upright cylinder (metres, the mock's drawing frame of frames.py: x
to the right of the agent view, y away from the agent-view camera towards the robot, z up
from the table top). Roles decide the physics of
the kinematic world: `movable` kinds can be grasped, `support` kinds carry what is released
over them (on their top), `container` kinds carry it on their inner floor (the `in`
predicate). Colours are RGB and chosen so every graspable kind has a distinct appearance
(top colour, side colour, accent), which the swapped-binding OOD suite relies on.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass

RGB = tuple[int, int, int]


@dataclass(frozen=True)
class Joint:
    """One kinematic degree of freedom of a fixture, moved by pushing or pulling its handle.

    The joint's state q runs from 0 (closed / off) to 1 (fully open / turned). The handle sits at
    `handle` (the kind's own frame: x, y from its centre, z above its bottom) when q = 0 and moves
    `travel` metres along `axis` (unit, own frame) as q goes to 1. While the TCP is within
    `reach` (xy) and `reach_z` (height) of the handle, its motion along the axis drives q;
    moving the handle in the opening direction needs closed fingers when `pull_grip` (a drawer
    is pulled by its handle; a knob lever or a door edge is pushed).
    """

    kind: str  # "slide" (the fixture itself moves: a drawer), "knob", "door" (a state only)
    travel: float  # m of handle travel from q = 0 to q = 1
    axis: tuple[float, float]  # opening direction of the handle in the kind's frame
    handle: tuple[float, float, float]  # handle at q = 0 in the kind's frame (z above its bottom)
    open_at: float  # q at or above which LIBERO's Open / TurnOn holds
    closed_at: float  # q at or below which LIBERO's Close / TurnOff holds
    pull_grip: bool = True  # opening needs the fingers closed on the handle
    reach: float = 0.025  # m, xy distance of the TCP to the handle that engages it
    reach_z: float = 0.025  # m, height difference that still engages it


@dataclass(frozen=True)
class Kind:
    """One object type of the catalogue (sizes in metres, colours RGB)."""

    name: str  # catalogue key, also the word the instructions use (underscores -> spaces)
    shape: str  # "box" (half extents hx, hy) or "cyl" (radius hx == hy)
    hx: float  # half extent along x (radius for cylinders)
    hy: float  # half extent along y (radius for cylinders)
    h: float  # height from bottom to top
    side: RGB  # colour of the body's side faces
    top: RGB  # colour of the top face
    accent: RGB  # colour of the detail (rim interior, label band, cap, burner)
    # render style: plain, bowl, plate, bottle, can, carton, mug, pot, stove, cabinet, rack;
    # containers without a special style draw as a rim around a darker inside
    style: str = "plain"
    movable: bool = True  # graspable by the gripper
    support: bool = False  # things released over it rest on its top
    container: bool = False  # things released over it rest on its inner floor (`in`)
    floor: float = 0.01  # inner floor height above the bottom, containers only
    grip_width: float = 0.04  # finger opening when holding it (<= the gripper's max opening)
    joint: Joint | None = None  # articulation (drawers, stove knob, microwave door)
    pushable: bool = False  # slides along with a low TCP that presses against it (LIBERO's plate push)

    @property
    def radius(self) -> float:
        """Footprint radius used for layout spacing and `next_to` (max half extent)."""
        return max(self.hx, self.hy)

    @property
    def grasp_depth(self) -> float:
        """How far below its top the fingertips close when grasping it."""
        return min(0.03, 0.6 * self.h)


def _k(name, shape, hx, hy, h, side, top, accent, style="plain", **kw) -> Kind:
    return Kind(name, shape, hx, hy, h, side, top, accent, style, **kw)


# Fixtures (never grasped) -------------------------------------------------------------
# Sizes and joints follow LIBERO's assets: the wooden cabinet is 0.23 wide, 0.18 deep and 0.225
# tall with three drawers that slide 0.16 m (Open at >= 0.14 m, Close at <= 0.005 m); the flat
# stove's knob turns 2.1 rad (TurnOn at >= 0.5 rad) and sits 0.15 m behind the burner; the
# microwave door swings 2.09 rad (Open below -1.3 rad, Close at the stop). A kind's own frame has
# its front (drawer fronts, knob side, door) towards -y.


def _drawer(name: str, width: float = 0.1) -> Kind:
    hy, h = 0.075, 0.05
    return _k(name, "box", width, hy, h, (135, 90, 48), (60, 38, 20), (160, 110, 60), "drawer", movable=False,
              container=True, floor=0.008,
              joint=Joint("slide", 0.16, (0.0, -1.0), (0.0, -hy - 0.02, 0.5 * h), open_at=0.14 / 0.16,
                          closed_at=0.005 / 0.16))


_FIXTURES = [
    _k("wooden_cabinet", "box", 0.115, 0.09, 0.225, (120, 78, 40), (150, 100, 55), (90, 55, 25),
       "cabinet", movable=False, support=True),
    _k("white_cabinet", "box", 0.115, 0.09, 0.225, (225, 225, 220), (240, 240, 235), (170, 170, 165),
       "cabinet", movable=False, support=True),
    _drawer("top_drawer"),
    _drawer("middle_drawer"),
    _drawer("bottom_drawer"),
    _k("flat_stove", "box", 0.09, 0.13, 0.025, (45, 45, 48), (30, 30, 32), (200, 40, 30),
       "stove", movable=False, support=True,
       joint=Joint("knob", 0.063, (0.0, 1.0), (-0.03, 0.075, 0.035), open_at=0.5 / 2.1, closed_at=0.005 / 2.1,
                   pull_grip=False, reach=0.02, reach_z=0.02)),
    _k("basket", "box", 0.08, 0.06, 0.07, (190, 150, 95), (120, 90, 50), (215, 180, 120),
       "basket", movable=False, container=True),
    _k("wine_rack", "box", 0.07, 0.09, 0.2, (95, 60, 35), (120, 80, 45), (70, 40, 20),
       "rack", movable=False, support=True),
    _k("microwave", "box", 0.1, 0.08, 0.12, (200, 200, 205), (60, 60, 65), (30, 30, 30),
       "microwave", movable=False, container=True, floor=0.015,
       joint=Joint("door", 0.16, (-0.7071, -0.7071), (0.1, -0.1, 0.06), open_at=1.3 / 2.094, closed_at=0.02,
                   pull_grip=False, reach=0.03, reach_z=0.04)),
    _k("caddy_front", "box", 0.07, 0.03, 0.05, (170, 120, 200), (90, 60, 110), (140, 95, 170),
       "caddy", movable=False, container=True),
    _k("caddy_back", "box", 0.07, 0.03, 0.05, (150, 105, 185), (80, 52, 100), (130, 85, 160),
       "caddy", movable=False, container=True),
]

# Movable objects --------------------------------------------------------------------
_OBJECTS = [
    _k("black_bowl", "cyl", 0.04, 0.04, 0.045, (35, 35, 38), (20, 20, 22), (70, 70, 75),
       "bowl", container=True, grip_width=0.012),
    _k("plate", "cyl", 0.055, 0.055, 0.015, (225, 225, 220), (245, 245, 240), (205, 205, 200),
       "plate", support=True, grip_width=0.01, pushable=True),
    _k("ramekin", "cyl", 0.035, 0.035, 0.035, (235, 225, 200), (250, 245, 230), (210, 195, 165),
       "bowl", support=True, grip_width=0.01),
    _k("cookie_box", "box", 0.05, 0.035, 0.045, (210, 60, 50), (235, 200, 60), (250, 245, 235),
       "carton", support=True, grip_width=0.06),
    _k("wine_bottle", "cyl", 0.025, 0.025, 0.16, (30, 75, 40), (25, 60, 30), (200, 180, 120),
       "bottle", grip_width=0.05),
    _k("cream_cheese", "box", 0.03, 0.02, 0.03, (235, 240, 250), (60, 110, 200), (200, 40, 40),
       "carton", grip_width=0.04),
    _k("alphabet_soup", "cyl", 0.028, 0.028, 0.07, (200, 30, 35), (190, 190, 195), (245, 245, 245),
       "can", grip_width=0.056),
    _k("tomato_sauce", "cyl", 0.028, 0.028, 0.06, (225, 90, 30), (190, 190, 195), (60, 150, 50),
       "can", grip_width=0.056),
    _k("ketchup", "cyl", 0.024, 0.024, 0.10, (190, 20, 20), (240, 240, 240), (250, 250, 250),
       "bottle", grip_width=0.048),
    _k("bbq_sauce", "cyl", 0.025, 0.025, 0.10, (80, 40, 20), (20, 20, 20), (230, 170, 60),
       "bottle", grip_width=0.05),
    _k("salad_dressing", "cyl", 0.025, 0.025, 0.11, (170, 190, 60), (250, 250, 250), (90, 130, 40),
       "bottle", grip_width=0.05),
    _k("butter", "box", 0.03, 0.018, 0.025, (250, 225, 90), (255, 240, 150), (60, 90, 190),
       "carton", grip_width=0.036),
    _k("chocolate_pudding", "box", 0.025, 0.02, 0.03, (110, 60, 30), (140, 80, 40), (240, 200, 80),
       "carton", grip_width=0.04),
    _k("milk", "box", 0.022, 0.022, 0.10, (245, 245, 250), (60, 120, 220), (60, 120, 220),
       "carton", grip_width=0.044),
    _k("orange_juice", "box", 0.022, 0.022, 0.10, (250, 150, 20), (255, 200, 60), (40, 140, 40),
       "carton", grip_width=0.044),
    _k("moka_pot", "cyl", 0.032, 0.032, 0.08, (150, 150, 160), (110, 110, 120), (30, 30, 30),
       "pot", grip_width=0.05),
    _k("white_mug", "cyl", 0.032, 0.032, 0.06, (240, 240, 240), (215, 215, 215), (240, 240, 240),
       "mug", container=True, grip_width=0.05),
    _k("yellow_and_white_mug", "cyl", 0.032, 0.032, 0.06, (245, 215, 60), (240, 240, 240),
       (245, 215, 60), "mug", container=True, grip_width=0.05),
    _k("book", "box", 0.045, 0.018, 0.06, (30, 30, 35), (235, 230, 215), (200, 40, 40),
       "book", grip_width=0.036),
    _k("red_mug", "cyl", 0.032, 0.032, 0.06, (190, 40, 35), (215, 215, 215), (190, 40, 35),
       "mug", container=True, grip_width=0.05),
    _k("frypan", "cyl", 0.07, 0.07, 0.03, (40, 40, 42), (55, 55, 58), (25, 25, 25),
       "bowl", support=True, grip_width=0.02),
]

CATALOGUE: dict[str, Kind] = {k.name: k for k in _FIXTURES + _OBJECTS}

# Table (metres, drawing frame: frames.py). LIBERO's table is 1.0 m deep (its x) and 1.2 m wide
# (its y); the robot stands behind it (+y here), the agent-view camera in front of it (-y).
TABLE_HALF_X = 0.60  # table half width
TABLE_HALF_Y = 0.50  # table half depth
TABLE_CENTER_RADIUS = 0.06  # the `at table_center` region


def kind(name: str) -> Kind:
    """Look up a catalogue kind by name, naming the close matches when unknown."""
    if name not in CATALOGUE:
        close = difflib.get_close_matches(name, list(CATALOGUE), n=3)
        raise KeyError(f"unknown object kind {name!r}; close: {close}")
    return CATALOGUE[name]


def words(name: str) -> str:
    """Instruction words for an object or kind name: 'black_bowl_1' -> 'black bowl'."""
    base = name.rstrip("0123456789").rstrip("_")
    return base.replace("_", " ")
