"""What the scripted expert reads of real LIBERO: the simulator's privileged state, its geometry
and the physical facts of the Panda and LIBERO's table scenes (used by expert.py and
fixture_skills.py; runs inside the LIBERO server process: numpy and the LIBERO env only).
"""
from __future__ import annotations

import math

import numpy as np

POS_SCALE = 0.05          # m per unit action: OSC_POSE output_max (robosuite 1.4 default controller)
ROT_SCALE = 0.5           # rad per unit action
CLOSE, OPEN = 1.0, -1.0   # gripper actions
GRASP_TRIES = 3           # picks of one object before the expert gives up (a dropped object is picked again)
RIM_DEPTH = 0.024         # m: the eef site below a bowl's rim when pinching its wall (pads 0.005 below to 0.012
                          # above the site: ~1.7 cm of wall in hand; the hand's top stays 1 cm lower than at 0.012)
CARRY_SPEED = 0.75        # of the full action while carrying (a rim grasp holds better without jerks)
GRIP_TICKS = 9            # ticks for the Panda gripper to close or open fully (0.25 of its range a tick)
TABLE_Z = 0.90            # m: the table top in LIBERO's world frame
PAD_BELOW = 0.005         # m: the finger pads reach this far below the eef site
PAD_HALF = 0.0085         # m: half the pad height
FINGER_REACH = 0.042      # m: pad centre from the grasp axis when fully open
ROBOT_BASE_XY = (-0.66, 0.0)  # m: the Panda's base in LIBERO's table scenes (robot0_base)
RELOCATE_FROM_UNDER_DRAWER = False   # move an object out from under a drawer before opening it
EASY_REACH = 0.68         # m from the base (xy): at table height further out the elbow nears its stretched limit


class ExpertFailed(RuntimeError):
    """The expert cannot go on (a grasp slipped, a waypoint was not reached in time)."""


class Dropped(ExpertFailed):
    """The held object left the hand on the way: the expert goes back for it."""


def rot_to_axis_angle(r: np.ndarray) -> np.ndarray:
    """Rotation matrix -> axis-angle vector (3,), robust near 0 and pi."""
    cos = max(-1.0, min(1.0, (np.trace(r) - 1.0) / 2.0))
    angle = math.acos(cos)
    if angle < 1e-6:
        return np.zeros(3)
    if angle > math.pi - 1e-4:  # near pi: axis from the diagonal
        axis = np.sqrt(np.maximum((np.diag(r) + 1.0) / 2.0, 0.0))
        k = int(np.argmax(axis))
        axis[(k + 1) % 3] = math.copysign(axis[(k + 1) % 3], r[k, (k + 1) % 3] + r[(k + 1) % 3, k])
        axis[(k + 2) % 3] = math.copysign(axis[(k + 2) % 3], r[k, (k + 2) % 3] + r[(k + 2) % 3, k])
        return axis / np.linalg.norm(axis) * angle
    axis = np.array([r[2, 1] - r[1, 2], r[0, 2] - r[2, 0], r[1, 0] - r[0, 1]]) / (2.0 * math.sin(angle))
    return axis * angle


def axis_angle_to_mat(v) -> np.ndarray:
    """Axis-angle vector (3,) -> rotation matrix (Rodrigues)."""
    v = np.asarray(v, float)
    angle = float(np.linalg.norm(v))
    if angle < 1e-9:
        return np.eye(3)
    k = v / angle
    kx = np.array([[0.0, -k[2], k[1]], [k[2], 0.0, -k[0]], [-k[1], k[0], 0.0]])
    return np.eye(3) + math.sin(angle) * kx + (1.0 - math.cos(angle)) * kx @ kx


def rot_z(yaw: float) -> np.ndarray:
    c, s = math.cos(yaw), math.sin(yaw)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


DOWN = np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, -1.0]])  # the eef site's rotation pointing
# down at yaw 0, where the fingers close along world y (LIBERO's start pose, within 0.06 rad)


def wrap_half_turn(yaw: float) -> float:
    """A parallel gripper is symmetric under half a turn: the equivalent yaw in [-pi/2, pi/2)."""
    return (yaw + math.pi / 2) % math.pi - math.pi / 2


class Scene:
    """Read-only view of the LIBERO environment's privileged state (`env` is LIBERO's ControlEnv)."""

    def __init__(self, env):
        self.env = env.env if hasattr(env, "env") and hasattr(env.env, "obj_body_id") else env
        self.sim = self.env.sim
        self.model, self.data = self.sim.model, self.sim.data
        robot = self.env.robots[0]
        self.eef_site = robot.eef_site_id
        self.finger_qpos = [self.model.get_joint_qpos_addr(j) for j in robot.gripper.joints]
        self._geoms: dict[str, list[int]] = {}

    # --- the gripper ---------------------------------------------------------------------------
    @property
    def eef(self) -> np.ndarray:
        return np.array(self.data.site_xpos[self.eef_site])

    @property
    def eef_mat(self) -> np.ndarray:
        return np.array(self.data.site_xmat[self.eef_site]).reshape(3, 3)

    @property
    def opening(self) -> float:
        """Distance between the finger joints (m): ~0.078 open, ~0 closed on nothing."""
        q = [float(self.data.qpos[a]) for a in self.finger_qpos]
        return abs(q[0] - q[1])

    # --- objects -----------------------------------------------------------------------------------
    def body_id(self, name: str) -> int:
        return self.env.obj_body_id[name]

    def pos(self, name: str) -> np.ndarray:
        return np.array(self.data.body_xpos[self.body_id(name)])

    def mat(self, name: str) -> np.ndarray:
        return np.array(self.data.body_xmat[self.body_id(name)]).reshape(3, 3)

    def geoms(self, name: str) -> list[int]:
        """Collision geoms of an object (its body subtree)."""
        if name not in self._geoms:
            root = self.body_id(name)
            m = self.model
            ids = []
            for g in range(m.ngeom):
                b = int(m.geom_bodyid[g])
                while b not in (root, 0):
                    b = int(m.body_parentid[b])
                if b == root and m.geom_contype[g] != 0:
                    ids.append(g)
            self._geoms[name] = ids
        return self._geoms[name]

    def geom_aabb(self, g: int) -> tuple[np.ndarray, np.ndarray]:
        m, d = self.model, self.data
        c, h = m.geom_aabb[g][:3], m.geom_aabb[g][3:]
        corners = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)]) * h + c
        w = corners @ np.array(d.geom_xmat[g]).reshape(3, 3).T + d.geom_xpos[g]
        return w.min(0), w.max(0)

    def min_distance(self, geoms: list[int], points) -> float:
        """Smallest 3-D distance from any of `points` to any of `geoms`' oriented boxes (vectorised)."""
        if not len(geoms) or not len(points):
            return 1.0
        m, d = self.model, self.data
        g = np.asarray(geoms)
        pos, rot = np.asarray(d.geom_xpos)[g], np.asarray(d.geom_xmat)[g].reshape(-1, 3, 3)
        ctr, half = np.asarray(m.geom_aabb)[g, :3], np.asarray(m.geom_aabb)[g, 3:]
        pts = np.asarray(points, float)                                         # [P, 3]
        local = np.einsum("pgi,gij->pgj", pts[:, None, :] - pos[None], rot)     # [P, G, 3]
        gap = np.maximum(np.abs(local - ctr[None]) - half[None], 0.0)
        return float(np.sqrt((gap ** 2).sum(-1)).min())

    def obstacle_geoms(self, exclude: set[str]) -> list[int]:
        return [g for name in self.movable() + self.fixtures() if name not in exclude for g in self.geoms(name)]

    def aabb(self, name: str, geoms: list[int] | None = None) -> tuple[np.ndarray, np.ndarray]:
        boxes = [self.geom_aabb(g) for g in (geoms if geoms is not None else self.geoms(name))]
        return np.min([b[0] for b in boxes], 0), np.max([b[1] for b in boxes], 0)

    def site(self, name: str) -> np.ndarray:
        return np.array(self.data.get_site_xpos(name))

    def site_mat(self, name: str) -> np.ndarray:
        return np.array(self.data.get_site_xmat(name)).reshape(3, 3)

    def joint_qpos(self, joint: str) -> float:
        return float(self.data.qpos[self.model.get_joint_qpos_addr(joint)])

    def contacts(self) -> list[str]:
        """'body-body' pairs in contact now that involve the gripper or a movable object (for messages)."""
        m, d = self.model, self.data
        out = set()
        for i in range(d.ncon):
            c = d.contact[i]
            a, b = m.body(int(m.geom_bodyid[c.geom1])).name, m.body(int(m.geom_bodyid[c.geom2])).name
            if any(k in a + b for k in ("gripper", "finger", "robot0")) or any(o in a + b for o in self.movable()):
                out.add("-".join(sorted((a.replace("_main", ""), b.replace("_main", "")))))
        return sorted(out)

    def movable(self) -> list[str]:
        return list(self.env.objects_dict)

    def fixtures(self) -> list[str]:
        return list(self.env.fixtures_dict)

    def success(self) -> bool:
        return bool(self.env._check_success())

    def obstacles(self, exclude: set[str]) -> list[tuple[np.ndarray, np.ndarray]]:
        """World AABBs of the collision geoms of every object and fixture not in `exclude` (the
        table and the robot are not objects), geom by geom: an open drawer is not a solid box."""
        out = []
        for name in self.movable() + self.fixtures():
            if name not in exclude:
                out.extend(self.geom_aabb(g) for g in self.geoms(name))
        return out


def box_distance_xy(p: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> float:
    dx = max(lo[0] - p[0], 0.0, p[0] - hi[0])
    dy = max(lo[1] - p[1], 0.0, p[1] - hi[1])
    return math.hypot(dx, dy)


def segment_box_distance_xy(a: np.ndarray, b: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> float:
    """Smallest xy distance between the segment a-b and the box [lo, hi] (sampled along the segment)."""
    n = max(2, int(np.linalg.norm(b - a) / 0.01) + 1)
    return min(box_distance_xy(a + (b - a) * t, lo, hi) for t in np.linspace(0.0, 1.0, n))
