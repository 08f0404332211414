"""LIBERO server: runs real LIBERO episodes for a client in another Python environment.

Run by `vam_sim.libero_real.client.RealLiberoEnv` as `<libero-venv>/bin/python server.py [--backend
libero|mock]`; requests arrive on stdin, replies leave on the original stdout (everything the
simulator prints is redirected to stderr so it cannot corrupt the stream). Standard library,
numpy and the backend only: this file does not import vam_stack.

Requests (`op`): `open` {suite, task_id, image_size} -> task info; `reset` {init_state} ->
observation; `step` {action (7,) float} -> observation, reward, done, info; `close`.
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

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from protocol import ProtocolError, read_message, write_message  # noqa: E402  (runs as a script)

SETTLE_STEPS = 10  # no-op ticks after reset (openpi's num_steps_wait)
SUITES = {"spatial": "libero_spatial", "object": "libero_object", "goal": "libero_goal", "long": "libero_10"}
ALIASES = {v: k for k, v in SUITES.items()} | {"10": "long"}
LIMITS = {"spatial": 220, "object": 280, "goal": 300, "long": 520}  # controller ticks per episode (openpi)
CAMERAS = {"agentview": "agentview", "wrist": "robot0_eye_in_hand"}


def _suite(name: str) -> str:
    name = ALIASES.get(name, name)
    if name not in SUITES:
        raise ValueError(f"suite must be one of {sorted(SUITES)} (or {sorted(ALIASES)}), got {name!r}")
    return name


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

    def open(self, suite: str, task_id: int, image_size: int) -> dict:
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
        # the rate robosuite runs: ControlEnv passes its control_freq (LIBERO's default 20) to the robosuite
        # environment it keeps as .env (libero/libero/envs/env_wrapper.py, LIBERO @ 4f0dd188)
        return {"instruction": task.language, "name": task.name, "max_steps": LIMITS[suite],
                "init_states": len(self.init_states), "control_hz": float(self.env.env.control_freq)}

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

    def reset(self, init_state: int) -> dict:
        self.env.reset()
        obs = self.env.set_init_state(self.init_states[init_state % len(self.init_states)])
        for _ in range(SETTLE_STEPS):
            obs, _, _, _ = self.env.step([0.0] * 6 + [-1.0])
        return self._convert(obs)

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

    def open(self, suite: str, task_id: int, image_size: int) -> dict:
        from vam_sim.libero_mock.env import make_env

        self.env = make_env(suite, task_id, 0, 0)
        return {"instruction": self.env.instruction, "name": self.env.task.name, "max_steps": self.env.max_steps,
                "init_states": 1 << 30, "control_hz": self.env.control_hz}

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
                reply = backend.open(req["suite"], int(req["task_id"]), int(req.get("image_size", 224)))
            elif op == "tasks":
                reply = backend.tasks(req["suite"])
            elif op == "project":
                reply = backend.project(np.asarray(req["points"], dtype=np.float64).reshape(-1, 3))
            elif op == "reset":
                reply = backend.reset(int(req.get("init_state", 0)))
            elif op == "step":
                obs, reward, done, info = backend.step(np.asarray(req["action"], dtype=np.float64))
                reply = {**obs, "reward": reward, "done": done, **info}
            elif op == "close":
                backend.close()
                write_message(tx, {"ok": True})
                return
            else:
                raise ValueError(f"unknown op {op!r}")
        except Exception as e:  # reported to the client, which raises it with the server's words
            reply = {"error": f"{type(e).__name__}: {e}"}
        write_message(tx, reply)


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
