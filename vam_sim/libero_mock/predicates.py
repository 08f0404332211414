"""Goal predicates of the mocked LIBERO tasks: BDDL's On / In / NextTo, On a table region,
and the articulated Open / Close / TurnOn.

A task's goal is a conjunction of atoms. Atoms are evaluated on the kinematic world; an
object still in the gripper satisfies none of them, as in LIBERO, where the goal is checked
on the settled scene. A goal may also carry preconditions: atoms the scripted expert achieves
first that LIBERO's goal does not test (the drawer must be open to put the bowl inside).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from . import frames
from .objects import TABLE_CENTER_RADIUS
from .world import World

RELATIONS = ("on", "in", "next_to", "at", "open", "close", "turnon")
UNARY = ("open", "close", "turnon")  # relations on one articulated entity (ref unused)


@dataclass(frozen=True)
class Region:
    """A table region (drawing frame): a rectangle, or a disc of radius hx when `disc`."""

    cx: float
    cy: float
    hx: float
    hy: float
    disc: bool = False

    def contains(self, x: float, y: float) -> bool:
        if self.disc:
            return math.hypot(x - self.cx, y - self.cy) <= self.hx
        return abs(x - self.cx) <= self.hx and abs(y - self.cy) <= self.hy


def _bddl_region(x0: float, y0: float, x1: float, y1: float) -> Region:
    """A BDDL `(:ranges ((x0 y0 x1 y1)))` rectangle (LIBERO's table axes) in the drawing frame."""
    ax, ay = frames.table_xy_from_libero(x0, y0)
    bx, by = frames.table_xy_from_libero(x1, y1)
    return Region((ax + bx) / 2, (ay + by) / 2, abs(ax - bx) / 2, abs(ay - by) / 2)


# Named table regions for `at` (LIBERO's BDDL ranges, converted).
REGIONS = {
    "table_center": Region(0.0, 0.0, TABLE_CENTER_RADIUS, TABLE_CENTER_RADIUS, disc=True),
    "stove_front": _bddl_region(-0.09, 0.17, -0.01, 0.25),     # libero_goal main_table_stove_front_region
    "plate_right": _bddl_region(0.10, 0.05, 0.20, 0.15),       # libero_10 living_room_table_plate_right_region
}


@dataclass(frozen=True)
class Atom:
    """One relation `rel(obj, ref)`; `ref` is an entity name or a region for `at`."""

    rel: str  # "on", "in", "next_to" or "at"
    obj: str  # entity that must be placed
    ref: str  # entity or region it relates to

    def __post_init__(self) -> None:
        if self.rel not in RELATIONS:
            raise ValueError(f"unknown relation {self.rel!r}; expected one of {RELATIONS}")
        if self.rel == "at" and self.ref not in REGIONS:
            raise ValueError(f"unknown region {self.ref!r}; expected one of {list(REGIONS)}")

    def __str__(self) -> str:
        return f"({self.rel} {self.obj})" if self.rel in UNARY else f"({self.rel} {self.obj} {self.ref})"


def holds(atom: Atom, world: World, next_to_gap: float = 0.07) -> bool:
    """Whether `atom` is true in `world` (held objects satisfy nothing)."""
    if atom.obj not in world.entities:
        raise KeyError(f"predicate {atom} names unknown object {atom.obj!r}")
    o = world[atom.obj]
    if atom.rel in UNARY:
        if o.kind.joint is None:
            raise KeyError(f"predicate {atom} needs an articulated entity; {atom.obj!r} has no joint")
        return o.is_closed() if atom.rel == "close" else o.is_open()
    if world.gripper.held is not None and atom.obj in world.chain(world.gripper.held):
        return False
    if atom.rel == "at":
        return o.support is None and REGIONS[atom.ref].contains(o.pos[0], o.pos[1])
    if atom.ref not in world.entities:
        raise KeyError(f"predicate {atom} names unknown reference {atom.ref!r}")
    r = world[atom.ref]
    if atom.rel == "on":
        return o.support == atom.ref
    if atom.rel == "in":
        return o.support == atom.ref and r.kind.container
    # next_to: side by side on the same surface, footprints at most `next_to_gap` apart.
    if o.support == r.name or r.support == o.name or abs(o.pos[2] - r.pos[2]) > 0.02:
        return False
    gap = math.hypot(o.pos[0] - r.pos[0], o.pos[1] - r.pos[1]) - o.kind.radius - r.kind.radius
    return gap <= next_to_gap


@dataclass(frozen=True)
class Goal:
    """A conjunction of atoms (success), plus preconditions; `steps` is the expert's order."""

    atoms: tuple[Atom, ...]
    pre: tuple[Atom, ...] = ()  # achieved first by the expert, not part of success

    def __post_init__(self) -> None:
        if not self.atoms:
            raise ValueError("a goal needs at least one atom")

    @property
    def steps(self) -> tuple[Atom, ...]:
        return self.pre + self.atoms

    def satisfied(self, world: World, next_to_gap: float = 0.07) -> bool:
        return all(holds(a, world, next_to_gap) for a in self.atoms)

    def first_unsatisfied(self, world: World, next_to_gap: float = 0.07) -> int | None:
        """Index into `steps` of the first step still to do (None once the goal holds)."""
        if self.satisfied(world, next_to_gap):
            return None
        for i, a in enumerate(self.steps):
            if not holds(a, world, next_to_gap):
                return i
        return None

    def __str__(self) -> str:
        return "(and " + " ".join(str(a) for a in self.atoms) + ")"


def goal(*atoms: tuple, pre: tuple = ()) -> Goal:
    """Build a Goal from (rel, obj, ref) triples ((rel, obj) for open / close / turnon)."""
    def atom(a):
        return Atom(a[0], a[1], a[2] if len(a) > 2 else "")
    return Goal(tuple(atom(a) for a in atoms), tuple(atom(a) for a in pre))
