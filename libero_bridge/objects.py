"""Object catalogue of the mocked LIBERO tabletop: shapes, sizes, roles and colours.

Each kind is a box or an upright cylinder (metres, table frame: x right, y away from the
agent-view camera towards the robot, z up from the table top). Roles decide the physics of
the kinematic world: `movable` kinds can be grasped, `support` kinds carry what is released
over them (on their top), `container` kinds carry it on their inner floor (the `in`
predicate). Colours are RGB and chosen so every graspable kind has a distinct appearance
(top colour, side colour, accent), which the swapped-binding OOD suite relies on.
"""
from __future__ import annotations

from dataclasses import dataclass

RGB = tuple[int, int, int]


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
_FIXTURES = [
    _k("wooden_cabinet", "box", 0.08, 0.06, 0.16, (120, 78, 40), (150, 100, 55), (90, 55, 25),
       "cabinet", movable=False, support=True),
    _k("top_drawer", "box", 0.06, 0.045, 0.04, (135, 90, 48), (60, 38, 20), (160, 110, 60),
       "drawer", movable=False, container=True, floor=0.008),
    _k("bottom_drawer", "box", 0.06, 0.045, 0.04, (135, 90, 48), (60, 38, 20), (160, 110, 60),
       "drawer", movable=False, container=True, floor=0.008),
    _k("flat_stove", "box", 0.08, 0.06, 0.02, (45, 45, 48), (30, 30, 32), (200, 40, 30),
       "stove", movable=False, support=True),
    _k("basket", "box", 0.08, 0.06, 0.07, (190, 150, 95), (120, 90, 50), (215, 180, 120),
       "basket", movable=False, container=True),
    _k("wine_rack", "box", 0.06, 0.04, 0.06, (95, 60, 35), (120, 80, 45), (70, 40, 20),
       "rack", movable=False, support=True),
    _k("microwave", "box", 0.09, 0.07, 0.11, (200, 200, 205), (60, 60, 65), (30, 30, 30),
       "microwave", movable=False, container=True, floor=0.015),
    _k("caddy_front", "box", 0.07, 0.03, 0.05, (170, 120, 200), (90, 60, 110), (140, 95, 170),
       "caddy", movable=False, container=True),
    _k("caddy_back", "box", 0.07, 0.03, 0.05, (150, 105, 185), (80, 52, 100), (130, 85, 160),
       "caddy", movable=False, container=True),
]

# Movable objects --------------------------------------------------------------------
_OBJECTS = [
    _k("black_bowl", "cyl", 0.045, 0.045, 0.045, (35, 35, 38), (20, 20, 22), (70, 70, 75),
       "bowl", container=True, grip_width=0.012),
    _k("plate", "cyl", 0.075, 0.075, 0.015, (225, 225, 220), (245, 245, 240), (205, 205, 200),
       "plate", support=True, grip_width=0.01),
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
    _k("book", "box", 0.045, 0.018, 0.06, (40, 70, 160), (235, 230, 215), (200, 40, 40),
       "book", grip_width=0.036),
]

CATALOGUE: dict[str, Kind] = {k.name: k for k in _FIXTURES + _OBJECTS}

# Table and workspace (metres). The robot stands behind the table (+y), the agent-view camera
# in front of it (-y), as in LIBERO's agentview.
TABLE_HALF_X = 0.40  # table half width
TABLE_HALF_Y = 0.30  # table half depth
TABLE_CENTER_RADIUS = 0.06  # the `at table_center` region


def kind(name: str) -> Kind:
    """Look up a catalogue kind by name, naming the close matches when unknown."""
    if name not in CATALOGUE:
        import difflib

        close = difflib.get_close_matches(name, list(CATALOGUE), n=3)
        raise KeyError(f"unknown object kind {name!r}; close: {close}")
    return CATALOGUE[name]


def words(name: str) -> str:
    """Instruction words for an object or kind name: 'black_bowl_1' -> 'black bowl'."""
    base = name.rstrip("0123456789").rstrip("_")
    return base.replace("_", " ")
