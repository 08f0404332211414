"""Scripted experts for the bimanual tasks: Cartesian waypoints, damped-least-squares IK.

An expert is a timeline of segments per arm. A segment moves that arm's grasp site from
where the previous segment ended to a goal (computed from the simulator state when the
segment starts, so it follows where the objects really are) along a smoothstep profile,
turning the gripper by quaternion slerp (top-down grasps with the fingers along a chosen
horizontal direction; the handover's receiving grasp is horizontal), and sets the gripper
opening. The experts use privileged simulator state (object poses, contacts). Every tick the IK turns the interpolated pose into joint
angles (warm-started from the previous solution) and `act()` returns the 14 driver-unit
targets (rad; grippers as an opening fraction) that go through the driver like any policy.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import mujoco
import numpy as np

from yam_driver.arm_model import ARMS, ARM_JOINTS
from .sim import YamSim
from .tasks import HandoverTask, RelayTask, TrayLiftTask

IK_MARGIN = 0.17  # rad kept inside each joint range (the safety filter keeps 0.15)
OPEN, CLOSED = 1.0, 0.0  # gripper opening fraction
HOLD_S = 0.1  # s holding the measured pose first: the driver's start-up ramp completes at once
READY_S = 1.5  # s to turn the grippers down (joint space) before the Cartesian plans start
TAKEOVER_READY_S = 0.8  # s of the ready move when the expert takes over from a running policy (no hold)
GRIP_S = 1.2  # s per close/open: the driver slews the gripper at 1.0 opening fraction per second
MAX_MISS_M = 0.06  # m: the largest scripted miss of a first grasp (beyond it the fingers only hit the table)


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


Pose = tuple[np.ndarray, np.ndarray]  # (grasp-site position (3,), rotation 3x3) in the world


def to_quat(rot: np.ndarray) -> np.ndarray:
    q = np.empty(4)
    mujoco.mju_mat2Quat(q, np.ascontiguousarray(rot).ravel())
    return q


def slerp(q0: np.ndarray, q1: np.ndarray, s: float) -> np.ndarray:
    """Rotation matrix a fraction `s` of the way from quaternion q0 to q1 (shortest arc)."""
    d = float(np.dot(q0, q1))
    if d < 0:
        q1, d = -q1, -d
    if d > 0.9995:
        q = (1 - s) * q0 + s * q1
    else:
        th = np.arccos(d)
        q = (np.sin((1 - s) * th) * q0 + np.sin(s * th) * q1) / np.sin(th)
    mat = np.empty(9)
    mujoco.mju_quat2Mat(mat, q / np.linalg.norm(q))
    return mat.reshape(3, 3)


def down(pos, yaw: float) -> Pose:
    """A top-down grasp pose at `pos` with the fingers sliding along `yaw`."""
    return np.asarray(pos, dtype=np.float64), down_rotation(yaw)


@dataclass
class Segment:
    """Move to `goal(sim)` -> Pose in `duration` s (smoothstep, slerp); gripper opening during it."""

    duration: float
    goal: Callable[[YamSim], Pose] | None  # None: stay where the last segment ended
    gripper: float
    before: Callable[[YamSim], list["Segment"] | None] | None = None  # called as the segment is due: segments
    # it returns run first (the other arms hold still for as long), e.g. a re-grasp after a missed grasp


class ScriptedExpert:
    """Runs one segment list per arm on a shared clock; `act(sim)` -> (14,) driver-unit targets."""

    def __init__(self, sim: YamSim, plans: dict[str, list[Segment]], rate_hz: float = 30.0,
                 hold_s: float = HOLD_S, ready_s: float = READY_S):
        self.sim, self.plans0, self.dt = sim, plans, 1.0 / rate_hz
        self.hold_s, self.ready_s = hold_s, ready_s
        self.iks = {a: ArmIK(sim, a) for a in ARMS}
        self.reset()

    def reset(self) -> None:
        """Start from the measured joints: hold them for `hold_s`, then turn the grippers down in
        joint space over `ready_s` (the ready pose need not point down), then run the plans."""
        pos, _, _ = self.sim.state()
        self.plans = {a: list(plan) for a, plan in self.plans0.items()}  # insertions (re-grasps) change these
        self.t = -(self.hold_s + self.ready_s)
        self.q0 = {a: pos[7 * k:7 * k + 6].copy() for k, a in enumerate(ARMS)}
        self.q = dict(self.q0)
        self.grip = {a: OPEN for a in ARMS}
        self.index = {a: -1 for a in ARMS}
        self.ticks = 0  # act() calls so far (= the episode's step)
        self.inserted_at: list[int] = []  # the step of each insertion
        self.seg_start = {a: 0.0 for a in ARMS}
        self.from_pose: dict[str, Pose] = {}
        self.to_pose: dict[str, Pose] = {}
        self.q_ready = {}
        for a in ARMS:
            p, _ = self.iks[a].fk(self.q[a])
            self.q_ready[a], _ = self.iks[a].solve(self.q[a], p, down_rotation(0.0), iters=100)
            self.from_pose[a] = self.to_pose[a] = down(p, 0.0)

    @property
    def duration(self) -> float:
        """Seconds of the plans (the hold and the ready move come before t = 0)."""
        return max(sum(s.duration for s in plan) for plan in self.plans.values())

    @property
    def regrasps(self) -> int:
        """Segment insertions so far (re-grasps after a missed grasp)."""
        return len(self.inserted_at)

    @property
    def done(self) -> bool:
        return self.t >= self.duration

    def act(self) -> np.ndarray:
        out = np.empty(14)
        if self.t < 0.0:  # hold, then move to the gripper-down ready pose in joint space
            u = np.clip((self.t + self.ready_s) / self.ready_s, 0.0, 1.0)
            s = u * u * (3 - 2 * u)
            for k, a in enumerate(ARMS):
                self.q[a] = (1 - s) * self.q0[a] + s * self.q_ready[a]
                out[7 * k:7 * k + 6], out[7 * k + 6] = self.q[a], OPEN
            self.t += self.dt
            self.ticks += 1
            return out
        for k, a in enumerate(ARMS):
            self._advance(a)
            plan, i = self.plans[a], self.index[a]
            if 0 <= i < len(plan):
                seg = plan[i]
                u = np.clip((self.t - self.seg_start[a]) / seg.duration, 0.0, 1.0)
                s = u * u * (3 - 2 * u)  # smoothstep: zero velocity at both ends
                (p0, r0), (p1, r1) = self.from_pose[a], self.to_pose[a]
                rot = slerp(to_quat(r0), to_quat(r1), s)
                self.q[a], _ = self.iks[a].solve(self.q[a], (1 - s) * p0 + s * p1, rot)
                self.grip[a] = seg.gripper
            out[7 * k:7 * k + 6], out[7 * k + 6] = self.q[a], self.grip[a]
        self.t += self.dt
        self.ticks += 1
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
                extra = seg.before(self.sim) if seg.before is not None else None
                if extra:
                    self._insert(a, extra)
                    seg = plan[self.index[a]]
                if seg.goal is not None:
                    self.to_pose[a] = seg.goal(self.sim)
                elapsed += seg.duration

    def _insert(self, a: str, extra: list[Segment]) -> None:
        """Run `extra` on arm `a` now, before its due segment; every other arm holds its pose and
        gripper for as long, after the segment it is in, so the shared timeline stays in step."""
        i = self.index[a]
        self.plans[a][i:i] = extra
        wait = sum(s.duration for s in extra)
        for b in self.plans:
            if b != a:
                self.plans[b].insert(max(self.index[b] + 1, 0), Segment(wait, None, self.grip[b]))
        self.inserted_at.append(self.ticks)


def _finger_yaw(yaw: float) -> float:
    """Equivalent yaw of a symmetric two-finger grasp closest to 0 (avoid needless wrist turns)."""
    return ((yaw + np.pi / 2) % np.pi) - np.pi / 2


def _block_yaw(sim: YamSim) -> float:
    r = sim.body_mat("block")
    return _finger_yaw(float(np.arctan2(r[1, 0], r[0, 0])))


def relay_plans(sim: YamSim, task: RelayTask) -> dict[str, list[Segment]]:
    h = task.half
    hand = lambda z: (lambda s: down([*task.handoff, z], 0.0))  # noqa: E731
    above_block = lambda z: (lambda s: down(s.body_pos("block") + [0, 0, z], _block_yaw(s)))  # noqa: E731
    target = lambda z: (lambda s: down([*task.target, z], 0.0))  # noqa: E731
    y_l, y_r = sim.cfg.arm_spacing / 2, -sim.cfg.arm_spacing / 2
    left = [Segment(1.5, above_block(0.10), OPEN), Segment(1.0, above_block(0.002), OPEN),
            Segment(GRIP_S, None, CLOSED), Segment(1.0, above_block(0.10), CLOSED),
            Segment(1.5, hand(h + 0.10), CLOSED), Segment(1.0, hand(h + 0.006), CLOSED),
            Segment(GRIP_S, None, OPEN), Segment(0.8, hand(h + 0.12), OPEN),
            Segment(1.2, lambda s: down([0.28, y_l - 0.05, 0.20], 0.0), OPEN)]
    wait = sum(s.duration for s in left[:-1])
    right = [Segment(1.5, lambda s: down([0.28, y_r + 0.05, 0.20], 0.0), OPEN), Segment(wait - 1.5, None, OPEN),
             Segment(1.5, above_block(0.10), OPEN), Segment(1.0, above_block(0.002), OPEN),
             Segment(GRIP_S, None, CLOSED), Segment(1.0, above_block(0.10), CLOSED),
             Segment(1.5, target(h + 0.10), CLOSED), Segment(1.0, target(h + 0.008), CLOSED),
             Segment(GRIP_S, None, OPEN), Segment(0.8, target(h + 0.12), OPEN)]
    return {"left": left, "right": right}


def side_rotation(heading: float) -> np.ndarray:
    """A horizontal gripper pointing along `heading` (rad from +x), fingers sliding horizontally,
    wrist camera above."""
    c, s = np.cos(heading), np.sin(heading)
    return np.column_stack([[-s, c, 0.0], [0.0, 0.0, 1.0], [c, s, 0.0]])


MISS_WHEN = ("before_lift", "at_meet")  # where the expert notices a scripted missed grasp (handover_plans)


def handover_plans(sim: YamSim, task: HandoverTask, miss: np.ndarray | None = None,
                   miss_when: str = "before_lift") -> dict[str, list[Segment]]:
    """Left: pick the block top-down near its top, bring it to `task.meet`, turned so its faces
    meet the right fingers. Right: reach it from its own base's direction with a horizontal
    grasp below the left fingers, close; left opens and leaves; right carries the block over.

    `miss` (x, y) [m]: the left arm's first approach and descent aim that far off the block, so
    its first grasp misses; then, before lifting, it finds the block not held, opens, rises,
    comes down on the block's true pose and closes again (once; the right arm waits meanwhile):
    a demonstration of recovering from a missed grasp. `miss_when="at_meet"` notices the miss only
    later: the left arm lifts its empty gripper, carries it to the meeting point and arrives 0.2 s
    early; there, finding the block not held, it opens, goes back, grasps the block where it lies
    and brings it to the meeting point again, while the right arm waits at its pre-grasp pose (the
    state the policy reaches when a grasp fails unnoticed, with the way out of it)."""
    if miss_when not in MISS_WHEN:
        raise ValueError(f"miss_when must be one of {MISS_WHEN}, got {miss_when!r}")
    hz = task.half[2]
    top = hz - 0.008  # left grasp site below the block top: its pads hold the top 1.8 cm
    meet = task.meet
    base_r = sim.body_pos("right_base")
    heading = float(np.arctan2(meet[1] - base_r[1], meet[0] - base_r[0]))  # right arm's outstretched direction
    rot = side_rotation(heading)
    forward = rot[:, 2]
    left_yaw = _finger_yaw(heading + np.pi / 2)  # left fingers along the right fingers' axis
    above_block = lambda dz, off=(0.0, 0.0): (  # noqa: E731
        lambda s: down(s.body_pos("block") + [off[0], off[1], top + dz], _block_yaw(s)))
    y_l, y_r = sim.cfg.arm_spacing / 2, -sim.cfg.arm_spacing / 2
    off = (0.0, 0.0) if miss is None else (float(miss[0]), float(miss[1]))
    budget = [1 if miss is not None else 0]  # re-grasps left (scripted misses only)

    at_meet = lambda s: down(meet + [0, 0, top], left_yaw)  # noqa: E731

    def again(segments: list[Segment]) -> Callable[[YamSim], list[Segment] | None]:
        """A `before` check: if the block is not between the left fingers (and a re-grasp is left),
        run `segments` first."""
        def check_held(s: YamSim) -> list[Segment] | None:
            if budget[0] == 0 or s.contacts_between("left_finger", "block") >= 2:
                return None
            budget[0] -= 1
            return segments
        return check_held
    # before the lift: grasp it again; at the meeting point: go back, grasp it, bring it
    regrasp = again([Segment(GRIP_S, None, OPEN), Segment(1.0, above_block(0.06), OPEN),
                     Segment(1.0, above_block(0.0), OPEN), Segment(GRIP_S, None, CLOSED)])
    late_regrasp = again([Segment(GRIP_S, None, OPEN), Segment(1.5, above_block(0.10), OPEN),
                          Segment(1.0, above_block(0.0), OPEN), Segment(GRIP_S, None, CLOSED),
                          Segment(1.0, above_block(0.10), CLOSED), Segment(1.8, at_meet, CLOSED)])
    left = [Segment(1.5, above_block(0.10, off), OPEN), Segment(1.0, above_block(0.0, off), OPEN),
            Segment(GRIP_S, None, CLOSED)]
    if miss_when == "before_lift":
        left += [Segment(1.0, above_block(0.10), CLOSED, before=regrasp), Segment(2.0, at_meet, CLOSED)]
    else:          # arrive 0.2 s early and check there, before the right arm's approach is due
        left += [Segment(1.0, above_block(0.10), CLOSED), Segment(1.8, at_meet, CLOSED),
                 Segment(0.2, None, CLOSED, before=late_regrasp)]
    t_meet = sum(seg.duration for seg in left)
    right = [Segment(3.0, lambda s: (meet - 0.12 * forward, rot), OPEN), Segment(t_meet - 3.0, None, OPEN),
             Segment(1.5, lambda s: (s.body_pos("block") + 0.005 * forward + [0, 0, 0.005], rot), OPEN),
             Segment(GRIP_S, None, CLOSED)]
    t_held = sum(seg.duration for seg in right)
    left += [Segment(t_held - t_meet, None, CLOSED), Segment(GRIP_S, None, OPEN),
             Segment(1.0, lambda s: down(s.site_pos("left_grasp") + [0, 0, 0.08], left_yaw), OPEN),
             Segment(1.5, lambda s: down([0.28, y_l - 0.05, 0.25], 0.0), OPEN)]
    away = np.array([0.30, y_r + 0.17, meet[2]])
    away_heading = float(np.arctan2(away[1] - base_r[1], away[0] - base_r[0]))
    right += [Segment(GRIP_S + 1.0, None, CLOSED),
              Segment(2.5, lambda s: (away, side_rotation(away_heading)), CLOSED), Segment(1.0, None, CLOSED)]
    return {"left": left, "right": right}


def tray_plans(sim: YamSim, task: TrayLiftTask) -> dict[str, list[Segment]]:
    def handle(side: str, dz: float):
        return lambda s: down(task.handle_pos(s, side) + [0, 0, dz], np.pi / 2)

    plans = {}
    for arm, side in (("left", "l"), ("right", "r")):
        lift = lambda s, side=side: down(task.handle_pos(s, side) + [0, 0, task.lift_m + 0.04], np.pi / 2)  # noqa: E731
        plans[arm] = [Segment(1.5, handle(side, 0.10), OPEN), Segment(1.0, handle(side, 0.005), OPEN),
                      Segment(GRIP_S, None, CLOSED), Segment(2.0, lift, CLOSED), Segment(1.0, None, CLOSED)]
    return plans


def miss_offset(miss_m: float, seed: int) -> np.ndarray:
    """A horizontal offset of length `miss_m` [m] in a seeded random direction."""
    if not (math.isfinite(miss_m) and 0.0 < miss_m <= MAX_MISS_M):
        raise ValueError(f"miss_m must be in (0, {MAX_MISS_M}] m, got {miss_m!r}")
    angle = np.random.default_rng(seed).uniform(-np.pi, np.pi)
    return miss_m * np.array([np.cos(angle), np.sin(angle)])


def make_expert(sim: YamSim, rate_hz: float = 30.0, takeover: bool = False,
                miss: np.ndarray | None = None, miss_when: str = "before_lift") -> ScriptedExpert:
    """The scripted expert for the simulator's task (call after `sim.reset`). `takeover`: it starts
    mid-episode from wherever a policy left the arms (a recovery round): no hold, since the driver
    is already running, and a shorter ready move; its plans start afresh from the objects' poses
    at that moment, so it takes over only before any grasp (the runner checks the phase).
    `miss` (handover only): the left arm's first grasp aims this (x, y) offset off and it re-grasps,
    noticing the miss `miss_when` (handover_plans)."""
    task = sim.task
    if miss is not None and not isinstance(task, HandoverTask):
        raise ValueError(f"a missed first grasp is scripted for handover only, not {task.name!r}")
    if isinstance(task, HandoverTask):
        plans = handover_plans(sim, task, miss, miss_when)
    elif isinstance(task, RelayTask):
        plans = relay_plans(sim, task)
    elif isinstance(task, TrayLiftTask):
        plans = tray_plans(sim, task)
    else:
        raise ValueError(f"no scripted expert for task {task.name!r}")
    if takeover:
        return ScriptedExpert(sim, plans, rate_hz, hold_s=0.0, ready_s=TAKEOVER_READY_S)
    return ScriptedExpert(sim, plans, rate_hz)
