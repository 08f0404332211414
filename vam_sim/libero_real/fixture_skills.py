"""The expert's skills on LIBERO's fixtures: open a drawer, turn the stove on, push the plate,
and clear an object from under a drawer (a base of LiberoExpert in expert.py, which gives the
moves, grasps and the scene these skills use).
"""
from __future__ import annotations

import math

import numpy as np

if __package__:                 # imported as vam_sim.libero_real.fixture_skills (the project's own venv)
    from .scene import (
        CARRY_SPEED, CLOSE, DOWN, EASY_REACH, ExpertFailed, OPEN, ROBOT_BASE_XY, TABLE_Z,
        axis_angle_to_mat, box_distance_xy, rot_z, wrap_half_turn)
else:                           # beside server.py in LIBERO's venv (server.py's directory on sys.path)
    from scene import (  # type: ignore[no-redef]
        CARRY_SPEED, CLOSE, DOWN, EASY_REACH, ExpertFailed, OPEN, ROBOT_BASE_XY, TABLE_Z,
        axis_angle_to_mat, box_distance_xy, rot_z, wrap_half_turn)


class FixtureSkills:
    """Skills on drawers, knobs and the plate; mixed into LiberoExpert (self.s is its Scene)."""

    def out_from_under(self, obj: str, region: str) -> np.ndarray | None:
        """Where to put `obj` so that the hand can still take it from above once the drawer of
        `region` is open (None: it is clear already): the free table spot nearest to it outside
        the open drawer's footprint (grown by the hand's reach), clear of everything else."""
        joint, geoms, d = self.drawer(region)
        q = self.s.joint_qpos(joint)
        travel = abs(-0.16 - q)                                   # the slide's full travel from here
        boxes = [self.s.geom_aabb(g) for g in geoms]
        lo = np.min([b[0] for b in boxes], 0)[:2]
        hi = np.max([b[1] for b in boxes], 0)[:2]
        lo, hi = np.minimum(lo, lo + d[:2] * travel), np.maximum(hi, hi + d[:2] * travel)   # open: swept out
        c = self.s.pos(obj)
        olo, ohi = self.s.aabb(obj)
        r = 0.5 * max(ohi[0] - olo[0], ohi[1] - olo[1])
        if box_distance_xy(c[:2], lo, hi) > r + 0.04:
            return None                                           # the open drawer leaves room above it
        others = [self.s.aabb(n) for n in self.s.movable() + self.s.fixtures()
                  if n not in (obj, self._fixture_of(region))]
        best, best_d = None, 1e9
        for dx in np.arange(-0.3, 0.301, 0.02):
            for dy in np.arange(-0.3, 0.301, 0.02):
                p = c[:2] + [dx, dy]
                reach = math.hypot(p[0] - ROBOT_BASE_XY[0], p[1] - ROBOT_BASE_XY[1])
                # (beyond ~0.7 m the arm is near straight at the table: its elbow at the joint limit)
                if box_distance_xy(p, lo, hi) < r + 0.07 or not 0.4 < reach < EASY_REACH:
                    continue
                if any(box_distance_xy(p, a[0], a[1]) < r + 0.03 for a in others):
                    continue
                dist = float(np.hypot(dx, dy))
                if dist < best_d:
                    best, best_d = p, dist
        if best is None:
            raise ExpertFailed(f"no free spot for {obj} away from under the open drawer of {region}")
        return np.array([best[0], best[1], c[2]])

    def place_at(self, obj: str, spot: np.ndarray):
        """Set the held object down on the table with its body at `spot` (x, y)."""
        lo, hi = self.s.aabb(obj)
        hang = self.s.eef[2] - lo[2]
        offset = self.s.pos(obj) - self.s.eef
        above = np.array([spot[0] - offset[0], spot[1] - offset[1], TABLE_Z + hang + 0.03])
        yield from self.transit(above, {obj}, hang=hang, radius=0.5 * max(hi[0] - lo[0], hi[1] - lo[1]) + 0.02,
                                speed=CARRY_SPEED)
        self.phase = "manipulation"
        yield from self.move(above - [0, 0, 0.022], tol=0.006, speed=0.4, max_ticks=30, strict=False)
        self.held = None
        yield from self.gripper(OPEN)
        yield from self.rise_to(self.s.eef[2] + 0.05, tol=0.02, speed=0.7, strict=False)

    def _fixture_of(self, target: str) -> str | None:
        for f in self.s.fixtures():
            if target.startswith(f):
                return f
        return target if target in self.s.env.objects_dict else None

    def _drawer_geoms(self, region: str) -> list[int]:
        fixture = self._fixture_of(region)
        level = region[len(fixture) + 1:].replace("_region", "")
        body = f"{fixture}_cabinet_{level}"
        m = self.s.model
        bid = m.body_name2id(body)
        return [g for g in range(m.ngeom) if int(m.geom_bodyid[g]) == bid and m.geom_contype[g] != 0]

    # --- articulated skills ----------------------------------------------------------------------------
    def drawer(self, region: str) -> tuple[str, list[int], np.ndarray]:
        """(joint, the drawer body's collision geoms, the world direction it opens in) of a cabinet
        region such as `wooden_cabinet_1_middle_region`."""
        site = self.s.env.object_sites_dict[region]
        joint = site.joints[0]
        m = self.s.model
        jid = m.joint_name2id(joint)
        body = int(m.jnt_bodyid[jid])
        geoms = [g for g in range(m.ngeom) if int(m.geom_bodyid[g]) == body and m.geom_contype[g] != 0]
        parent = self._fixture_of(region)
        # the opening direction: is_open() holds below the open range's max, so opening moves the
        # joint's qpos negative (WoodenCabinet, articulated_objects.py) -> along -axis
        axis = np.array(self.s.data.xaxis[jid])
        sign = -1.0 if self.s.env.get_object(parent).is_open(-1.0) else 1.0
        return joint, geoms, sign * axis

    def open_drawer(self, region: str):
        """Grasp the drawer's handle bar with the hand level, pointing into the drawer and the
        fingers closing vertically around the bar, then pull it open along its slide."""
        joint, geoms, d = self.drawer(region)
        parent = self._fixture_of(region)
        if self.s.env.get_object(parent).is_open(self.s.joint_qpos(joint)):
            return
        # the handle bar: the drawer's geom that reaches furthest out along the opening direction
        reach = [max(np.dot(self.s.geom_aabb(g)[k], d) for k in (0, 1)) for g in geoms]
        bar = geoms[int(np.argmax(reach))]
        lo, hi = self.s.geom_aabb(bar)
        handle = 0.5 * (lo + hi)
        # the hand pitched down-to-level about the horizontal axis across d (a pure pitch from the
        # down pose whose fingers close along d): the fingers then close vertically, and the way
        # back to pointing down is the same pitch, clear of the wrist's joint limits
        d_h = np.array([d[0], d[1], 0.0]) / np.linalg.norm(d[:2])
        down = rot_z(math.atan2(d_h[1], d_h[0]) - math.pi / 2) @ DOWN
        pitched = axis_angle_to_mat(np.cross([0.0, 0.0, -1.0], -d_h) * (math.pi / 2)) @ down
        self.grip = OPEN
        # the bar sits low between the open fingers (1.5 cm below their middle): the hand, 20 cm tall
        # with its fingers closing vertically, then clears what stands in front of the cabinet (the plate)
        handle = handle + [0.0, 0.0, 0.015]
        front = handle + 0.12 * d
        self.orient = down                   # across the table pointing down; pitch over once in front of it,
        yield from self.transit(front + [0, 0, 0.08], {parent}, hang=0.03, radius=0.04)
        self.orient = pitched                # high enough that the hand's sweep clears what stands before it
        self.phase = "manipulation"
        yield from self.move(front + [0, 0, 0.08], tol=0.015, speed=0.8, yaw_tol=0.06)
        yield from self.move(front, tol=0.01, speed=0.8, yaw_tol=0.06)
        yield from self.move(handle + 0.004 * d, tol=0.005, speed=0.7, max_ticks=50)
        yield from self.gripper(CLOSE, ticks=7)
        if self.s.opening < 0.004:
            raise ExpertFailed(f"the grasp of {region}'s handle closed on nothing")
        q_open = max(self.s.env.get_object(parent).object_properties["articulation"]["default_open_ranges"])
        start = self.s.eef
        for k in range(60):
            q = self.s.joint_qpos(joint)
            if q < q_open - 0.012:
                break
            yield self._action(start + d * (abs(q_open) + 0.03), speed=0.8)
        else:
            raise ExpertFailed(f"{region} did not open (joint {joint} at {self.s.joint_qpos(joint):.3f})")
        yield from self.gripper(OPEN, ticks=4)
        yield from self.move(self.s.eef + 0.05 * d + [0.0, 0.0, 0.03], tol=0.015, speed=0.8, strict=False)
        self.orient = down                   # pitched back the way it came (its closing axis is vertical now)

    def turn_on(self, fixture: str):
        """Turn the stove's knob (a bar on a vertical hinge, LIBERO's FlatStove: on from 0.5 rad):
        pinch the bar with the grip site on the hinge and turn the hand about the vertical."""
        obj = self.s.env.get_object(fixture)
        joint = obj.joints[0]
        m = self.s.model
        jid = m.joint_name2id(joint)
        body = int(m.jnt_bodyid[jid])
        geoms = [g for g in range(m.ngeom) if int(m.geom_bodyid[g]) == body and m.geom_contype[g] != 0]
        q_on = min(obj.object_properties["articulation"]["default_turnon_ranges"])
        anchor = np.array(self.s.data.xanchor[jid])
        axis = np.array(self.s.data.xaxis[jid])                       # the hinge (vertical)
        boxes = [self.s.geom_aabb(g) for g in geoms]
        base = min(lo[2] for lo, _ in boxes)
        # the knob proper: the parts standing well above its flat base disc
        corners = np.concatenate([np.array(b) for b in boxes if b[1][2] > base + 0.025])
        xy = corners[:, :2] - anchor[:2]
        bar = np.r_[np.linalg.eigh(xy.T @ xy)[1][:, -1], 0.0]       # the knob's long axis (most spread)
        top = float(corners[:, 2].max())
        q0 = self.s.joint_qpos(joint)

        # Pinch the bar across its width with the grip site on the hinge, then turn the hand about the
        # vertical through it. (Pushing the bar's end round instead, the hand's sideways force at the
        # edge of its reach did not overcome the hinge: the knob stopped at 0.04 rad in 6 of 10 scenes.)
        across = np.cross(axis, bar)
        across[2] = 0.0
        across /= np.linalg.norm(across)
        yaw = wrap_half_turn(math.atan2(across[1], across[0]) - math.pi / 2)   # DOWN closes along world y
        # the hand pitched back (fingertips towards the robot) about the closing axis: the knob sits at
        # the near edge of the arm's reach, which a hand pointing straight down does not get to
        toward_robot = np.r_[ROBOT_BASE_XY, 0.0] - anchor
        toward_robot[2] = 0.0
        sign = 1.0 if np.dot(np.cross(across, [0.0, 0.0, -1.0]), toward_robot) > 0 else -1.0
        level_pose = rot_z(yaw) @ DOWN
        upright = axis_angle_to_mat(across * sign * math.radians(35)) @ level_pose
        pinch = np.array([anchor[0], anchor[1], top - 0.012])
        self.orient = upright
        self.grip = OPEN
        yield from self.transit(pinch + [0, 0, 0.08], set(), hang=0.03, radius=0.04)
        self.phase = "manipulation"
        yield from self.move(pinch + [0, 0, 0.03], tol=0.006, speed=0.6, max_ticks=50, yaw_tol=0.05)
        yield from self.move(pinch, tol=0.004, speed=0.4, max_ticks=50, yaw_tol=0.05)
        yield from self.gripper(CLOSE)
        if self.s.opening < 0.004:
            raise ExpertFailed(f"the grasp of {fixture}'s knob closed on nothing")
        for _ in range(60):
            q = self.s.joint_qpos(joint)
            if q >= q_on + 0.1:
                break
            self.orient = rot_z(q - q0 + 0.35) @ upright          # lead the knob by 0.35 rad about the vertical
            yield self._action(pinch, speed=0.5)
        else:
            raise ExpertFailed(f"{fixture}'s knob did not turn (joint at {self.s.joint_qpos(joint):.2f}, on from {q_on})")
        yield from self.gripper(OPEN, ticks=5)
        self.orient = rot_z(self.s.joint_qpos(joint) - q0) @ upright
        yield from self.rise_to(self.s.eef[2] + 0.06, tol=0.02, strict=False)

    def push(self, obj: str, target: str):
        """Move a plate (too wide for the hand) across the table to a region: pinch its rim on the
        side facing the region and drag it there."""
        spot, _ = self.place_target(obj, target)
        direction = spot - self.s.pos(obj)
        direction[2] = 0.0
        direction /= max(np.linalg.norm(direction), 1e-6)
        grasp, self.orient = self.rim_grasp(obj, depth=0.006, prefer=direction)
        self.grip = OPEN
        yield from self.transit(grasp - 0.06 * self.orient[:, 2], {obj}, hang=0.03, radius=0.05)
        self.phase = "manipulation"
        grasp, self.orient = self.rim_grasp(obj, depth=0.006, prefer=direction)
        yield from self.move(grasp, tol=0.004, speed=0.5, max_ticks=50)
        yield from self.gripper(CLOSE)
        if self.s.opening < 0.002:
            raise ExpertFailed(f"the grasp of {obj}'s rim closed on nothing")
        for _ in range(80):
            err = spot - self.s.pos(obj)
            err[2] = 0.0
            if np.linalg.norm(err) < 0.012 or self.s.success():
                break
            yield self._action(self.s.eef + err + [0.0, 0.0, 0.004], speed=0.5)
        else:
            raise ExpertFailed(f"{obj} was not dragged to {target} (still {np.linalg.norm(err):.3f} m away)")
        yield from self.gripper(OPEN, ticks=6)
        yield from self.rise_to(self.s.eef[2] + 0.06, tol=0.02, strict=False)
