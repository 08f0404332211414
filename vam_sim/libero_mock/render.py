"""OpenCV renderer: LIBERO's agent-view and eye-in-hand cameras, square RGB images.

Every object is a few upright prisms (boxes or 12-sided cylinders). A prism is drawn as the
filled convex hull of its projected corners in its side colour, then its top face, then an
optional inner face (bowl interiors, basket floors). Pinhole projection of all corners of
all objects is one matrix product per camera; objects are painted far to near. Height cues
in the agent view: perspective, the gripper's shadow on the surface below it, and the arm
drawn from a fixed shoulder. Both cameras sit where LIBERO's do (frames.py explains why the
un-mirrored view of the drawing frame equals LIBERO's 180-degree-rotated image); the wrist
camera rides on the hand looking down past the fingertips, which frame the bottom of the image.
Joints draw their moving part each frame: open drawers, the stove's knob lever (the burner
glows once it is on) and the microwave door.
"""
from __future__ import annotations

import math

import cv2
import numpy as np

from .config import LiberoMockConfig
from .objects import TABLE_HALF_X, TABLE_HALF_Y, Kind
from .world import World

FLOOR = (96, 92, 88)
TABLE = (196, 164, 122)
TABLE_LINE = (182, 150, 110)
SHADOW = (70, 60, 50)
ARM = (225, 225, 228)
ARM_DARK = (150, 150, 155)
FINGER = (60, 60, 65)
N_CYL = 12
_CIRCLE = np.stack([np.cos(np.arange(N_CYL) * 2 * np.pi / N_CYL),
                    np.sin(np.arange(N_CYL) * 2 * np.pi / N_CYL)], axis=1)
_SQUARE = np.array([[1, 1], [-1, 1], [-1, -1], [1, -1]], dtype=float)


def _dark(c, f=0.7):
    return tuple(int(v * f) for v in c)


def _parts(k: Kind) -> list[tuple]:
    """Prisms of a kind in its own frame: (shape, dx, dy, z0, z1, hx, hy, side, top, inner)."""
    hx, hy, h, s, t, a = k.hx, k.hy, k.h, k.side, k.top, k.accent
    st = k.style
    if st == "bowl":
        return [(k.shape, 0, 0, 0, h, hx, hy, s, a, (0.78, t))]
    if st == "plate":
        return [(k.shape, 0, 0, 0, h, hx, hy, s, t, (0.7, a))]
    if st == "bottle":
        return [(k.shape, 0, 0, 0, 0.68 * h, hx, hy, s, s, None),
                (k.shape, 0, 0, 0.68 * h, 0.92 * h, 0.45 * hx, 0.45 * hy, a, a, None),
                (k.shape, 0, 0, 0.92 * h, h, 0.4 * hx, 0.4 * hy, t, t, None)]
    if st == "can":
        return [(k.shape, 0, 0, 0, h, hx, hy, s, t, None),
                (k.shape, 0, 0, 0.35 * h, 0.65 * h, 1.04 * hx, 1.04 * hy, a, a, None)]
    if st == "carton":
        return [(k.shape, 0, 0, 0, h, hx, hy, s, t, None),
                (k.shape, 0, 0, 0.4 * h, 0.6 * h, 1.04 * hx, 1.04 * hy, a, a, None)]
    if st == "mug":
        return [("box", hx * 1.05, 0, 0.2 * h, 0.8 * h, 0.35 * hx, 0.12 * hy, a, a, None),
                (k.shape, 0, 0, 0, h, hx, hy, s, s, (0.8, _dark(s, 0.6)))]
    if st == "pot":
        return [(k.shape, 0, 0, 0, 0.5 * h, hx, hy, s, s, None),
                (k.shape, 0, 0, 0.5 * h, h, 0.8 * hx, 0.8 * hy, t, t, None),
                ("box", 0.8 * hx + 0.012, 0, 0.55 * h, 0.85 * h, 0.014, 0.006, a, a, None)]
    if st == "stove":  # burner at the front (own -y), knob ring at the back (LIBERO's flat stove)
        return [("box", 0, 0, 0, h, hx, hy, s, t, None),
                ("cyl", 0, -STOVE_PART_Y, h, h + 0.002, 0.6 * hx, 0.6 * hx, _dark(a, 0.45), _dark(a, 0.45), (0.6, t)),
                ("cyl", 0, STOVE_PART_Y, h, h + 0.01, 0.035, 0.035, (90, 90, 95), (120, 120, 125), None)]
    if st == "cabinet":  # three drawer fronts (closed drawers are not drawn on their own)
        return [("box", 0, 0, 0, h, hx, hy, s, t, None)] + [
            ("box", 0, -hy - 0.003, z0, z0 + 0.045, 0.85 * hx, 0.003, a, a, None) for z0 in (0.028, 0.098, 0.168)]
    if st == "rack":
        return [("box", 0, 0, 0, h, hx, hy, s, t, None),
                ("box", 0, 0, h, h + 0.004, hx, 0.15 * hy, a, a, None)]
    if k.container:  # basket, drawer, microwave, caddy: a rim around a darker inside
        return [("box", 0, 0, 0, h, hx, hy, s, a, (0.82, t))]
    return [(k.shape, 0, 0, 0, h, hx, hy, s, t, None)]


DRAWER_HIDDEN_Q = 0.03  # drawers shut further than this are not drawn (the cabinet shows their front)
BURNER_ON = (255, 90, 20)
STOVE_PART_Y = 0.075  # m: burner this far in front of the stove's centre, knob this far behind (LIBERO: 0.15 apart)


def _is_drawer(e) -> bool:
    return e.kind.joint is not None and e.kind.joint.kind == "slide"


def _joint_parts(e) -> list[tuple[np.ndarray, tuple, tuple]]:
    """Per-frame prisms (world points, side colour, top colour) of a joint's moving part."""
    j = e.kind.joint
    if j is None or j.kind == "slide":
        return []
    h = e.handle()
    if j.kind == "knob":  # the knob's lever, and the burner glowing once it is on
        out = [(_prism_points("box", h[0], h[1], e.top, e.top + 0.012, 0.008, 0.008), (200, 200, 205), (230, 230, 235))]
        if e.is_open():
            c, s_ = math.cos(e.yaw), math.sin(e.yaw)
            bx, by = e.pos[0] + s_ * STOVE_PART_Y, e.pos[1] - c * STOVE_PART_Y
            ring = _prism_points("cyl", bx, by, e.top, e.top + 0.004, 0.035, 0.035)
            out.append((ring, BURNER_ON, BURNER_ON))
        return out
    # door: a panel from the hinge (front-left corner) to the handle
    c, s_ = math.cos(e.yaw), math.sin(e.yaw)
    lx, ly = -e.kind.hx, -e.kind.hy
    hinge = np.array([e.pos[0] + c * lx - s_ * ly, e.pos[1] + s_ * lx + c * ly])
    d = h[:2] - hinge
    n = np.array([-d[1], d[0]]) / max(np.linalg.norm(d), 1e-9) * 0.006
    quad = np.array([hinge + n, h[:2] + n, h[:2] - n, hinge - n])
    z0, z1 = e.pos[2] + 0.005, e.pos[2] + e.kind.h - 0.005
    pts = np.concatenate([np.column_stack([quad, np.full(4, z0)]), np.column_stack([quad, np.full(4, z1)])])
    return [(pts, (170, 170, 175), (120, 120, 125))]


def _prism_points(shape, dx, dy, z0, z1, hx, hy) -> np.ndarray:
    ring = (_CIRCLE if shape == "cyl" else _SQUARE) * np.array([hx, hy]) + np.array([dx, dy])
    n = len(ring)
    return np.concatenate([np.column_stack([ring, np.full(n, z0)]),
                           np.column_stack([ring, np.full(n, z1)])])


# Eye-in-hand camera in the tool frame (x, y, z = tool axes; z from the hand to the fingertips,
# -y towards the robot), placed as LIBERO's robot0_eye_in_hand: 9.4 cm above the fingertips'
# centre and 5.8 cm towards the agent-view camera, looking along the tool axis (75 deg fov), so
# the fingertips sit at the bottom edge of the image and image-up points away from the robot.
WRIST_POS = np.array([0.0, 0.058, -0.094])
WRIST_ROT = np.array([[-1.0, 0.0, 0.0], [0.0, -1.0, 0.0], [0.0, 0.0, 1.0]])  # rows: right, down, forward
# LIBERO's agentview camera (world pos (0.6586, 0, 1.6104), 45 deg fov, pitched 39 deg down
# towards the robot) in the drawing frame.
AGENT_EYE, AGENT_TARGET, AGENT_FOV = (0.0, -0.6586, 0.7104), (0.0, 0.2211, 0.0), 45.0
SHOULDER = np.array([0.0, 0.62, 0.35])  # the arm's base (LIBERO's robot stands at x = -0.66 m)

# One finger as a box in the tool frame (tool z points from the hand to the fingertips).
_FINGER = np.stack([_prism_points("box", 0.0, 0.0, 0.0, 0.05, 0.006, 0.01)] * 2) * np.array([1.0, 1.0, -1.0])


class _Model:
    """Local-frame points of one entity's prisms, and how to draw them."""

    def __init__(self, k: Kind):
        self.parts = _parts(k)
        pts, self.spans = [], []
        start = 0
        for p in self.parts:
            q = _prism_points(*p[:7])
            if p[9] is not None:  # inner face: the top ring scaled about the part centre
                n = len(q) // 2
                inner = q[n:].copy()
                inner[:, :2] = (inner[:, :2] - [p[1], p[2]]) * p[9][0] + [p[1], p[2]]
                q = np.concatenate([q, inner])
            pts.append(q)
            self.spans.append((start, len(q)))
            start += len(q)
        self.points = np.concatenate(pts)


class Camera:
    """Pinhole camera: world -> pixel for an (N, 3) array."""

    def __init__(self, size: int, fov_deg: float):
        self.size = size
        self.f = size / (2.0 * math.tan(math.radians(fov_deg) / 2.0))
        self.rot = np.eye(3)  # rows: right, down, forward (world frame)
        self.pos = np.zeros(3)

    def look_at(self, eye, target, up=(0.0, 0.0, 1.0)) -> "Camera":
        eye, target = np.asarray(eye, float), np.asarray(target, float)
        fwd = target - eye
        fwd /= np.linalg.norm(fwd)
        right = np.cross(fwd, up)
        right /= np.linalg.norm(right)
        self.rot = np.stack([right, np.cross(fwd, right), fwd])
        self.pos = eye
        return self

    def project(self, pts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Pixel coordinates (N, 2) float and depths (N,)."""
        c = (pts - self.pos) @ self.rot.T
        z = c[:, 2]
        zs = np.maximum(z, 1e-3)
        uv = c[:, :2] * (self.f / zs)[:, None] + self.size / 2.0
        return uv, z


class Renderer:
    """Renders the agent view and the wrist view of a World (uint8 RGB, size x size)."""

    NEAR = 0.02  # m; prisms closer than this to the wrist camera are not drawn

    def __init__(self, cfg: LiberoMockConfig):
        self.size = cfg.image_size
        self.agent = Camera(self.size, AGENT_FOV).look_at(AGENT_EYE, AGENT_TARGET)
        self.wrist = Camera(self.size, 75.0)
        self._models: dict[str, _Model] = {}
        self._names: list[str] = []
        self._background = self._draw_background()
        self._floor = np.empty((self.size, self.size, 3), np.uint8)
        self._floor[:] = FLOOR
        corners = np.array([[TABLE_HALF_X * sx, TABLE_HALF_Y * sy, 0.0] for sx, sy in _SQUARE])
        self._table = corners
        xs = np.linspace(-TABLE_HALF_X, TABLE_HALF_X, 9)[1:-1]
        self._grain = np.concatenate([np.column_stack([xs, np.full(7, -TABLE_HALF_Y), np.zeros(7)]),
                                      np.column_stack([xs, np.full(7, TABLE_HALF_Y), np.zeros(7)])])
        self._offsets = np.zeros(1, dtype=int)
        self._local = np.zeros((0, 3))

    # -- scene set-up --------------------------------------------------------------------
    def set_scene(self, world: World) -> None:
        """Cache the entities' local geometry (called on reset)."""
        self._names = sorted(world.entities)
        self._models = {n: _Model(world[n].kind) for n in self._names}
        sizes = [len(self._models[n].points) for n in self._names]
        self._offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
        self._local = np.concatenate([self._models[n].points for n in self._names])

    def _draw_background(self) -> np.ndarray:
        img = np.empty((self.size, self.size, 3), np.uint8)
        img[:] = FLOOR
        corners = np.array([[TABLE_HALF_X * sx, TABLE_HALF_Y * sy, 0.0] for sx, sy in _SQUARE])
        uv, _ = self.agent.project(corners)
        cv2.fillConvexPoly(img, np.round(uv).astype(np.int32), TABLE)
        for x in np.linspace(-TABLE_HALF_X, TABLE_HALF_X, 9)[1:-1]:
            seg, _ = self.agent.project(np.array([[x, -TABLE_HALF_Y, 0], [x, TABLE_HALF_Y, 0]]))
            cv2.line(img, tuple(np.round(seg[0]).astype(int)), tuple(np.round(seg[1]).astype(int)), TABLE_LINE, 1)
        base, _ = self.agent.project(np.array([[SHOULDER[0], SHOULDER[1], 0.0], SHOULDER]))
        b = np.round(base).astype(int)
        cv2.line(img, tuple(b[0]), tuple(b[1]), ARM_DARK, 10)
        return img

    def _world_points(self, world: World) -> np.ndarray:
        pts = np.empty_like(self._local)
        for i, n in enumerate(self._names):
            e = world[n]
            a, b = self._offsets[i], self._offsets[i + 1]
            loc = self._local[a:b]
            if e.yaw:
                c, s = math.cos(e.yaw), math.sin(e.yaw)
                pts[a:b, 0] = c * loc[:, 0] - s * loc[:, 1] + e.pos[0]
                pts[a:b, 1] = s * loc[:, 0] + c * loc[:, 1] + e.pos[1]
                pts[a:b, 2] = loc[:, 2] + e.pos[2]
            else:
                pts[a:b] = loc + e.pos
        return pts

    # -- drawing -------------------------------------------------------------------------
    def _draw_entities(self, img, world, cam: Camera, pts: np.ndarray, near: float | None) -> None:
        uv, depth = cam.project(pts)
        pix = np.round(uv).astype(np.int32)
        ents = [world[n] for n in self._names]
        refs = np.array([e.pos for e in ents])
        # drawers are painted just after their cabinet (same depth), open or not
        dist = (refs - cam.pos) @ cam.rot[2] - np.array([0.05 * _is_drawer(e) for e in ents])
        for i in np.argsort(-dist, kind="stable"):
            e = ents[i]
            if _is_drawer(e) and e.q < DRAWER_HIDDEN_Q:
                continue  # shut inside its cabinet: the cabinet draws its front
            m = self._models[self._names[i]]
            base = self._offsets[i]
            for part, (start, count) in zip(m.parts, m.spans):
                a = base + start
                if near is not None and depth[a:a + count].min() < near:
                    continue
                n = N_CYL if part[0] == "cyl" else 4
                p = pix[a:a + 2 * n]
                cv2.fillConvexPoly(img, cv2.convexHull(p), part[7])
                cv2.fillConvexPoly(img, p[n:2 * n], part[8])
                if part[9] is not None:
                    cv2.fillConvexPoly(img, pix[a + 2 * n:a + 3 * n], part[9][1])
            for pts3, side, top in _joint_parts(e):
                q, qd = cam.project(pts3)
                if near is not None and qd.min() < near:
                    continue
                qp = np.round(q).astype(np.int32)
                cv2.fillConvexPoly(img, cv2.convexHull(qp), side)
                cv2.fillConvexPoly(img, qp[len(qp) // 2:], top)

    def _gripper_points(self, world: World) -> tuple[np.ndarray, np.ndarray]:
        """World points of the two fingers (2 x 8 box corners) and the wrist above them."""
        g = world.gripper
        local = _FINGER.copy()  # (2, 8, 3): left and right finger boxes in the tool frame
        local[0, :, 0] -= g.width / 2.0 + 0.006
        local[1, :, 0] += g.width / 2.0 + 0.006
        fingers = local @ g.rot.T + g.pos
        wrist = g.pos + g.rot @ np.array([0.0, 0.0, -0.1])
        return fingers, wrist

    def _draw_agent(self, world: World, pts: np.ndarray) -> np.ndarray:
        img = self._background.copy()
        cam = self.agent
        self._draw_entities(img, world, cam, pts, None)
        g = world.gripper
        excl = set(world.chain(g.held)) if g.held else set()
        surf = max([e.top for e in world.entities.values()
                    if e.name not in excl and e.covers(g.pos[0], g.pos[1])] + [0.0])
        shadow = np.column_stack([_CIRCLE * 0.028 + g.pos[:2], np.full(N_CYL, min(surf, g.pos[2]) + 0.001)])
        uv, _ = cam.project(shadow)
        cv2.fillConvexPoly(img, np.round(uv).astype(np.int32), SHADOW)
        fingers, wrist = self._gripper_points(world)
        shoulder = SHOULDER
        elbow = (shoulder + wrist) / 2.0 + np.array([0.0, 0.05, 0.14])
        joints, jd = cam.project(np.stack([shoulder, elbow, wrist]))
        j = np.round(joints).astype(np.int32)
        thick = [max(2, int(cam.f * 0.05 / d)) for d in jd]
        cv2.line(img, tuple(j[0]), tuple(j[1]), ARM_DARK, thick[1] + 2)
        cv2.line(img, tuple(j[1]), tuple(j[2]), ARM, thick[2])
        cv2.circle(img, tuple(j[1]), thick[1] // 2 + 1, ARM, -1)
        fuv, _ = cam.project(fingers.reshape(-1, 3))
        fp = np.round(fuv).astype(np.int32).reshape(2, 8, 2)
        hand = np.concatenate([fp[0][4:], fp[1][4:], j[2:3]])
        cv2.fillConvexPoly(img, cv2.convexHull(hand), ARM_DARK)
        for f in fp:
            cv2.fillConvexPoly(img, cv2.convexHull(f), FINGER)
        return img

    def _draw_wrist(self, world: World, pts: np.ndarray) -> np.ndarray:
        g = world.gripper
        cam = self.wrist
        cam.pos = g.pos + g.rot @ WRIST_POS
        cam.rot = WRIST_ROT @ g.rot.T
        img = self._floor.copy()
        table = _clip_polygon(self._table, cam, self.NEAR)
        if len(table) >= 3:
            uv, _ = cam.project(table)
            cv2.fillPoly(img, [np.round(uv).astype(np.int32)], TABLE)
        uv, z = cam.project(self._grain)
        for k in range(7):
            if z[k] > self.NEAR and z[k + 7] > self.NEAR:
                cv2.line(img, tuple(np.round(uv[k]).astype(int)), tuple(np.round(uv[k + 7]).astype(int)), TABLE_LINE, 1)
        self._draw_entities(img, world, cam, pts, self.NEAR)
        fingers, _ = self._gripper_points(world)
        fuv, fz = cam.project(fingers.reshape(-1, 3))
        if fz.min() > self.NEAR:
            for f in np.round(fuv).astype(np.int32).reshape(2, 8, 2):
                cv2.fillConvexPoly(img, cv2.convexHull(f), FINGER)
        return img

    def project(self, world: World, pts: np.ndarray) -> dict:
        """Pixel (row, col) of drawing-frame points in the agent and wrist images."""
        g = world.gripper
        self.wrist.pos, self.wrist.rot = g.pos + g.rot @ WRIST_POS, WRIST_ROT @ g.rot.T
        return {view: cam.project(pts)[0][:, ::-1].tolist() for view, cam in (("agentview", self.agent), ("wrist", self.wrist))}

    def render(self, world: World) -> tuple[np.ndarray, np.ndarray]:
        """(agentview, wrist) uint8 RGB images."""
        pts = self._world_points(world)
        return self._draw_agent(world, pts), self._draw_wrist(world, pts)


def _clip_polygon(poly: np.ndarray, cam: Camera, near: float) -> np.ndarray:
    """Clip a world polygon to the camera's near plane (Sutherland-Hodgman, one plane)."""
    d = (poly - cam.pos) @ cam.rot[2] - near
    out = []
    for i in range(len(poly)):
        a, b, da, db = poly[i], poly[(i + 1) % len(poly)], d[i], d[(i + 1) % len(poly)]
        if da >= 0:
            out.append(a)
        if (da >= 0) != (db >= 0):
            out.append(a + (b - a) * (da / (da - db)))
    return np.array(out) if out else np.zeros((0, 3))
