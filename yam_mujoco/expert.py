"""Scripted experts for the bimanual tasks: Cartesian waypoints, damped-least-squares IK.

An expert is a timeline of segments per arm. A segment moves that arm's grasp site from
where the previous segment ended to a goal (computed from the simulator state when the
segment starts, so it follows where the objects really are) along a smoothstep profile,
with the gripper pointing down and its fingers sliding along a chosen horizontal direction,
and sets the gripper opening. Every tick the IK turns the interpolated pose into joint
angles (warm-started from the previous solution) and `act()` returns the 14 driver-unit
targets (rad; grippers as an opening fraction) that go through the driver like any policy.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import mujoco
import numpy as np

from .model import ARM_JOINTS, ARMS
from .sim import YamSim
from .tasks import HandoverTask, TrayLiftTask

IK_MARGIN = 0.17  # rad kept inside each joint range (the safety filter keeps 0.15)
OPEN, CLOSED = 1.0, 0.0  # gripper opening fraction
HOLD_S = 0.1  # s holding the measured pose first: the driver's start-up ramp completes at once
READY_S = 1.5  # s to turn the grippers down (joint space) before the Cartesian plans start
GRIP_S = 1.2  # s per close/open: the driver slews the gripper at 1.0 opening fraction per second


def down_rotation(yaw: float) -> np.ndarray:
    """3x3 world rotation of a top-down gripper whose fingers slide along (cos yaw, sin yaw, 0)."""
    x = np.array([np.cos(yaw), np.sin(yaw), 0.0])
    z = np.array([0.0, 0.0, -1.0])
    return np.column_stack([x, np.cross(z, x), z])


class ArmIK:
    """Position + orientation IK of one arm's grasp site on a private copy of the model state."""

    def __init__(self, sim: YamSim, arm: str):
        self.model = sim.model
        self.data = mujoco.MjData(sim.model)
        m = self.model
        self.qadr = np.array([m.joint(f"{arm}_{j}").qposadr[0] for j in ARM_JOINTS])
        self.dofs = np.array([m.joint(f"{arm}_{j}").dofadr[0] for j in ARM_JOINTS])
        rng = m.jnt_range[[m.joint(f"{arm}_{j}").id for j in ARM_JOINTS]]
        self.lo, self.hi = rng[:, 0] + IK_MARGIN, rng[:, 1] - IK_MARGIN
        self.site = m.site(f"{arm}_grasp").id
        self.jacp, self.jacr = np.zeros((3, m.nv)), np.zeros((3, m.nv))

    def fk(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(site position, site rotation 3x3) at joint angles q (6,)."""
        self.data.qpos[self.qadr] = q
        mujoco.mj_kinematics(self.model, self.data)
        return self.data.site_xpos[self.site].copy(), self.data.site_xmat[self.site].reshape(3, 3).copy()

    def solve(self, q0: np.ndarray, pos: np.ndarray, rot: np.ndarray, iters: int = 40,
              damping: float = 0.05) -> tuple[np.ndarray, float]:
        """Joint angles (6,) reaching (pos, rot) from q0, and the final position error in metres."""
        q = np.clip(np.asarray(q0, float).copy(), self.lo, self.hi)
        err_p = np.inf
        for _ in range(iters):
            p, r = self.fk(q)
            err_p_vec = pos - p
            err_r = 0.5 * sum(np.cross(r[:, i], rot[:, i]) for i in range(3))
            err_p = float(np.linalg.norm(err_p_vec))
            if err_p < 1e-4 and np.linalg.norm(err_r) < 1e-3:
                break
            mujoco.mj_comPos(self.model, self.data)
            mujoco.mj_jacSite(self.model, self.data, self.jacp, self.jacr, self.site)
            jac = np.vstack([self.jacp[:, self.dofs], 0.3 * self.jacr[:, self.dofs]])  # [6, 6]
            e = np.concatenate([err_p_vec, 0.3 * err_r])
            dq = jac.T @ np.linalg.solve(jac @ jac.T + damping ** 2 * np.eye(6), e)
            q = np.clip(q + np.clip(dq, -0.2, 0.2), self.lo, self.hi)
        return q, err_p


@dataclass
class Segment:
    """Move to `goal(sim)` -> (position, yaw) in `duration` s; gripper opening during it."""

    duration: float
    goal: Callable[[YamSim], tuple[np.ndarray, float]] | None  # None: stay where the last segment ended
    gripper: float


class ScriptedExpert:
    """Runs one segment list per arm on a shared clock; `act(sim)` -> (14,) driver-unit targets."""

    def __init__(self, sim: YamSim, plans: dict[str, list[Segment]], rate_hz: float = 30.0):
        self.sim, self.plans, self.dt = sim, plans, 1.0 / rate_hz
        self.iks = {a: ArmIK(sim, a) for a in ARMS}
        self.reset()

    def reset(self) -> None:
        """Start from the measured joints: hold them for `HOLD_S`, then turn the grippers down in
        joint space over `READY_S` (the ready pose need not point down), then run the plans."""
        pos, _, _ = self.sim.state()
        self.t = -(HOLD_S + READY_S)
        self.q0 = {a: pos[7 * k:7 * k + 6].copy() for k, a in enumerate(ARMS)}
        self.q = dict(self.q0)
        self.grip = {a: OPEN for a in ARMS}
        self.index = {a: -1 for a in ARMS}
        self.seg_start = {a: 0.0 for a in ARMS}
        self.from_pose: dict[str, tuple[np.ndarray, float]] = {}
        self.to_pose: dict[str, tuple[np.ndarray, float]] = {}
        self.q_ready = {}
        for a in ARMS:
            p, _ = self.iks[a].fk(self.q[a])
            self.q_ready[a], _ = self.iks[a].solve(self.q[a], p, down_rotation(0.0), iters=100)
            self.from_pose[a] = self.to_pose[a] = (p, 0.0)

    @property
    def duration(self) -> float:
        """Seconds of the plans (the hold and the ready move come before t = 0)."""
        return max(sum(s.duration for s in plan) for plan in self.plans.values())

    @property
    def done(self) -> bool:
        return self.t >= self.duration

    def act(self) -> np.ndarray:
        out = np.empty(14)
        if self.t < 0.0:  # hold, then move to the gripper-down ready pose in joint space
            u = np.clip((self.t + READY_S) / READY_S, 0.0, 1.0)
            s = u * u * (3 - 2 * u)
            for k, a in enumerate(ARMS):
                self.q[a] = (1 - s) * self.q0[a] + s * self.q_ready[a]
                out[7 * k:7 * k + 6], out[7 * k + 6] = self.q[a], OPEN
            self.t += self.dt
            return out
        for k, a in enumerate(ARMS):
            self._advance(a)
            plan, i = self.plans[a], self.index[a]
            if 0 <= i < len(plan):
                seg = plan[i]
                u = np.clip((self.t - self.seg_start[a]) / seg.duration, 0.0, 1.0)
                s = u * u * (3 - 2 * u)  # smoothstep: zero velocity at both ends
                (p0, y0), (p1, y1) = self.from_pose[a], self.to_pose[a]
                pos, yaw = (1 - s) * p0 + s * p1, y0 + s * _wrap(y1 - y0)
                self.q[a], _ = self.iks[a].solve(self.q[a], pos, down_rotation(yaw))
                self.grip[a] = seg.gripper
            out[7 * k:7 * k + 6], out[7 * k + 6] = self.q[a], self.grip[a]
        self.t += self.dt
        return out

    def _advance(self, a: str) -> None:
        plan = self.plans[a]
        elapsed = sum(s.duration for s in plan[:self.index[a] + 1])
        while self.index[a] < len(plan) and (self.index[a] < 0 or self.t >= elapsed):
            self.from_pose[a] = self.to_pose[a]
            self.index[a] += 1
            self.seg_start[a] = self.t
            if self.index[a] < len(plan):
                seg = plan[self.index[a]]
                if seg.goal is not None:
                    self.to_pose[a] = seg.goal(self.sim)
                elapsed += seg.duration


def _wrap(a: float) -> float:
    return (a + np.pi) % (2 * np.pi) - np.pi


def _finger_yaw(yaw: float) -> float:
    """Equivalent yaw of a symmetric two-finger grasp closest to 0 (avoid needless wrist turns)."""
    return ((yaw + np.pi / 2) % np.pi) - np.pi / 2


def _block_yaw(sim: YamSim) -> float:
    r = sim.body_mat("block")
    return _finger_yaw(float(np.arctan2(r[1, 0], r[0, 0])))


def handover_plans(sim: YamSim, task: HandoverTask) -> dict[str, list[Segment]]:
    h = task.half
    hand = lambda z: (lambda s: (np.array([*task.handoff, z]), 0.0))  # noqa: E731
    above_block = lambda z: (lambda s: (s.body_pos("block") + [0, 0, z], _block_yaw(s)))  # noqa: E731
    target = lambda z: (lambda s: (np.array([*task.target, z]), 0.0))  # noqa: E731
    y_l, y_r = sim.cfg.arm_spacing / 2, -sim.cfg.arm_spacing / 2
    left = [Segment(1.5, above_block(0.10), OPEN), Segment(1.0, above_block(0.002), OPEN),
            Segment(GRIP_S, None, CLOSED), Segment(1.0, above_block(0.10), CLOSED),
            Segment(1.5, hand(h + 0.10), CLOSED), Segment(1.0, hand(h + 0.006), CLOSED),
            Segment(GRIP_S, None, OPEN), Segment(0.8, hand(h + 0.12), OPEN),
            Segment(1.2, lambda s: (np.array([0.28, y_l - 0.05, 0.20]), 0.0), OPEN)]
    wait = sum(s.duration for s in left[:-1])
    right = [Segment(1.5, lambda s: (np.array([0.28, y_r + 0.05, 0.20]), 0.0), OPEN), Segment(wait - 1.5, None, OPEN),
             Segment(1.5, above_block(0.10), OPEN), Segment(1.0, above_block(0.002), OPEN),
             Segment(GRIP_S, None, CLOSED), Segment(1.0, above_block(0.10), CLOSED),
             Segment(1.5, target(h + 0.10), CLOSED), Segment(1.0, target(h + 0.008), CLOSED),
             Segment(GRIP_S, None, OPEN), Segment(0.8, target(h + 0.12), OPEN)]
    return {"left": left, "right": right}


def tray_plans(sim: YamSim, task: TrayLiftTask) -> dict[str, list[Segment]]:
    def handle(side: str, dz: float):
        return lambda s: (task.handle_pos(s, side) + [0, 0, dz], np.pi / 2)

    plans = {}
    for arm, side in (("left", "l"), ("right", "r")):
        lift = lambda s, side=side: (task.handle_pos(s, side) + [0, 0, task.lift_m + 0.04], np.pi / 2)  # noqa: E731
        plans[arm] = [Segment(1.5, handle(side, 0.10), OPEN), Segment(1.0, handle(side, 0.005), OPEN),
                      Segment(GRIP_S, None, CLOSED), Segment(2.0, lift, CLOSED), Segment(1.0, None, CLOSED)]
    return plans


def make_expert(sim: YamSim, rate_hz: float = 30.0) -> ScriptedExpert:
    """The scripted expert for the simulator's task (call after `sim.reset`)."""
    task = sim.task
    if isinstance(task, HandoverTask):
        plans = handover_plans(sim, task)
    elif isinstance(task, TrayLiftTask):
        plans = tray_plans(sim, task)
    else:
        raise ValueError(f"no scripted expert for task {task.name!r}")
    return ScriptedExpert(sim, plans, rate_hz)
