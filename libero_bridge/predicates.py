"""Goal predicates of the mocked LIBERO tasks (BDDL's On / In / NextTo, plus a region test).

A task's goal is a conjunction of atoms. Atoms are evaluated on the kinematic world; an
object still in the gripper satisfies none of them, as in LIBERO, where the goal is checked
on the settled scene.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from .objects import TABLE_CENTER_RADIUS
from .world import World

RELATIONS = ("on", "in", "next_to", "at")
REGIONS = {"table_center": (0.0, 0.0)}  # named table regions for `at` (x, y in metres)


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
        return f"({self.rel} {self.obj} {self.ref})"


def holds(atom: Atom, world: World, next_to_gap: float = 0.07) -> bool:
    """Whether `atom` is true in `world` (held objects satisfy nothing)."""
    if atom.obj not in world.entities:
        raise KeyError(f"predicate {atom} names unknown object {atom.obj!r}")
    o = world[atom.obj]
    if world.gripper.held is not None and atom.obj in world.chain(world.gripper.held):
        return False
    if atom.rel == "at":
        cx, cy = REGIONS[atom.ref]
        return o.support is None and math.hypot(o.pos[0] - cx, o.pos[1] - cy) <= TABLE_CENTER_RADIUS
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
    """A conjunction of atoms, in the order a scripted expert achieves them."""

    atoms: tuple[Atom, ...]

    def __post_init__(self) -> None:
        if not self.atoms:
            raise ValueError("a goal needs at least one atom")

    def satisfied(self, world: World, next_to_gap: float = 0.07) -> bool:
        return all(holds(a, world, next_to_gap) for a in self.atoms)

    def first_unsatisfied(self, world: World, next_to_gap: float = 0.07) -> int | None:
        for i, a in enumerate(self.atoms):
            if not holds(a, world, next_to_gap):
                return i
        return None

    def __str__(self) -> str:
        return "(and " + " ".join(str(a) for a in self.atoms) + ")"


def goal(*atoms: tuple[str, str, str]) -> Goal:
    """Build a Goal from (rel, obj, ref) triples."""
    return Goal(tuple(Atom(*a) for a in atoms))
