"""Scripted expert for every mocked LIBERO task, with per-step phase labels.

The expert is a pure function of the environment's state (plus a per-episode cache of the
chosen place spots), so it can take over from any state a policy leaves behind. It works
through the goal's atoms in order; for each it runs pick-and-place:

    approach (free space, cruise height)  -> phase "planning"
    descend, grasp, lift                  -> phase "manipulation"
    transport (free space, cruise height) -> phase "planning"
    lower, release                        -> phase "manipulation"

Articulated steps (open / close a drawer or door, turn on the stove) approach the handle at
cruise height, descend to it, hook it with closed fingers where pulling needs that, and
drive it along its axis (pull / press); pushing the plate into a region starts low behind
it and pushes (push). All of those after the approach are "manipulation".

Cruise height clears the tallest thing in the scene by 5 cm (with the held object hanging
below the fingers). Place spots avoid what already sits on the receptacle; `next_to` spots
are free table spots beside the reference, nearest to the object first.
"""
from __future__ import annotations

import math

import cv2
import numpy as np

from . import frames
from .predicates import REGIONS, UNARY, Atom
from .world import GRIP_ON_HANDLE, PUSH_MARGIN, World

PHASES = ("planning", "manipulation")
MODE_PHASE = {"approach": "planning", "transport": "planning", "descend": "manipulation",
              "grasp": "manipulation", "lift": "manipulation", "lower": "manipulation",
              "release": "manipulation", "drop": "manipulation", "open": "manipulation",
              "hook": "manipulation", "pull": "manipulation", "press": "manipulation",
              "push": "manipulation", "done": "manipulation"}
GAIN = 0.7  # fraction of the remaining error commanded per step
SPEED = 0.9  # fraction of the max translation per step the expert uses
XY_TOL_HIGH, XY_TOL_LOW = 0.012, 0.025  # m, alignment tolerance above / near cruise height
Z_TOL = 0.006  # m, height tolerance for grasp and release
RELEASE_CLEARANCE = 0.012  # m between the held object's bottom and the surface at release
EDGE = (0.4, 0.4)  # m, |x|, |y| bounds for next_to spots
LIFT_BELOW = 0.06  # m below cruise height from which the expert first lifts straight up before moving across


def _cruise(world: World, excl: set[str], hang: float) -> float:
    tops = [e.top for e in world.entities.values() if e.name not in excl]
    z = max(tops, default=0.0) + hang + 0.05
    return float(min(max(z, 0.15), world.hi[2] - 0.005))


def _grasp_z(world: World, name: str) -> float:
    e = world[name]
    return float(e.top - e.kind.grasp_depth)


def _spot_on(world: World, atom: Atom, excl: set[str]) -> tuple[float, float]:
    rec, obj = world[atom.ref], world[atom.obj]
    r_obj = obj.kind.radius
    dx = max(0.0, rec.kind.hx - 0.6 * r_obj - 0.005)
    dy = max(0.0, rec.kind.hy - 0.6 * r_obj - 0.005)
    local = [(0, 0), (dx, 0), (-dx, 0), (0, dy), (0, -dy), (dx, dy), (-dx, dy), (dx, -dy), (-dx, -dy)]
    c, s = math.cos(rec.yaw), math.sin(rec.yaw)
    occupants = [e for e in world.entities.values() if e.support == rec.name and e.name not in excl]
    best, best_clear = None, -1e9
    for lx, ly in local:
        x, y = rec.pos[0] + c * lx - s * ly, rec.pos[1] + s * lx + c * ly
        clear = min((math.hypot(x - e.pos[0], y - e.pos[1]) - r_obj - e.kind.radius
                     for e in occupants), default=1.0)
        if clear >= -0.01:
            return float(x), float(y)
        if clear > best_clear:
            best, best_clear = (float(x), float(y)), clear
    return best


def _spot_next_to(world: World, atom: Atom, excl: set[str]) -> tuple[float, float]:
    ref, obj = world[atom.ref], world[atom.obj]
    dist = obj.kind.radius + ref.kind.radius + 0.01
    others = [e for e in world.entities.values()
              if e.support is None and e.name not in excl and e.name != ref.name]
    best, best_key = None, None
    for i in range(36):
        a = 2 * math.pi * i / 36
        x, y = ref.pos[0] + dist * math.cos(a), ref.pos[1] + dist * math.sin(a)
        if abs(x) > EDGE[0] or abs(y) > EDGE[1]:
            continue
        clear = min((math.hypot(x - e.pos[0], y - e.pos[1]) - obj.kind.radius - e.kind.radius
                     for e in others), default=1.0)
        # Free spots first (nearest to the object), else the least crowded one.
        key = (0, math.hypot(x - obj.pos[0], y - obj.pos[1])) if clear >= 0.01 else (1, -clear)
        if best_key is None or key < best_key:
            best, best_key = (float(x), float(y)), key
    if best is None:
        raise RuntimeError(f"expert: no spot on the table next to {ref.name} for {obj.name}")
    return best


def place_spot(env, index: int, atom: Atom) -> tuple[float, float]:
    """Where the expert puts atom's object (cached per episode and atom)."""
    key = (index, str(atom))
    if key not in env._expert_cache:
        world = env.world
        excl = set(world.chain(atom.obj))
        if atom.rel == "at":
            spot = (REGIONS[atom.ref].cx, REGIONS[atom.ref].cy)
        elif atom.rel == "next_to":
            spot = _spot_next_to(world, atom, excl)
        else:
            spot = _spot_on(world, atom, excl)
        env._expert_cache[key] = (float(spot[0]), float(spot[1]))
    return env._expert_cache[key]


def _decide(env) -> tuple[str, np.ndarray | None, float]:
    """(mode, TCP target or None to hold still, gripper command) for the current state."""
    world, cfg = env.world, env.cfg
    g = world.gripper
    idx = env.task.predicate.first_unsatisfied(world, cfg.next_to_gap)
    if idx is None:
        return "done", None, -1.0
    atom = env.task.predicate.steps[idx]
    obj = world[atom.obj]
    p = g.pos
    if g.held is not None and g.held != atom.obj:
        return "drop", None, -1.0
    if atom.rel in UNARY:
        return _drive(world, obj, opening=atom.rel != "close")
    if atom.rel == "at" and obj.kind.pushable and g.held is None:
        return _push(world, obj, REGIONS[atom.ref])
    if g.held is None:
        cruise = _cruise(world, set(), 0.0)
        dxy = math.hypot(p[0] - obj.pos[0], p[1] - obj.pos[1])
        tol = XY_TOL_HIGH if p[2] > cruise - 0.02 else XY_TOL_LOW
        if dxy > tol:
            if p[2] < cruise - LIFT_BELOW and dxy > 0.03:
                return "lift", np.array([p[0], p[1], cruise]), -1.0
            return "approach", np.array([obj.pos[0], obj.pos[1], cruise]), -1.0
        target = np.array([obj.pos[0], obj.pos[1], _grasp_z(world, obj.name)])
        if p[2] > target[2] + Z_TOL:
            if g.width < obj.kind.grip_width + 0.01:
                return "open", None, -1.0
            return "descend", target, -1.0
        if g.width < obj.kind.grip_width - 0.002:  # closed past it: missed, open again
            return "open", None, -1.0
        return "grasp", target, 1.0
    # Holding the right object: carry it to the spot.
    excl = set(world.chain(obj.name))
    hang = float(p[2] - obj.pos[2])
    cruise = _cruise(world, excl, hang)
    sx, sy = place_spot(env, idx, atom)
    off = obj.pos[:2] - p[:2]
    tx, ty = sx - off[0], sy - off[1]
    dxy = math.hypot(p[0] - tx, p[1] - ty)
    tol = XY_TOL_HIGH if p[2] > cruise - 0.02 else XY_TOL_LOW
    if dxy > tol:
        if p[2] < cruise - LIFT_BELOW and dxy > 0.03:
            return "lift", np.array([p[0], p[1], cruise]), 1.0
        return "transport", np.array([tx, ty, cruise]), 1.0
    surface, _ = world.surface_under(sx, sy, excl)
    release_z = surface + RELEASE_CLEARANCE + hang
    target = np.array([tx, ty, release_z])
    if p[2] > release_z + Z_TOL:
        return "lower", target, 1.0
    return "release", target, -1.0


def _engage(world: World, point: np.ndarray, xy_tol: float, z_tol: float,
            grip: float) -> tuple[str, np.ndarray | None, float] | None:
    """Bring the TCP to `point` from above (lift, approach at cruise height, descend); None once there."""
    p = world.gripper.pos
    dxy = math.hypot(p[0] - point[0], p[1] - point[1])
    if dxy <= xy_tol and abs(p[2] - point[2]) <= z_tol:
        return None
    cruise = _cruise(world, set(), 0.0)
    if dxy > max(xy_tol, XY_TOL_HIGH):
        if p[2] < cruise - LIFT_BELOW and dxy > 0.03:
            return "lift", np.array([p[0], p[1], cruise]), grip
        return "approach", np.array([point[0], point[1], cruise]), grip
    return "descend", np.asarray(point, float), grip


def _drive(world: World, e, opening: bool) -> tuple[str, np.ndarray | None, float]:
    """Open / close / turn an articulated entity through its handle (drawer, knob, door)."""
    j, g = e.kind.joint, world.gripper
    hook = opening and j.pull_grip
    h = e.handle()
    step = _engage(world, h, 0.4 * j.reach, 0.4 * j.reach_z, -1.0 if not hook or g.width > GRIP_ON_HANDLE else 1.0)
    if step is not None:
        return step
    if hook and g.width > GRIP_ON_HANDLE:
        return "hook", h, 1.0
    remaining = ((1.0 - e.q) if opening else -e.q) * j.travel
    return ("pull" if hook else "press"), h + remaining * e.axis(), 1.0 if hook else -1.0


def _push(world: World, obj, region) -> tuple[str, np.ndarray | None, float]:
    """Slide a pushable object (the plate) into a table region with a low TCP behind it."""
    c = np.array([region.cx, region.cy])
    v = c - obj.pos[:2]
    dist = float(np.linalg.norm(v))
    u = v / dist if dist > 1e-9 else np.array([1.0, 0.0])
    p = world.gripper.pos
    z = obj.top - 0.004
    touching = p[2] <= obj.top + 0.008 and obj.covers(p[0], p[1], PUSH_MARGIN)
    if not touching:
        start = np.append(obj.pos[:2] - u * (obj.kind.radius + 0.006), z)
        step = _engage(world, start, 0.004, 0.004, -1.0)
        if step is not None:
            return step
    return "push", np.array([p[0] + v[0], p[1] + v[1], z]), -1.0


def expert_action(env, noise: float = 0.0, rng: np.random.Generator | None = None) -> np.ndarray:
    """The expert's 7-dim action in [-1, 1] for the current state (float32).

    `noise` > 0 adds Gaussian noise of that standard deviation (in action units) to the
    translation, drawn from `rng`, for varied demonstrations; the expert's feedback corrects
    it on the next steps.
    """
    env._require_reset()
    if noise < 0 or not math.isfinite(noise):
        raise ValueError(f"noise must be a finite number >= 0, got {noise!r}")
    if noise > 0 and rng is None:
        raise ValueError("noise > 0 needs an explicit rng (np.random.Generator) for reproducible demos")
    mode, target, grip = _decide(env)
    world, cfg = env.world, env.cfg
    a = np.zeros(7, dtype=np.float64)
    if target is not None:
        step = (target - world.gripper.pos) * GAIN
        n = float(np.linalg.norm(step))
        vmax = SPEED * cfg.max_translation
        if n > vmax:
            step *= vmax / n
        a[:3] = step / cfg.max_translation
    # Rotate back towards the reset orientation (undoes drift a policy may leave).
    rv, _ = cv2.Rodrigues(cfg.home_rotation() @ world.gripper.rot.T)
    a[3:6] = np.clip(rv.reshape(3) * 0.5 / cfg.max_rotation, -1.0, 1.0)
    a[6] = grip
    if noise > 0:
        a[:3] += rng.normal(0.0, noise, 3)
    # The expert thinks in the drawing frame; the environment takes LIBERO's action axes.
    return frames.action_to_libero(np.clip(a, -1.0, 1.0)).astype(np.float32)


def expert_mode(env) -> str:
    """The expert's current mode name (approach, descend, grasp, lift, transport, ...)."""
    env._require_reset()
    return _decide(env)[0]


def expert_phase(env) -> str:
    """Phase label of the current state: 'planning' or 'manipulation' (see module doc)."""
    return MODE_PHASE[expert_mode(env)]
