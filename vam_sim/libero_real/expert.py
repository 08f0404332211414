"""Scripted expert for real LIBERO (spatial and goal suites), on the simulator's privileged state.

Runs inside the LIBERO server process (its own virtual environment: numpy and the LIBERO env
only, no vam_stack import). It reads what the simulator knows and a camera cannot:

    object poses       sim body poses of `env.obj_body_id[name]` (movable objects and fixtures)
    object extents     the world AABBs of each object's collision geoms (rim radius, heights)
    regions            `get_site_xpos` / `get_site_xmat` of the BDDL regions (cook region, rack,
                       cabinet top, drawer interiors)
    articulation       drawer and knob joints through `get_object(name).joints` and the sim qpos
    gripper            the eef site (`robots[0].eef_site_id`), its rotation, the finger joints
    goal               the parsed BDDL goal (`parsed_problem['goal_state']`); success is
                       LIBERO's own `_check_success()`, as the benchmark counts it

and drives LIBERO's own OSC_POSE controller with the 7-dim action the benchmark uses (eef delta
translation and axis-angle rotation in the world frame, scaled by the controller's output_max
of 0.05 m / 0.5 rad; gripper -1 open, +1 close).

The goal's atoms map onto skills: `on`/`in` with a movable object -> pick and place (the plate,
too wide to grasp, is pushed); `in` a drawer region -> open that drawer first; `open` a drawer
region -> hook the handle with one finger and pull; `turnon` the stove -> pinch the knob's bar on
its hinge and turn the hand. Grasps: a bowl by its rim (fingers across the wall, on the side with the most room), a
box across its short side, a bottle round its neck. Each step is labelled with its phase
(free-space moves "planning", contact-rich moves "manipulation"), as the mocked expert does.

Skills are generators that yield one action per controller tick and read the state afresh at
every tick, so the expert closes the loop on what the physics did (a bowl that swung in the
grasp is placed by where it is, not where it should be).
"""
from __future__ import annotations

import math

import numpy as np

if __package__:                 # imported as vam_sim.libero_real.expert (the project's own venv)
    from .scene import (
        CARRY_SPEED, CLOSE, DOWN, Dropped, ExpertFailed, GRASP_TRIES, GRIP_TICKS, OPEN, PAD_BELOW,
        PAD_HALF, POS_SCALE, RELOCATE_FROM_UNDER_DRAWER, RIM_DEPTH, ROBOT_BASE_XY, ROT_SCALE, Scene,
        TABLE_Z, axis_angle_to_mat, rot_to_axis_angle, rot_z, segment_box_distance_xy,
        wrap_half_turn)
    from .fixture_skills import FixtureSkills
else:                           # beside server.py in LIBERO's venv (server.py's directory on sys.path)
    from scene import (  # type: ignore[no-redef]
        CARRY_SPEED, CLOSE, DOWN, Dropped, ExpertFailed, GRASP_TRIES, GRIP_TICKS, OPEN, PAD_BELOW,
        PAD_HALF, POS_SCALE, RELOCATE_FROM_UNDER_DRAWER, RIM_DEPTH, ROBOT_BASE_XY, ROT_SCALE, Scene,
        TABLE_Z, axis_angle_to_mat, rot_to_axis_angle, rot_z, segment_box_distance_xy,
        wrap_half_turn)
    from fixture_skills import FixtureSkills  # type: ignore[no-redef]

PHASES = ("planning", "manipulation")   # the labels of a demonstration's steps (server.py stores their index)


class LiberoExpert(FixtureSkills):
    """One episode's expert: `act()` -> (7-dim action, phase). Raises ExpertFailed when stuck."""

    def __init__(self, env, noise: float = 0.0, rng: np.random.Generator | None = None):
        self.s = Scene(env)
        self.noise = float(noise)
        self.rng = rng if rng is not None else np.random.default_rng(0)
        self.phase = "planning"
        self.grip = OPEN
        self.orient = DOWN.copy()      # the eef site's target rotation
        self.held: tuple[str, np.ndarray] | None = None   # (object, its body position relative to the eef)
        self.debug: list | None = None                    # a list here collects the grasp candidates' scores
        self.goal = [list(map(str, atom)) for atom in self.s.env.parsed_problem["goal_state"]]
        self._plan = self._program()

    # --- the public step -------------------------------------------------------------------------
    def act(self) -> tuple[np.ndarray, str]:
        try:
            action = next(self._plan)
        except StopIteration:
            action = self._hold()
        return np.clip(action, -1.0, 1.0).astype(np.float64), self.phase

    # --- low-level control ---------------------------------------------------------------------
    def level(self) -> None:
        """Point the gripper straight down again, keeping the direction the fingers close in."""
        closing = self.orient[:, 0].copy()       # the site's x axis is the fingers' closing axis
        yaw = math.atan2(closing[1], closing[0]) - math.pi / 2 if np.linalg.norm(closing[:2]) > 1e-6 else 0.0
        # of the two level poses closing along that line, the one nearer the hand's present pose
        current = self.s.eef_mat
        self.orient = min((rot_z(yaw + f) @ DOWN for f in (0.0, math.pi)),
                          key=lambda r: np.linalg.norm(rot_to_axis_angle(r @ current.T)))

    def _orient_error(self) -> np.ndarray:
        return rot_to_axis_angle(self.orient @ self.s.eef_mat.T)

    def _rot_action(self) -> np.ndarray:
        return np.clip(self._orient_error() * 1.2 / ROT_SCALE, -1.0, 1.0)

    def _action(self, target: np.ndarray, speed: float, gain: float = 1.0,
                integral: np.ndarray | None = None) -> np.ndarray:
        err = np.asarray(target, float) - self.s.eef
        a = (err * gain + (integral if integral is not None else 0.0)) / POS_SCALE
        n = np.max(np.abs(a))
        if n > speed:
            a = a * (speed / n)
        if self.noise > 0 and self.phase == "planning":
            a = a + self.rng.normal(0.0, self.noise, 3)
        return np.concatenate([a, self._rot_action(), [self.grip]])

    def _hold(self) -> np.ndarray:
        return np.concatenate([np.zeros(3), self._rot_action(), [self.grip]])

    def move(self, target, tol: float = 0.006, speed: float = 1.0, max_ticks: int = 80, gain: float = 1.0,
             yaw_tol: float = 0.08, strict: bool = True):
        """Servo the eef to `target` (and `self.orient`); ends within `tol` (m) and `yaw_tol` (rad)."""
        target = np.asarray(target, float)
        integral = np.zeros(3)
        errs = []
        for _ in range(max_ticks):
            self._check_held()
            err = target - self.s.eef
            yaw_err = np.linalg.norm(self._orient_error())
            errs.append(np.linalg.norm(err))
            if errs[-1] < tol and yaw_err < yaw_tol:
                return True
            # stalled close to it (a pad resting on the rim, the controller's dead band): good enough
            if len(errs) > 10 and errs[-1] < max(2 * tol, 0.008) and errs[-10] - errs[-1] < 0.001 \
                    and yaw_err < max(2 * yaw_tol, 0.15):
                return True
            if np.linalg.norm(err) < 0.03:        # near the goal: integrate away the controller's steady error
                integral = np.clip(0.85 * integral + 0.15 * err, -0.01, 0.01)   # leaky: no limit cycle
            yield self._action(target, speed, gain, integral)
        if strict:
            raise ExpertFailed(f"{self.phase} waypoint {np.round(target, 3)} not reached in {max_ticks} ticks "
                               f"(eef at {np.round(self.s.eef, 3)}, rotation off by {np.linalg.norm(self._orient_error()):.2f} rad, "
                               f"last errors {np.round(errs[-6:], 4).tolist()}; "
                               f"contacts {self.s.contacts()})")
        return False

    def _check_held(self) -> None:
        if self.held is None:
            return
        name, offset = self.held
        slip = np.linalg.norm(self.s.pos(name) - self.s.eef - offset)
        if slip > 0.04:
            raise Dropped(f"{name} slipped {slip:.3f} m out of the grasp")

    def gripper(self, command: float, ticks: int = GRIP_TICKS):
        self.grip = command
        for _ in range(ticks):
            yield self._hold()

    def rise_to(self, z: float, **kw):
        p = self.s.eef
        yield from self.move([p[0], p[1], z], **kw)

    # --- the program -----------------------------------------------------------------------------
    def _program(self):
        for atom in self.goal:
            pred, args = atom[0].lower(), atom[1:]
            if self.s.success():
                break
            if pred == "open":
                yield from self.open_drawer(args[0])
            elif pred == "turnon":
                yield from self.turn_on(args[0])
            elif pred in ("on", "in") and args[0].startswith("plate"):
                yield from self.push(args[0], args[1])
            elif pred in ("on", "in"):
                if pred == "in" and args[1].startswith("wooden_cabinet") and args[1].endswith("_region"):
                    if RELOCATE_FROM_UNDER_DRAWER:
                        spot = self.out_from_under(args[0], args[1])
                        if spot is not None:      # the open drawer would hang over it: move it first
                            yield from self.pick(args[0])
                            yield from self.place_at(args[0], spot)
                    yield from self.open_drawer(args[1])
                for tries in range(GRASP_TRIES):
                    try:
                        yield from self.pick(args[0], then=args[1])
                        yield from self.place(args[0], args[1])
                        break
                    except Dropped:               # back for it: the way a demonstration shows a recovery
                        self.held = None
                        self.grip = OPEN
                        if tries == GRASP_TRIES - 1:
                            raise
            else:
                raise ExpertFailed(f"no skill for the goal atom {atom}")
        self.phase = "manipulation"
        while True:
            yield self._hold()

    # --- free-space moves ------------------------------------------------------------------------------
    def path_clear_z(self, a_xy, b_xy, exclude: set[str], hang: float, radius: float = 0.07) -> float:
        """The eef height at which a load hanging `hang` below the eef (of horizontal radius `radius`)
        clears every obstacle whose footprint comes within `radius` of the segment a -> b."""
        a, b = np.asarray(a_xy[:2], float), np.asarray(b_xy[:2], float)
        top = TABLE_Z
        for lo, hi in self.s.obstacles(exclude):
            if segment_box_distance_xy(a, b, lo, hi) < radius:
                top = max(top, hi[2])
        return top + hang + 0.03

    def transit(self, goal, exclude: set[str], hang: float, radius: float = 0.07, speed: float = 1.0):
        """Free-space move to `goal`: up to the height that clears what lies on the way, across,
        and down to the goal (phase "planning")."""
        goal = np.asarray(goal, float)
        self.phase = "planning"
        z = max(self.path_clear_z(self.s.eef, goal, exclude, hang, radius), goal[2])
        if self.s.eef[2] < z - 0.015:
            p = self.s.eef
            yield from self.move([p[0], p[1], z], tol=0.02, speed=speed)
        yield from self.move([goal[0], goal[1], max(z, goal[2])], tol=0.02, speed=speed)
        yield from self.move(goal, tol=0.012, speed=speed)

    # --- pick ---------------------------------------------------------------------------------------
    def grasp_pose(self, name: str, then: str | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(grasp point of the eef site, its rotation); `then`: where the object goes next (a bowl's
        rim is then taken where the hand also has room at that place)."""
        kind = name.rsplit("_", 1)[0]
        if "bowl" in kind:
            return self.rim_grasp(name, place=self.place_shift(name, then) if then is not None else None)
        if "bottle" in kind:
            p, yaw = self.neck_grasp(name)
        else:
            p, yaw = self.box_grasp(name)
        return p, rot_z(yaw) @ DOWN

    def pick(self, name: str, then: str | None = None):
        grasp, orient = self.grasp_pose(name, then)
        self.grip, self.orient = OPEN, orient
        approach = orient[:, 2]                   # the site's z axis points from the hand to the fingertips
        yield from self.transit(grasp - 0.07 * approach, {name}, hang=0.03, radius=0.05)
        self.phase = "manipulation"
        grasp, self.orient = self.grasp_pose(name, then)
        yield from self.move(grasp, tol=0.005, speed=0.6, max_ticks=50, yaw_tol=0.05)
        yield from self.gripper(CLOSE)
        if self.s.opening < 0.002:
            raise ExpertFailed(f"the grasp of {name} closed on nothing")
        z0 = self.s.pos(name)[2]
        # straight up first with the hand as it took the object (a leaning hand clears an overhang
        # on the way up too), then level
        yield from self.rise_to(self.s.eef[2] + 0.06, tol=0.01, speed=0.7)
        if self.s.pos(name)[2] < z0 + 0.02:
            raise Dropped(f"{name} did not come up with the gripper")
        self.held = (name, self.s.pos(name) - self.s.eef)
        if math.acos(max(-1.0, min(1.0, -self.orient[2, 2]))) < math.radians(12):
            self.level()                     # a hand that leans to clear an overhang carries it leaning
                                             # (turning it level under load drives the wrist to its limits)

    def rim_grasp(self, name: str, depth: float = RIM_DEPTH, prefer: np.ndarray | None = None,
                  place: tuple[np.ndarray, list[int]] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """A bowl's rim, taken as if the bowl stood upright, in the bowl's own frame: the fingers
        straddle the wall just below the rim, closing across it; a bowl resting a little tilted
        is taken with the hand tilted as much (up to 25 deg). A bowl leaning further (LIBERO-
        spatial's bowl slides off the ramekin within 15 ticks and leans ~50 deg) is pinched with
        the hand level, across the leaning wall. The rim point is the one with room for the pads
        and for the hand (the bowl's own higher rim included), then the least tilt, wrist
        rotation and reach. `place` (the bowl's shift to where it is put next, the geoms around that
        place): the hand must have room there too (a plate in front of the cabinet: a hand spanning
        the bowl towards the cabinet would meet it on the way down)."""
        c, rot = self.s.pos(name), self.s.mat(name)
        m, d = self.s.model, self.s.data
        corners = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)])
        local = []                                   # the bowl's pieces in its own frame: (centre, top)
        for g in self.s.geoms(name):
            pts = (corners * m.geom_aabb[g][3:] + m.geom_aabb[g][:3]) @ np.array(d.geom_xmat[g]).reshape(3, 3).T
            pts = (pts + d.geom_xpos[g] - c) @ rot
            local.append((pts.mean(0), pts[:, 2].max()))
        top = max(t for _, t in local)
        r = float(np.median([np.hypot(w[0], w[1]) for w, t in local if t > top - 0.004 and np.hypot(w[0], w[1]) > 0.02]))
        obstacles = [g for g in self.s.obstacle_geoms({name}) if self.s.geom_aabb(g)[1][2] > c[2] - 0.02]
        own = self.s.geoms(name)
        current = self.s.eef_mat
        best, best_score = None, -1e9
        for deg in range(0, 360, 15):
            th = math.radians(deg)
            u_local = np.array([math.cos(th), math.sin(th), 0.0])
            p = c + rot @ (r * u_local + np.array([0.0, 0.0, top - depth]))
            e = rot @ u_local                            # the wall's outward normal at this rim point
            if np.linalg.norm(e[:2]) < 0.3:
                continue
            level_yaw = math.atan2(e[1], e[0]) - math.pi / 2
            base = [rot @ rot_z(th - math.pi / 2 + f) @ DOWN for f in (0.0, math.pi)]        # in the bowl's frame
            base += [rot_z(level_yaw + f) @ DOWN for f in (0.0, math.pi)]                    # hand level, pinching
            variants = []                                                                    # the leaning wall;
            for b in base:                       # and each leaning away sideways (room from an overhang)
                variants += [axis_angle_to_mat(b[:, 0] * a) @ b for a in (0.0, -0.35, 0.35)]
            for orient in variants:
                tilt = math.acos(max(-1.0, min(1.0, -orient[2, 2])))
                if tilt > math.radians(30):
                    continue
                closing, across, approach = orient[:, 0], orient[:, 1], orient[:, 2]
                pads = [p + k * closing for k in (-0.042, 0.042)]
                # the hand's box (0.024-0.126 m behind the site) at the grasp and on its way in (+0.08)
                hand = [p - h * approach + k * closing + j * across for h in (0.035, 0.08, 0.125, 0.165, 0.205)
                        for k in (-0.1, -0.05, 0.0, 0.05, 0.1) for j in (-0.032, 0.032)]
                clearance = min(self.s.min_distance(obstacles, pads + hand), self.s.min_distance(own, hand),
                                min(q[2] for q in pads + hand) - TABLE_Z - 0.012)
                if place is not None:             # the hand where the bowl is put down, and above it
                    shift, around = place
                    at = [q + shift + np.array([0.0, 0.0, dz]) for q in hand for dz in (0.0, 0.04, 0.08)]
                    clearance = min(clearance, self.s.min_distance(around, at))
                turn = np.linalg.norm(rot_to_axis_angle(orient @ current.T))
                reach = max(0.0, math.hypot(p[0] - ROBOT_BASE_XY[0], p[1] - ROBOT_BASE_XY[1]) - 0.72)
                score = (min(clearance, 0.03) - 0.01 * tilt - 0.004 * turn - 0.002 * (p[0] - c[0]) / max(r, 1e-3)
                         - 0.3 * reach + (0.02 * float(np.dot(e[:2], prefer[:2])) if prefer is not None else 0.0))
                if self.debug is not None:
                    self.debug.append((deg, round(tilt, 2), round(clearance, 4), round(score, 4)))
                if score > best_score:
                    best, best_score = (p, orient), score
        if best is None:
            raise ExpertFailed(f"{name} lies with no rim the hand can reach")
        return best

    def neck_grasp(self, name: str) -> tuple[np.ndarray, float]:
        c = self.s.pos(name)
        lo, hi = self.s.aabb(name)
        return np.array([c[0], c[1], hi[2] - 0.035]), 0.0

    def box_grasp(self, name: str) -> tuple[np.ndarray, float]:
        """A box across its short horizontal side, at mid-height (at least the pads' half height)."""
        lo, hi = self.s.aabb(name)
        m = self.s.mat(name)
        # the box's horizontal axes in the world; the long one is the one with the larger extent
        ax = [m[:, i] for i in range(3) if abs(m[2, i]) < 0.7]
        geoms = self.s.geoms(name)
        ext = []
        for a in ax:
            proj = []
            for g in geoms:
                glo, ghi = self.s.geom_aabb(g)
                for corner in (glo, ghi):
                    proj.append(float(np.dot(corner[:2], a[:2])))
            ext.append(max(proj) - min(proj))
        short = ax[int(np.argmin(ext))]
        yaw = wrap_half_turn(math.atan2(short[1], short[0]) - math.pi / 2)
        centre = 0.5 * (lo + hi)
        z = max(centre[2] + 0.002, TABLE_Z + PAD_BELOW + PAD_HALF + 0.004)
        return np.array([centre[0], centre[1], z]), yaw

    # --- place --------------------------------------------------------------------------------------
    def place_target(self, obj: str, target: str) -> tuple[np.ndarray, float]:
        """(x, y, surface z) where the held object's body position should come to rest."""
        if target in self.s.env.object_sites_dict:
            p = self.s.site(target)
            if target.endswith("_top_region") and "rack" in target:
                return np.array([p[0], p[1] - 0.015, p[2]]), p[2]
            if "cabinet" in target and target.endswith("_region"):      # a drawer's interior
                lo, hi = self.s.aabb(target.rsplit("_", 2)[0], self._drawer_geoms(target))
                return np.array([p[0], p[1], lo[2]]), lo[2] + 0.01
            return np.array([p[0], p[1], p[2]]), p[2]
        # an object: its body centre, its top as the surface (bowls: the inside bottom)
        p = self.s.pos(target)
        lo, hi = self.s.aabb(target)
        surface = hi[2] if "plate" in target else lo[2] + 0.01
        return np.array([p[0], p[1], surface]), surface

    def place_shift(self, obj: str, target: str) -> tuple[np.ndarray, list[int]]:
        """How `obj` moves from where it lies to its rest at `target` (body xy to the spot, bottom to the
        surface), and the geoms around that place (all but the object and the target's own)."""
        spot, surface = self.place_target(obj, target)
        p, (lo, _) = self.s.pos(obj), self.s.aabb(obj)
        near = {obj, target, self._fixture_of(target)} - {None}
        return np.array([spot[0] - p[0], spot[1] - p[1], surface - lo[2]]), self.s.obstacle_geoms(near)

    def place(self, obj: str, target: str):
        spot, surface = self.place_target(obj, target)
        lo, hi = self.s.aabb(obj)
        hang = self.s.eef[2] - lo[2]                      # the load's bottom below the eef
        radius = 0.5 * max(hi[0] - lo[0], hi[1] - lo[1]) + 0.02
        offset = self.s.pos(obj) - self.s.eef            # the body position relative to the eef, as it hangs
        above = np.array([spot[0] - offset[0], spot[1] - offset[1], surface + hang + 0.04])
        yield from self.transit(above, {obj, self._fixture_of(target)} - {None}, hang=hang, radius=radius,
                                speed=CARRY_SPEED)
        self.phase = "manipulation"
        offset = self.s.pos(obj) - self.s.eef            # again: the load may have swung on the way
        release = np.array([spot[0] - offset[0], spot[1] - offset[1], surface + hang + 0.008])
        yield from self.move(release, tol=0.006, speed=0.4, max_ticks=40, strict=False)
        self.held = None
        yield from self.gripper(OPEN)
        yield from self.rise_to(self.s.eef[2] + 0.06, tol=0.02, speed=0.7, strict=False)
