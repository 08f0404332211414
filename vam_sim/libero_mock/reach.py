"""Reach and grasp diagnostics of an episode: why a failed episode failed.

Success alone does not say whether a policy never found the named object, found it but
missed the grasp, or grasped the wrong thing. `ReachTracker` follows the goal's objects
(every atom's `obj`) on the mocked world after each step:

    closest_xy_m    closest horizontal distance of the gripper to the first goal object
                    while it is not held (0 when it is held)
    grasped_named   a goal object to be put on or in something was held at some step (None when
                    the task places nothing: a drawer or a stove is operated, a plate pushed
                    `at` a region, not grasped)
    grasped_other   an object that no atom names was held at some step

It needs the kinematic world, so it exists only for the mocked bridge (None elsewhere).
"""
from __future__ import annotations

import math

import numpy as np

from .env import LiberoMockEnv


class ReachTracker:
    def __init__(self, env):
        atoms = env.task.predicate.atoms
        self.env = env
        self.first = atoms[0].obj
        self.named = {a.obj for a in atoms}
        self.placed = {a.obj for a in atoms if a.rel in ("on", "in")}   # lifted to be placed: must be grasped
        self.graspable: set | None = None          # of those, the ones that can be held (known once a world exists)
        self.closest = math.inf
        self.grasped_named = False
        self.grasped_other = False

    @classmethod
    def for_env(cls, env) -> "ReachTracker | None":
        """A tracker when `env` exposes the mocked kinematic world, else None (real LIBERO)."""
        return cls(env) if isinstance(env, LiberoMockEnv) else None

    def update(self) -> None:
        """Call after reset() and after every step."""
        world = self.env.world
        if world is None:
            return
        if self.graspable is None:
            self.graspable = {o for o in self.placed if world[o].kind.movable}
        g = world.gripper
        held = g.held
        if held is not None:
            self.grasped_named |= held in self.graspable
            self.grasped_other |= held not in self.named
        if held == self.first:
            self.closest = 0.0
        else:
            obj = world[self.first]
            self.closest = min(self.closest, float(np.hypot(g.pos[0] - obj.pos[0], g.pos[1] - obj.pos[1])))

    def summary(self) -> dict:
        return {"object": self.first, "closest_xy_m": round(self.closest, 4) if math.isfinite(self.closest) else None,
                "grasped_named": self.grasped_named if self.graspable else None,
                "grasped_other": self.grasped_other}


def reach_stats(episodes: list[dict]) -> dict | None:
    """Over the episodes that carry a `reach` summary: grasp counts and the median closest approach."""
    reach = [e["reach"] for e in episodes if e.get("reach")]
    if not reach:
        return None
    closest = [r["closest_xy_m"] for r in reach if r["closest_xy_m"] is not None]
    with_object = [r for r in reach if r["grasped_named"] is not None]
    return {"episodes": len(reach), "object_episodes": len(with_object),
            "grasped_named": sum(r["grasped_named"] for r in with_object),
            "grasped_other": sum(r["grasped_other"] for r in reach),
            "closest_xy_cm_median": round(100 * float(np.median(closest)), 2) if closest else None}
