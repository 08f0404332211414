"""Kinematic tabletop world: entities resting on each other, and a parallel-jaw gripper.

No dynamics: the tool-centre point (TCP, between the fingertips) moves by the commanded
delta, clamped to the workspace and above the surface below it. Closing the fingers on an
object inside the grasp zone attaches it (it then moves rigidly with the TCP, carrying what
rests on it); opening them releases it onto the highest support or container floor under
its centre (or the table). This is enough for on/in/next_to tasks and keeps a step at a few
microseconds, so the closed loop is dominated by rendering and the policy.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import cv2
import numpy as np

from . import frames
from .config import LiberoMockConfig
from .objects import Kind

# The gripper pointing straight down: a rotation of pi about x (LIBERO's eef axis-angle
# reads about (pi, 0, 0) in this pose).
R_DOWN = np.array([[1.0, 0.0, 0.0], [0.0, -1.0, 0.0], [0.0, 0.0, -1.0]])
GRIP_ON_HANDLE = 0.02  # m: fingers closed at least this far hold a handle (pulling a drawer)
PUSH_HEIGHT = 0.01  # m above a pushable object's top below which the TCP presses against it
PUSH_MARGIN = 0.012  # m beyond its footprint the fingers still touch it


@dataclass
class Entity:
    """One object instance: pose of its bottom centre and what it rests on."""

    name: str  # instance name, e.g. "black_bowl_1"
    kind: Kind  # catalogue entry (shape, roles, colours)
    pos: np.ndarray  # (3,) x, y of the centre and z of the bottom, metres
    yaw: float = 0.0  # rotation about z, rad
    support: str | None = None  # entity it rests on/in; None = the table (or held)
    q: float = 0.0  # joint state, 0 closed/off .. 1 open/turned (articulated kinds only)
    base: np.ndarray | None = None  # (3,) position at q = 0 (articulated kinds; set on creation)

    def __post_init__(self) -> None:
        if self.kind.joint is not None and self.base is None:
            j = self.kind.joint
            self.base = self.pos - (self.q * j.travel * self.axis() if j.kind == "slide" else 0.0)

    @property
    def top(self) -> float:
        return float(self.pos[2] + self.kind.h)

    @property
    def accessible(self) -> bool:
        """A container whose door is shut carries things on its top, not inside."""
        j = self.kind.joint
        return not (j is not None and j.kind == "door" and self.q < j.open_at)

    def rest_height(self) -> float | None:
        """Height at which things released over it come to rest; None if it carries nothing."""
        if self.kind.container and self.accessible:
            return float(self.pos[2] + self.kind.floor)
        if self.kind.support or self.kind.container:
            return self.top
        return None

    def _local(self, v: np.ndarray) -> np.ndarray:
        c, s = math.cos(self.yaw), math.sin(self.yaw)
        return np.array([c * v[0] - s * v[1], s * v[0] + c * v[1]])

    def axis(self) -> np.ndarray:
        """(3,) world direction in which the joint's handle moves as q grows."""
        return np.append(self._local(np.asarray(self.kind.joint.axis, float)), 0.0)

    def handle(self) -> np.ndarray:
        """(3,) world position of the joint's handle at the current q."""
        j = self.kind.joint
        h = np.asarray(j.handle, float)
        return self.base + np.append(self._local(h[:2]), h[2]) + self.q * j.travel * self.axis()

    def is_open(self) -> bool:
        return self.q >= self.kind.joint.open_at

    def is_closed(self) -> bool:
        return self.q <= self.kind.joint.closed_at

    def covers(self, x: float, y: float, margin: float = 0.0) -> bool:
        """Whether the point (x, y) lies over its footprint (grown by `margin`)."""
        dx, dy = x - self.pos[0], y - self.pos[1]
        if self.kind.shape == "cyl":
            return dx * dx + dy * dy <= (self.kind.hx + margin) ** 2
        c, s = math.cos(self.yaw), math.sin(self.yaw)
        lx, ly = c * dx + s * dy, -s * dx + c * dy
        return abs(lx) <= self.kind.hx + margin and abs(ly) <= self.kind.hy + margin


@dataclass
class Gripper:
    """TCP pose, finger opening and the grasped entity."""

    pos: np.ndarray  # (3,) TCP position, metres
    rot: np.ndarray = field(default_factory=lambda: R_DOWN.copy())  # (3, 3) world-from-tool
    width: float = 0.08  # m between the fingers
    held: str | None = None  # name of the grasped entity
    offset: np.ndarray = field(default_factory=lambda: np.zeros(3))  # held.pos - pos at grasp

    def fingers(self) -> np.ndarray:
        """Two finger joint positions (+w/2, -w/2), metres, as robosuite's Panda gripper."""
        return np.array([self.width / 2.0, -self.width / 2.0])


class World:
    """Entities plus gripper, advanced by `apply(action)`; all geometry in metres."""

    def __init__(self, entities: list[Entity], gripper: Gripper, cfg: LiberoMockConfig):
        self.cfg = cfg
        self.entities: dict[str, Entity] = {e.name: e for e in entities}
        self.gripper = gripper
        self.lo, self.hi = cfg.workspace()  # drawing frame

    # -- queries -------------------------------------------------------------------------
    def __getitem__(self, name: str) -> Entity:
        return self.entities[name]

    def chain(self, name: str) -> list[str]:
        """`name` and everything resting on it, recursively."""
        out, frontier = [name], [name]
        while frontier:
            parent = frontier.pop()
            for e in self.entities.values():
                if e.support == parent and e.name not in out:
                    out.append(e.name)
                    frontier.append(e.name)
        return out

    def surface_under(self, x: float, y: float,
                      exclude: set[str] | frozenset = frozenset()) -> tuple[float, str | None]:
        """Highest resting height over (x, y) and the entity providing it (None = table)."""
        best_z, best = 0.0, None
        for e in self.entities.values():
            if e.name in exclude or e.name == self.gripper.held:
                continue
            z = e.rest_height()
            if z is not None and z > best_z and e.covers(x, y):
                best_z, best = z, e.name
        return best_z, best

    def tip_floor(self, x: float, y: float) -> float:
        """Lowest TCP height over (x, y): fingertips may reach an object's grasp height."""
        floor = 0.0
        for e in self.entities.values():
            if e.name == self.gripper.held or not e.covers(x, y):
                continue
            z = e.pos[2] + e.kind.floor if (e.kind.container and e.accessible) else e.top - e.kind.grasp_depth
            floor = max(floor, float(z))
        return floor

    def grasp_candidate(self, opening: float) -> str | None:
        """Topmost movable entity in the grasp zone that fits in `opening`."""
        p = self.gripper.pos
        best, best_top = None, -1.0
        for e in self.entities.values():
            k = e.kind
            if not k.movable or k.grip_width > opening + 1e-9:
                continue
            r = min(k.radius, self.cfg.grasp_radius) + 0.01
            if (p[0] - e.pos[0]) ** 2 + (p[1] - e.pos[1]) ** 2 > r * r:
                continue
            if not (e.pos[2] - 0.005 <= p[2] <= e.top + 0.005):
                continue
            if e.top > best_top:
                best, best_top = e.name, e.top
        return best

    # -- dynamics ------------------------------------------------------------------------
    def apply(self, action: np.ndarray) -> None:
        """Advance one step with a validated, clipped action in [-1, 1]^7."""
        cfg, g = self.cfg, self.gripper
        old = g.pos.copy()
        new = np.clip(old + action[:3] * cfg.max_translation, self.lo, self.hi)
        if g.held is not None:
            excl = set(self.chain(g.held))
            floor, _ = self.surface_under(new[0] + g.offset[0], new[1] + g.offset[1], excl)
            new[2] = max(new[2], floor - g.offset[2])
        else:
            new[2] = max(new[2], self.tip_floor(new[0], new[1]))
        new[2] = min(new[2], self.hi[2])
        if g.held is None:
            self._drive_joints(old, new)
            self._push(old, new)
        g.pos = new
        self._rotate(action[3:6] * cfg.max_rotation)
        self._actuate_fingers(float(action[6]))
        if g.held is not None:
            held = self.entities[g.held]
            self._move_chain(g.held, g.pos + g.offset - held.pos)

    def _drive_joints(self, old: np.ndarray, new: np.ndarray) -> None:
        """A TCP at a handle drives the joint by its motion along the joint's axis."""
        g = self.gripper
        for e in self.entities.values():
            j = e.kind.joint
            if j is None:
                continue
            h = e.handle()
            if abs(old[2] - h[2]) > j.reach_z or math.hypot(old[0] - h[0], old[1] - h[1]) > j.reach:
                continue
            ax = e.axis()
            dq = float((new - old) @ ax) / j.travel
            if dq > 0 and j.pull_grip and g.width > GRIP_ON_HANDLE:
                continue  # open fingers slide off a handle they should pull
            q = min(1.0, max(0.0, e.q + dq))
            if j.kind == "slide":
                self._move_chain(e.name, (q - e.q) * j.travel * ax)
            e.q = q

    def _push(self, old: np.ndarray, new: np.ndarray) -> None:
        """A low TCP pressing against a pushable object slides it (and what rests on it) along."""
        d = np.array([new[0] - old[0], new[1] - old[1], 0.0])
        if not np.any(d[:2]):
            return
        for e in self.entities.values():
            if not e.kind.pushable or e.support is not None:
                continue
            if old[2] <= e.top + PUSH_HEIGHT and e.covers(new[0], new[1], PUSH_MARGIN):
                self._move_chain(e.name, d)

    def _rotate(self, rotvec: np.ndarray) -> None:
        if not np.any(rotvec):
            return
        dr, _ = cv2.Rodrigues(np.asarray(rotvec, dtype=np.float64).reshape(3, 1))
        rot = dr @ self.gripper.rot
        # Tool z axis is rot[:, 2]; pointing down means it equals -z of the world.
        if math.acos(max(-1.0, min(1.0, -rot[2, 2]))) <= self.cfg.max_tilt:
            self.gripper.rot = rot

    def _actuate_fingers(self, command: float) -> None:
        """command -1 opens fully, +1 closes fully; fingers move at gripper_speed per step."""
        cfg, g = self.cfg, self.gripper
        target = cfg.gripper_max_width * (1.0 - command) / 2.0
        step = max(-cfg.gripper_speed, min(cfg.gripper_speed, target - g.width))
        new_width = g.width + step
        if g.held is not None:
            grip = self.entities[g.held].kind.grip_width
            if new_width > grip + 0.003:
                self._release()
                g.width = new_width
            else:
                g.width = grip
            return
        if step < 0:
            name = self.grasp_candidate(g.width)
            if name is not None and self.entities[name].kind.grip_width >= new_width:
                self._attach(name)
                return
        g.width = new_width

    def _attach(self, name: str) -> None:
        g, e = self.gripper, self.entities[name]
        g.held, g.width = name, e.kind.grip_width
        g.offset = e.pos - g.pos
        e.support = None

    def _release(self) -> None:
        g = self.gripper
        e = self.entities[g.held]
        excl = set(self.chain(e.name))
        g.held = None
        z, support = self.surface_under(e.pos[0], e.pos[1], excl)
        e.support = support
        self._move_chain(e.name, np.array([0.0, 0.0, z - e.pos[2]]))

    def _move_chain(self, name: str, delta: np.ndarray) -> None:
        if not np.any(delta):
            return
        for n in self.chain(name):
            self.entities[n].pos = self.entities[n].pos + delta

    # -- state ---------------------------------------------------------------------------
    def proprio(self) -> np.ndarray:
        """8-dim proprio in LIBERO's world frame: TCP position (3), axis-angle (3), fingers (2)."""
        g = self.gripper
        rv, _ = cv2.Rodrigues(frames.rot_to_libero(g.rot))
        return np.concatenate([frames.pos_to_libero(g.pos), rv.reshape(3), g.fingers()]).astype(np.float32)

    def snapshot(self) -> dict:
        """Plain-data state (for tests comparing resets and for recording)."""
        return {
            "gripper": {"pos": self.gripper.pos.tolist(), "width": self.gripper.width,
                        "held": self.gripper.held},
            "entities": {n: {"pos": e.pos.tolist(), "yaw": e.yaw, "support": e.support, "q": e.q}
                         for n, e in sorted(self.entities.items())},
        }
