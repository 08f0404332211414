"""Closed-loop episodes on real LIBERO: the mocked bridge's runner with `RealLiberoEnv` underneath.

Everything above the environment is `vam_sim.libero_mock.runner.SimRunner` unchanged (policy,
lockstep executor, TR monitor, PNG, MCAP); only the environment differs. Episode `rep` of a
task starts from LIBERO's fixed initial state number `rep + 10 * seed` (of 50 per task).
The scripted expert needs the mock's world state, so real LIBERO runs the policy only.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from vam_sim.libero_mock.runner import SimConfig, SimRunner, episode_name

from .client import RealLiberoEnv

REAL_SUITES = ("spatial", "object", "goal", "long")  # long = LIBERO's libero_10


class RealLiberoRunner(SimRunner):
    """`SimRunner` whose episodes run in real LIBERO (a child process in its own environment)."""

    def __init__(self, cfg: SimConfig, out: str | Path, policy: Any = None, python: str | None = None,
                 backend: str = "libero", progress=None, overwrite: bool = False):
        if cfg.suite not in REAL_SUITES:
            raise ValueError(f"real LIBERO has the suites {REAL_SUITES}; {cfg.suite!r} exists only in the mock")
        if cfg.policy != "vam":
            raise ValueError("the scripted expert needs the mocked world's state; use --policy vam with real LIBERO")
        super().__init__(cfg, out, policy=policy, progress=progress, overwrite=overwrite)
        self.python, self.backend = python, backend

    def run_episode(self, index: int) -> dict:
        c = self.cfg
        task, rep = (c.first_task + index) % 10, index // 10
        env = RealLiberoEnv(c.suite, task, rep + 10 * c.seed, python=self.python, backend=self.backend)
        if c.max_steps is not None:
            env.max_steps = min(env.max_steps, c.max_steps)
        name = episode_name(c.suite, task, rep, c.seed)
        result = {"name": name, "suite": c.suite, "task": task, "task_name": env.task.name,
                  "instruction": env.instruction, "seed": c.seed, "episode": rep, "policy": c.policy,
                  "guidance": c.label, "success": False, "steps": 0, "termination": None, "replans": [],
                  "backend": "real_libero" if self.backend == "libero" else "mock_via_server"}
        with env:
            obs = env.reset()
            result.update(self._run_vam(env, obs, result, c.executor))
        return result
