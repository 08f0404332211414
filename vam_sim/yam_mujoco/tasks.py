"""Bimanual tasks on the simulated YAM: objects, seeded initial states, success predicates.

Each task names its objects (free bodies and fixed table markers), places them from a seeded
generator at reset, says in words what to do (the policy's instruction), decides success from
the simulator state, and labels the phase of a step for the TR monitor: "manipulation" when a
gripper is within `NEAR_M` of a task object, "planning" (free-space transport) otherwise.

- handover: the left arm picks a tall block and holds it up; the right arm grasps it from
  the side in mid-air, the left lets go, and the right carries it over to its side.
- relay: the left arm picks a block on its side and sets it down in the shared middle of the
  table; the right arm picks it up there and places it on the red target on its side.
- tray_lift: both arms grasp the handles at the two ends of a tray and lift it level.
"""
from __future__ import annotations

import abc
from typing import Any, Protocol

import numpy as np

from .config import MujocoConfig
from .model import ObjectSpec

NEAR_M = 0.06  # m: gripper-to-object distance below which a step counts as manipulation
LIFT_M = 0.02  # m an object must rise off the table for a "lifted" milestone
MEET_M = 0.05  # m from the handover's meeting point for its "at_meet" milestone


class World(Protocol):
    """What a task reads and places in the simulated world: `sim.YamSim` is one (tasks sit below the
    simulator, which builds its scene from them); the task tests pass a small fake."""

    cfg: MujocoConfig  # the scene's settings (arm_spacing places the objects)
    model: Any  # mujoco.MjModel: fixed markers are moved at reset
    data: Any  # mujoco.MjData: geom positions (the tray's handles)

    def body_pos(self, name: str) -> np.ndarray: ...  # (3,) world position of a body's origin

    def body_mat(self, name: str) -> np.ndarray: ...  # (3, 3) world orientation of a body

    def site_pos(self, name: str) -> np.ndarray: ...  # (3,) world position of a site

    def place_free_body(self, name: str, pos, yaw: float = 0.0) -> None: ...  # set a free body's pose (reset)

    def contacts_between(self, geom_prefix_a: str, geom_prefix_b: str) -> int: ...  # active contacts


class Task(abc.ABC):
    """One bimanual task; subclasses fill in the objects, reset, success and instruction."""

    name: str = ""
    instruction: str = ""
    max_steps: int = 600  # 30 Hz ticks (20 s) before an episode times out
    tracked: tuple[str, ...] = ()  # free bodies whose origins count for the phase label (see grasp_points)

    @abc.abstractmethod
    def objects(self) -> tuple[ObjectSpec, ...]:
        """Bodies added to the scene."""

    @abc.abstractmethod
    def reset(self, sim: World, rng: np.random.Generator) -> None:
        """Place the objects (qpos only; the simulator settles them afterwards)."""

    @abc.abstractmethod
    def success(self, sim: World) -> bool:
        """The goal holds in the current state."""

    def grasp_points(self, sim: World) -> list[np.ndarray]:
        """World points a gripper closes on: the tracked bodies' origins (a task whose grasps sit
        away from its body's origin, like the tray's end handles, names its own)."""
        return [sim.body_pos(o) for o in self.tracked]

    def observe(self, sim: World) -> None:
        """Called by the simulator after every control period (and every wall-clock catch-up): a task
        whose success needs an earlier stage to have happened books it here (see HandoverTask)."""

    def milestones(self, sim: World) -> dict[str, bool]:
        """The task's sub-goals in the order an expert reaches them, each true while it holds now
        (the runner books the first tick each holds: how far a failed episode got)."""
        return {"success": self.success(sim)}

    def phase(self, sim: World) -> str:
        grips = [sim.site_pos(f"{a}_grasp") for a in ("left", "right")]
        near = any(np.linalg.norm(g - p) < NEAR_M for g in grips for p in self.grasp_points(sim))
        return "manipulation" if near else "planning"


class RelayTask(Task):
    """Left picks the block, sets it down mid-table; right takes it to the red target."""

    name = "relay"
    instruction = "move the blue block to the middle with the left arm, then onto the red square with the right arm"
    max_steps = 900  # 30 s: two picks and two places
    tracked = ("block",)
    half = 0.02  # m, block half extent (4 cm cube)
    handoff = np.array([0.36, 0.0])  # m, where the left arm sets the block down
    target_radius = 0.05  # m, success when the block rests within this of the target centre

    def objects(self) -> tuple[ObjectSpec, ...]:
        h = self.half
        return (ObjectSpec("block", "box", (h, h, h), (0.15, 0.35, 0.85, 1.0), 0.08),
                ObjectSpec("target", "box", (0.05, 0.05, 0.0008), (0.85, 0.15, 0.15, 1.0), 0.0, free=False))

    def reset(self, sim: World, rng: np.random.Generator) -> None:
        y_left = sim.cfg.arm_spacing / 2
        start = (rng.uniform(0.30, 0.38), y_left - rng.uniform(0.10, 0.16), self.half)
        sim.place_free_body("block", start, yaw=rng.uniform(-0.3, 0.3))
        self.target = np.array([rng.uniform(0.30, 0.38), -y_left + rng.uniform(0.10, 0.16)])
        sim.model.body("target").pos[:] = (*self.target, 0.0008)
        self.relayed = False  # set once the block has rested in the middle without the left holding it

    def _in_middle(self, sim: World) -> bool:
        p = sim.body_pos("block")
        return bool(p[2] < self.half + 0.01 and sim.contacts_between("left_finger", "block") == 0
                    and np.linalg.norm(p[:2] - self.handoff) < self.target_radius)

    def observe(self, sim: World) -> None:
        self.relayed = self.relayed or self._in_middle(sim)

    def milestones(self, sim: World) -> dict[str, bool]:
        p = sim.body_pos("block")
        left = sim.contacts_between("left_finger", "block") >= 2
        right = sim.contacts_between("right_finger", "block") >= 2
        return {"left_lifted": left and p[2] > self.half + LIFT_M,
                "in_middle": self._in_middle(sim),
                "right_lifted": right and p[2] > self.half + LIFT_M,
                "success": self.success(sim)}

    def success(self, sim: World) -> bool:
        """On the target, resting, after resting in the middle (the right arm fetching the block from
        the left's side itself is no relay)."""
        p = sim.body_pos("block")
        resting = p[2] < self.half + 0.01
        return bool(self.relayed and resting and np.linalg.norm(p[:2] - self.target) < self.target_radius)


class HandoverTask(Task):
    """Left picks a tall block and holds it up; right takes it from the side in mid-air and
    carries it to its own side; success once only the right gripper holds it there, after the
    left has held it off the table (the right arm fetching it from the table is no handover)."""

    name = "handover"
    instruction = "pick up the blue block with the left arm and hand it to the right arm"
    max_steps = 750  # 25 s
    tracked = ("block",)
    half = (0.02, 0.02, 0.05)  # m: a 4 x 4 x 10 cm block, tall enough for two grippers
    meet = np.array([0.38, 0.0, 0.22])  # m: block centre while the grippers exchange it
    min_height = 0.12  # m: the block's centre must be this high (held, not resting)
    max_y = -0.08  # m: ... and on the right arm's side of the table

    def objects(self) -> tuple[ObjectSpec, ...]:
        return (ObjectSpec("block", "box", self.half, (0.15, 0.35, 0.85, 1.0), 0.06),)

    def reset(self, sim: World, rng: np.random.Generator) -> None:
        y_left = sim.cfg.arm_spacing / 2
        start = (rng.uniform(0.30, 0.38), y_left - rng.uniform(0.10, 0.16), self.half[2])
        sim.place_free_body("block", start, yaw=rng.uniform(-0.3, 0.3))
        self.passed = False  # set once the left fingers have held the block off the table

    def _left_aloft(self, sim: World) -> bool:
        """The left fingers hold the block (two contacts) off the table; the right may touch it too,
        but a block the right arm fetched alone never passes this (its left gripper is elsewhere)."""
        return bool(sim.contacts_between("left_finger", "block") >= 2
                    and sim.body_pos("block")[2] > self.half[2] + LIFT_M)

    def observe(self, sim: World) -> None:
        self.passed = self.passed or self._left_aloft(sim)

    def milestones(self, sim: World) -> dict[str, bool]:
        # One contact counts as touching here; "held" (left_lifted, the success predicate) needs two.
        p = sim.body_pos("block")
        left = sim.contacts_between("left_finger", "block") >= 1
        right = sim.contacts_between("right_finger", "block") >= 1
        lifted = p[2] > self.half[2] + LIFT_M
        return {"left_lifted": self._left_aloft(sim),
                "at_meet": left and not right and np.linalg.norm(p - self.meet) < MEET_M,
                "both_hold": left and right and lifted,
                "left_released": right and not left and p[2] > self.min_height,
                "success": self.success(sim)}

    def success(self, sim: World) -> bool:
        p = sim.body_pos("block")
        held_right = sim.contacts_between("right_finger", "block") >= 2
        free_left = sim.contacts_between("left_finger", "block") == 0
        return bool(self.passed and held_right and free_left and p[2] > self.min_height and p[1] < self.max_y)


class TrayLiftTask(Task):
    """Both arms grasp the tray's end handles and lift it by `lift_m` without tilting it."""

    name = "tray_lift"
    instruction = "lift the tray with both arms and keep it level"
    max_steps = 450  # 15 s
    lift_m = 0.08  # m the tray must rise
    max_tilt_deg = 12.0  # degrees between the tray's normal and vertical
    half = (0.05, 0.15, 0.006)  # m, tray plate half extents (x, y, z)
    handle = (0.02, 0.01, 0.02)  # m, handle half extents: a tab standing up at each end

    def objects(self) -> tuple[ObjectSpec, ...]:
        hx, hy, hz = self.half
        ax, ay, az = self.handle
        parts = tuple((f"handle_{s}", self.handle, (0.0, sign * (hy - ay), hz + az))
                      for s, sign in (("l", 1.0), ("r", -1.0)))
        return (ObjectSpec("tray", "box", self.half, (0.85, 0.7, 0.2, 1.0), 0.3, parts=parts),)

    def reset(self, sim: World, rng: np.random.Generator) -> None:
        self.start = np.array([rng.uniform(0.34, 0.40), rng.uniform(-0.03, 0.03), self.half[2]])
        sim.place_free_body("tray", self.start, yaw=rng.uniform(-0.1, 0.1))

    def handle_pos(self, sim: World, side: str) -> np.ndarray:
        """World position of the centre of a handle ('l' or 'r')."""
        return sim.data.geom(f"tray_handle_{side}").xpos.copy()

    def grasp_points(self, sim: World) -> list[np.ndarray]:
        # The grippers close on the handles, 0.14 m either side of the tray's origin: measured from
        # the origin, no step of a tray lift would ever count as manipulation.
        return [self.handle_pos(sim, s) for s in ("l", "r")]

    def milestones(self, sim: World) -> dict[str, bool]:
        rise = sim.body_pos("tray")[2] - self.half[2]
        return {"left_on_handle": sim.contacts_between("left_finger", "tray_handle_l") >= 2,
                "right_on_handle": sim.contacts_between("right_finger", "tray_handle_r") >= 2,
                "half_lifted": rise > self.lift_m / 2,
                "success": self.success(sim)}

    def success(self, sim: World) -> bool:
        p = sim.body_pos("tray")
        up = sim.body_mat("tray")[:, 2]
        tilt = np.degrees(np.arccos(np.clip(up[2], -1.0, 1.0)))
        return bool(p[2] - self.half[2] > self.lift_m and tilt < self.max_tilt_deg)


TASKS: dict[str, type[Task]] = {"handover": HandoverTask, "relay": RelayTask, "tray_lift": TrayLiftTask}
