"""LiberoMockEnv: LIBERO's interface on a kinematic tabletop rendered with OpenCV.

Interface (what the closed-loop runner uses):
    env = make_env("spatial", task_id=0, episode=3, seed=1)
    obs = env.reset()          # agentview, wrist (uint8 SxSx3 RGB, S = image_size), proprio
                               # (float32 8), stacked (uint8 Sx2Sx3 = agentview | wrist)
    obs, reward, done, info = env.step(action)   # action: float ndarray (7,) in [-1, 1]
    info: success, phase ("planning"/"manipulation"), termination (None, "success",
          "timeout", "bad_action: ..."), step, action_applied (after clipping), clipped.

Conventions are real LIBERO's as openpi's LIBERO client runs it (frames.py has the map):
one step is one 20 Hz controller tick with one action (the episode limits count these
ticks); actions are OSC_POSE deltas in LIBERO's world frame (+x towards the agent-view
camera, +y to the robot's left, +z up; rotation deltas as world axis-angle), the gripper -1
open / +1 close; proprio is the end-effector position in LIBERO's world frame (table top at
z = 0.9 m), its axis-angle and the two finger positions. Images are the 180-degree-rotated
renders (openpi's `[::-1, ::-1]`), in which +y moves the gripper to the left. LIBERO's 10
settle ticks after a reset have nothing to settle here (no physics), so a mock episode starts
where LIBERO's policy steps start. Initial states: a fixed layout per task plus jitter drawn
from a generator seeded by a SHA-256 of (suite, task, episode index, seed id), so reruns
reproduce exactly (LIBERO ships 50 fixed states per task; see `libero_real` for those).
"""
from __future__ import annotations

import numpy as np

from . import frames
from .config import LiberoMockConfig
from .expert import expert_phase
from .layout import build_entities, solve_layout, stable_seed
from .render import Renderer
from .tasks import SUITES, TaskSpec, suite_tasks
from .world import Gripper, World

ACTION_DIM = 7
PROPRIO_DIM = 8


def validate_action(action: object) -> np.ndarray:
    """Return `action` as float64 (7,) or raise ValueError naming the bad value."""
    if not isinstance(action, np.ndarray):
        raise ValueError(f"action must be a numpy array of {ACTION_DIM} floats, "
                         f"got {type(action).__name__}: {action!r}")
    if action.dtype.kind != "f":
        raise ValueError(f"action dtype must be floating point, got {action.dtype}: {action!r}")
    if action.shape != (ACTION_DIM,):
        raise ValueError(f"action must have shape ({ACTION_DIM},), got {action.shape}: {action!r}")
    bad = np.flatnonzero(~np.isfinite(action))
    if bad.size:
        raise ValueError(f"action has non-finite values at indices {bad.tolist()}: {action!r}")
    return action.astype(np.float64)


class LiberoMockEnv:
    """One task of one suite; `reset()` rebuilds the seeded initial state of its episode."""

    def __init__(self, task: TaskSpec, episode: int, seed: int, render: bool = True,
                 cfg: LiberoMockConfig | None = None):
        if not isinstance(episode, (int, np.integer)) or episode < 0:
            raise ValueError(f"episode must be a non-negative integer, got {episode!r}")
        if not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
        self.cfg = cfg or LiberoMockConfig()
        self.task = task
        self.episode, self.seed = int(episode), int(seed)
        self.render_enabled = bool(render)
        self.instruction = task.instruction
        self.max_steps = task.limit
        self.control_hz = self.cfg.control_hz
        self._nominal = solve_layout(task.scene, task.layout_key, self.cfg)
        self._renderer = None
        if self.render_enabled:
            self._renderer = Renderer(self.cfg)
        self.world: World | None = None
        self.steps = 0
        self.done = False
        self.termination: str | None = None
        self.last_info: dict = {}
        self._expert_cache: dict = {}

    @property
    def state_seed(self) -> int:
        """The 64-bit seed of this episode's initial state."""
        t = self.task
        return stable_seed(t.suite, t.index, t.name, self.episode, self.seed)

    def reset(self) -> dict:
        """Rebuild the seeded initial state; returns the first observation."""
        rng = np.random.default_rng(self.state_seed)
        ents = build_entities(self.task.scene, self._nominal, rng, self.cfg, self.task.swap)
        home = frames.pos_from_libero(self.cfg.home)
        home = home + rng.uniform(-self.cfg.home_jitter, self.cfg.home_jitter, 3)
        self.world = World(ents, Gripper(pos=home, rot=self.cfg.home_rotation(), width=self.cfg.gripper_max_width),
                           self.cfg)
        self.steps, self.done, self.termination = 0, False, None
        self._expert_cache = {}
        self.last_info = {"success": False, "phase": self.phase(), "termination": None, "step": 0}
        if self._renderer is not None:
            self._renderer.set_scene(self.world)
        return self.observe()

    def observe(self) -> dict:
        """Current observation: images (when rendering) and 8-dim proprio."""
        self._require_reset()
        obs = {"proprio": self.world.proprio()}
        if self._renderer is not None:
            agent, wrist = self._renderer.render(self.world)
            obs["agentview"], obs["wrist"] = agent, wrist
            obs["stacked"] = np.concatenate([agent, wrist], axis=1)
        return obs

    def step(self, action: np.ndarray) -> tuple[dict, float, bool, dict]:
        """Apply one 7-dim delta action (clipped to [-1, 1]); see the module docstring."""
        self._require_reset()
        if self.done:
            raise RuntimeError(f"episode is over ({self.termination}); call reset() first")
        try:
            a = validate_action(action)
        except ValueError as e:
            self.done, self.termination = True, f"bad_action: {e}"
            self.last_info = {"success": False, "phase": self.phase(),
                              "termination": self.termination, "step": self.steps}
            raise
        applied = np.clip(a, -1.0, 1.0)
        self.world.apply(frames.action_from_libero(applied))
        self.steps += 1
        success = self.task.predicate.satisfied(self.world, self.cfg.next_to_gap)
        if success:
            self.done, self.termination = True, "success"
        elif self.steps >= self.max_steps:
            self.done, self.termination = True, "timeout"
        info = {"success": success, "phase": self.phase(), "termination": self.termination,
                "step": self.steps, "action_applied": applied.astype(np.float32),
                "clipped": bool(np.any(applied != a))}
        self.last_info = info
        return self.observe(), float(success), self.done, info

    def project(self, points: np.ndarray) -> dict:
        """Pixel (row, col) of LIBERO-world points (N, 3) in both camera images, as lists (the
        conventions check compares them with real LIBERO's cameras)."""
        self._require_reset()
        if self._renderer is None:
            raise RuntimeError("project() needs rendering (render=True)")
        return self._renderer.project(self.world, frames.pos_from_libero(np.asarray(points, float).reshape(-1, 3)))

    def phase(self) -> str:
        """'planning' (free-space transport) or 'manipulation' (near-object grasp/place)."""
        return expert_phase(self)

    def success(self) -> bool:
        self._require_reset()
        return self.task.predicate.satisfied(self.world, self.cfg.next_to_gap)

    def close(self) -> None:
        """End the episode and drop its state (as LIBERO's env.close()); reset() starts again."""
        self.world = None
        self.done = True

    def __enter__(self) -> "LiberoMockEnv":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _require_reset(self) -> None:
        if self.world is None:
            raise RuntimeError("call reset() before using the environment")


def make_env(suite: str, task_id: int, episode: int, seed: int, render: bool = True,
             cfg: LiberoMockConfig | None = None) -> LiberoMockEnv:
    """Environment for task `task_id` (0..9) of `suite`, episode `episode`, seed id `seed`."""
    cfg = cfg or LiberoMockConfig()
    tasks = suite_tasks(suite, cfg.ood_limit_factor)  # accepts LIBERO's suite names too
    if not isinstance(task_id, (int, np.integer)) or not 0 <= task_id < len(tasks):
        raise ValueError(f"task_id must be an integer in [0, {len(tasks) - 1}], got {task_id!r}")
    return LiberoMockEnv(tasks[int(task_id)], episode, seed, render, cfg)


__all__ = ["ACTION_DIM", "PROPRIO_DIM", "SUITES", "LiberoMockEnv", "make_env", "validate_action"]
