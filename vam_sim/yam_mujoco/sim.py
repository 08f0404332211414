"""The simulated bimanual YAM: physics, joint I/O in simulator units, offscreen cameras.

Simulator units: arm joints in radians; each gripper as the opening of one finger on its
rail in metres (0 = closed .. FINGER_TRAVEL = open; both fingers get the same command).
`MujocoBus` converts these to and from the driver's units. Time advances in one of two ways
(`MujocoConfig.step_mode`):
  external    the owner calls `step_control()` once per control period; `clock()` is the
              simulated time, so a lockstep loop is deterministic;
  wall_clock  `sync()` (called by the bus on every read and by the cameras on every poll)
              advances physics to the host's monotonic clock, at most `max_catch_up_s` per
              call; `clock()` is the host clock, so a real-time driver loop runs unchanged.
All access goes through one re-entrant lock: the driver thread, the camera thread and the
runner may share one simulator.
"""
from __future__ import annotations

import os
import threading
import time

import mujoco
import numpy as np

from .config import MujocoConfig
from .model import HOME, SceneSpec, build_mjcf, finger_gains
from yam_driver.arm_model import ARMS, ARM_JOINTS, FINGER_TRAVEL, GRIPPER_MOTOR
from .tasks import TASKS, Task

N_MOTORS = 14  # 2 arms x (6 joints + gripper)


class RenderUnavailable(RuntimeError):
    """Offscreen rendering cannot start (no EGL/OSMesa); the message says which backend failed."""


def _release_gl_context() -> None:
    """Un-bind the context the Renderer left current on this thread. An EGL context may be
    current on one thread only: without this, rendering from the camera bridge's thread after
    a first render on the main thread fails with EGL_BAD_ACCESS."""
    if os.environ.get("MUJOCO_GL", "").lower() == "egl":
        from mujoco import egl   # lazy: the EGL backend (and PyOpenGL) exist only where MUJOCO_GL=egl works
        from OpenGL import EGL

        if egl.EGL_DISPLAY is not None:
            EGL.eglMakeCurrent(egl.EGL_DISPLAY, EGL.EGL_NO_SURFACE, EGL.EGL_NO_SURFACE, EGL.EGL_NO_CONTEXT)


class YamSim:
    """MuJoCo model + data of two YAM arms and a task's objects; thread-safe."""

    def __init__(self, cfg: MujocoConfig, task: Task | None = None):
        self.cfg = cfg
        self.task = task if task is not None else TASKS[cfg.task]()
        scene = SceneSpec(arm_spacing=cfg.arm_spacing, timestep=cfg.physics_dt, objects=self.task.objects())
        self.xml = build_mjcf(scene)
        self.model = mujoco.MjModel.from_xml_string(self.xml)
        self.data = mujoco.MjData(self.model)
        self.lock = threading.RLock()
        m = self.model
        self.joint_qpos = np.array([m.joint(f"{a}_{j}").qposadr[0] for a in ARMS for j in ARM_JOINTS])  # (12,)
        self.joint_dof = np.array([m.joint(f"{a}_{j}").dofadr[0] for a in ARMS for j in ARM_JOINTS])
        self.joint_act = np.array([m.actuator(f"{a}_{j}").id for a in ARMS for j in ARM_JOINTS])
        self.finger_qpos = np.array([[m.joint(f"{a}_finger_{s}").qposadr[0] for s in "ab"] for a in ARMS])  # (2, 2)
        self.finger_dof = np.array([[m.joint(f"{a}_finger_{s}").dofadr[0] for s in "ab"] for a in ARMS])
        self.finger_act = np.array([[m.actuator(f"{a}_finger_{s}").id for s in "ab"] for a in ARMS])
        self.arm_slots = np.array([i for i in range(N_MOTORS) if i % 7 != 6])  # motor index of each arm joint
        self.gripper_slots = np.array([6, 13])
        self.finger_dof_flat = self.finger_dof.ravel()
        self.torque_enabled = True
        self._renderer: mujoco.Renderer | None = None
        self._wall_t0: float | None = None
        self.rng = np.random.default_rng(cfg.seed)
        self.reset(cfg.seed)

    # --- episode --------------------------------------------------------------------------
    def reset(self, seed: int | None = None) -> None:
        """Arms at the ready pose with open grippers, the task's objects placed by `seed`, settled."""
        with self.lock:
            self.rng = np.random.default_rng(self.cfg.seed if seed is None else seed)
            m, d = self.model, self.data
            mujoco.mj_resetData(m, d)
            self.set_torque(True)  # a previous episode's shutdown may have left the arms limp
            home = np.tile(np.asarray(HOME), 2)
            d.qpos[self.joint_qpos] = home
            d.qpos[self.finger_qpos.ravel()] = FINGER_TRAVEL
            self.task.reset(self, self.rng)
            d.ctrl[:] = 0.0
            targets = np.insert(np.insert(home, 6, FINGER_TRAVEL), 13, FINGER_TRAVEL)
            self.set_targets(targets)
            mujoco.mj_forward(m, d)
            for _ in range(int(round(self.cfg.settle_s / m.opt.timestep))):
                # held where the reset put it, gravity carried as a driver would carry it (the motors
                # have no gravcomp: a reset pose without feed-forward would sag before the first tick)
                self.set_targets(targets, torque_ff=self.gravity_torque())
                mujoco.mj_step(m, d)
            d.time = 0.0
            self._wall_t0 = None

    # --- motors ---------------------------------------------------------------------------
    def set_targets(self, targets: np.ndarray, mask: np.ndarray | None = None,
                    torque_ff: np.ndarray | None = None) -> None:
        """Position targets (14,) in simulator units for the motors in `mask` (default all), with
        `torque_ff` (14,) Nm of joint-space feed-forward on the arm joints (the MIT command's
        t_ff; grippers ignore it). The motor law is kp (q* - q) - kd v + t_ff, saturated: MuJoCo's
        position actuator with control q* + t_ff / kp."""
        t = np.asarray(targets, dtype=np.float64)
        mask = np.ones(N_MOTORS, bool) if mask is None else np.asarray(mask, bool)
        with self.lock:
            d = self.data
            arm_mask = mask[self.arm_slots]
            q = t[self.arm_slots]
            if torque_ff is not None:
                kp = self.model.actuator_gainprm[self.joint_act, 0]
                ff = np.asarray(torque_ff, np.float64)[self.arm_slots]
                q = q + np.divide(ff, kp, out=np.zeros_like(ff), where=kp > 0)
            d.ctrl[self.joint_act[arm_mask]] = q[arm_mask]
            for k, slot in enumerate(self.gripper_slots):
                if mask[slot]:
                    d.ctrl[self.finger_act[k]] = t[slot]

    def configure_motors(self, kp: np.ndarray, kd: np.ndarray, gripper_stroke: np.ndarray) -> None:
        """The gains every MIT command carries, as the driver configuration sets them: (14,) kp
        Nm/rad and kd Nm s/rad per motor, and (2,) each gripper motor's stroke closed -> open (rad),
        which sets its transmission onto the finger rails (model.finger_gains)."""
        kp, kd = np.asarray(kp, np.float64), np.asarray(kd, np.float64)
        with self.lock:
            m = self.model
            for slot, act in zip(self.arm_slots, self.joint_act):
                m.actuator_gainprm[act, 0] = kp[slot]
                m.actuator_biasprm[act, 1:3] = (-kp[slot], -kd[slot])
            for k, slot in enumerate(self.gripper_slots):
                fkp, fkd, fmax, farm = finger_gains(kp[slot], kd[slot], float(gripper_stroke[k]), GRIPPER_MOTOR)
                for act in self.finger_act[k]:
                    m.actuator_gainprm[act, 0] = fkp
                    m.actuator_biasprm[act, 1:3] = (-fkp, -fkd)
                    m.actuator_forcerange[act] = (-fmax, fmax)
                m.dof_armature[self.finger_dof[k]] = farm

    def gravity_torque(self) -> np.ndarray:
        """(14,) Nm each arm joint needs now to hold still against gravity (MuJoCo's bias force at
        the present state; grippers 0): what the simulation itself uses while nothing drives it."""
        with self.lock:
            out = np.zeros(N_MOTORS)
            out[self.arm_slots] = self.data.qfrc_bias[self.joint_dof]
            return out

    def targets(self) -> np.ndarray:
        """(14,) the position targets the actuators hold now, simulator units."""
        with self.lock:
            out = np.empty(N_MOTORS)
            out[self.arm_slots] = self.data.ctrl[self.joint_act]
            out[self.gripper_slots] = self.data.ctrl[self.finger_act[:, 0]]
            return out

    def state(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(position, velocity, effort), each (14,): rad, rad/s, Nm (grippers: m, m/s, N)."""
        with self.lock:
            d = self.data
            pos, vel, eff = np.empty(N_MOTORS), np.empty(N_MOTORS), np.empty(N_MOTORS)
            pos[self.arm_slots] = d.qpos[self.joint_qpos]
            vel[self.arm_slots] = d.qvel[self.joint_dof]
            eff[self.arm_slots] = d.actuator_force[self.joint_act]
            pos[self.gripper_slots] = d.qpos[self.finger_qpos].mean(axis=1)
            vel[self.gripper_slots] = d.qvel[self.finger_dof].mean(axis=1)
            eff[self.gripper_slots] = d.actuator_force[self.finger_act].mean(axis=1)
            return pos, vel, eff

    def set_torque(self, enabled: bool) -> None:
        """Torque off: every actuator stops (the arm falls, as a YAM without brakes does)."""
        with self.lock:
            m = self.model
            if enabled:
                m.opt.disableflags &= ~int(mujoco.mjtDisableBit.mjDSBL_ACTUATION)
            else:
                m.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_ACTUATION)
            self.torque_enabled = enabled

    # --- time -----------------------------------------------------------------------------
    @property
    def time(self) -> float:
        return float(self.data.time)

    def clock(self) -> float:
        """The clock every consumer of this simulator uses: sim time (external) or host time."""
        if self.cfg.step_mode == "external":
            return float(self.data.time)
        return time.monotonic()

    def step_control(self) -> float:
        """Advance one control period (`substeps` physics steps); returns the new sim time."""
        with self.lock:
            for _ in range(self.cfg.substeps):
                mujoco.mj_step(self.model, self.data)
            if self.task is not None:
                self.task.observe(self)
            return float(self.data.time)

    def sync(self) -> None:
        """wall_clock mode: advance physics to the host clock (bounded by max_catch_up_s)."""
        if self.cfg.step_mode != "wall_clock":
            return
        with self.lock:
            now = time.monotonic()
            if self._wall_t0 is None:
                self._wall_t0 = now - self.data.time
            lag = (now - self._wall_t0) - self.data.time
            n = int(min(lag, self.cfg.max_catch_up_s) / self.model.opt.timestep)
            for _ in range(max(n, 0)):
                mujoco.mj_step(self.model, self.data)
            if n > 0 and self.task is not None:
                self.task.observe(self)
            if lag > self.cfg.max_catch_up_s:  # the host stalled: skip ahead instead of bursting
                self._wall_t0 = now - self.data.time

    def sim_to_clock(self, t_sim: float) -> float:
        """A simulated instant on `clock()`'s time axis (camera stamps)."""
        if self.cfg.step_mode == "external" or self._wall_t0 is None:
            return t_sim
        return self._wall_t0 + t_sim

    # --- cameras --------------------------------------------------------------------------
    def render(self, view: str) -> np.ndarray:
        """[H, W, 3] uint8 RGB of one view at the current state (shadows and reflections off)."""
        with self.lock:
            r = self._ensure_renderer()
            if view not in self.cfg.cameras:
                raise ValueError(f"unknown view {view!r}; this simulator renders {list(self.cfg.cameras)}")
            r.update_scene(self.data, camera=view)  # MJCF camera names equal the view names
            # current only while rendering, so the next render may come from another thread
            with r._gl_context.as_current():
                return r.render()  # [H, W, 3] uint8, a fresh array

    def _ensure_renderer(self) -> "mujoco.Renderer":
        if self._renderer is None:
            try:
                self._renderer = mujoco.Renderer(self.model, self.cfg.camera_height, self.cfg.camera_width)
            except Exception as e:
                raise RenderUnavailable(
                    f"MuJoCo offscreen rendering failed with MUJOCO_GL={os.environ.get('MUJOCO_GL')!r}: "
                    f"{type(e).__name__}: {e}. Needs libEGL (egl) or libOSMesa (osmesa); set MUJOCO_GL before "
                    "the first mujoco import") from e
            flags = self._renderer.scene.flags
            flags[mujoco.mjtRndFlag.mjRND_SHADOW] = False
            flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = False
            _release_gl_context()
        return self._renderer

    def close(self) -> None:
        with self.lock:
            if self._renderer is not None:
                self._renderer.close()
                self._renderer = None

    # --- helpers for tasks and experts ------------------------------------------------------
    def body_pos(self, name: str) -> np.ndarray:
        return self.data.body(name).xpos.copy()

    def body_mat(self, name: str) -> np.ndarray:
        return self.data.body(name).xmat.reshape(3, 3).copy()

    def site_pos(self, name: str) -> np.ndarray:
        return self.data.site(name).xpos.copy()

    def place_free_body(self, name: str, pos, yaw: float = 0.0) -> None:
        """Set a free body's position and yaw (called during reset)."""
        adr = self.model.joint(name).qposadr[0]
        self.data.qpos[adr:adr + 3] = pos
        self.data.qpos[adr + 3:adr + 7] = (np.cos(yaw / 2), 0.0, 0.0, np.sin(yaw / 2))

    def contacts_between(self, geom_prefix_a: str, geom_prefix_b: str) -> int:
        """Number of active contacts between geoms whose names start with the two prefixes."""
        m, d, n = self.model, self.data, 0
        for c in d.contact[:d.ncon]:
            a, b = m.geom(c.geom1).name, m.geom(c.geom2).name
            if (a.startswith(geom_prefix_a) and b.startswith(geom_prefix_b)) or \
               (a.startswith(geom_prefix_b) and b.startswith(geom_prefix_a)):
                n += 1
        return n
