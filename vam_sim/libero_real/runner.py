"""Closed-loop episodes on real LIBERO: the mocked bridge's runner with `RealLiberoEnv` underneath.

Everything above the environment is `vam_sim.libero_mock.runner.SimRunner` unchanged (policy,
lockstep executor, TR monitor, PNG, MCAP); only the environment differs. Episode `rep` of a
task starts from LIBERO's fixed initial state number `rep + 10 * seed` (of 50 per task).

Rendering follows the policy's training data: a checkpoint trained on demonstrations made in
real LIBERO (`vam-stack collect --robot libero-real`) carries the dataset's `libero_render`
settings (view size, mirror reflections) and episodes render exactly so; a checkpoint without
them (trained on the mock) gets LIBERO's defaults (224 px, reflections on).

`--policy expert` runs the privileged-state scripted expert (vam_sim/libero_real/expert.py, inside
the LIBERO process) on the benchmark's own initial states: its success per task is the ceiling
the demonstrations came from.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from vam_sim.libero_mock.config import checkpoint_training
from vam_sim.libero_mock.runner import SimConfig, SimRunner, episode_name

from .client import LiberoServerError, RealLiberoEnv

REAL_SUITES = ("spatial", "object", "goal", "long")  # long = LIBERO's libero_10
DEFAULT_RENDER = {"image_size": 224, "reflections": True}   # LIBERO's own (openpi's eval renders 224 px too)


def checkpoint_render(path) -> dict | None:
    """The `libero_render` settings a checkpoint's training data was rendered with (None: not a
    real-LIBERO-trained checkpoint)."""
    training = checkpoint_training(path)
    render = training.get("libero_render")
    return dict(render) if isinstance(render, dict) else None


class RealLiberoRunner(SimRunner):
    """`SimRunner` whose episodes run in real LIBERO (a child process in its own environment)."""

    def __init__(self, cfg: SimConfig, out: str | Path, policy: Any = None, python: str | None = None,
                 backend: str = "libero", progress=None, overwrite: bool = False):
        if cfg.suite not in REAL_SUITES:
            raise ValueError(f"real LIBERO has the suites {REAL_SUITES}; {cfg.suite!r} exists only in the mock")
        super().__init__(cfg, out, policy=policy, progress=progress, overwrite=overwrite)
        self.python, self.backend = python, backend
        self.render = dict(DEFAULT_RENDER)

    def __enter__(self):
        super().__enter__()
        if self.cfg.policy == "vam" and self.policy is not None and self.policy.checkpoint not in (None, "random"):
            trained = checkpoint_render(self.policy.checkpoint)
            if trained is not None:
                self.render = {"image_size": int(trained["image_size"]), "reflections": bool(trained["reflections"])}
        return self

    def run_episode(self, index: int) -> dict:
        c = self.cfg
        task, rep = (c.first_task + index) % 10, index // 10
        env = RealLiberoEnv(c.suite, task, rep + 10 * c.seed, python=self.python, backend=self.backend,
                            image_size=self.render["image_size"], reflections=self.render["reflections"])
        if c.max_steps is not None:
            env.max_steps = min(env.max_steps, c.max_steps)
        name = episode_name(c.suite, task, rep, c.seed)
        result = {"name": name, "suite": c.suite, "task": task, "task_name": env.task.name,
                  "instruction": env.instruction, "seed": c.seed, "episode": rep, "policy": c.policy,
                  "guidance": c.label if c.policy == "vam" else None, "success": False, "steps": 0,
                  "termination": None, "replans": [], "render": dict(self.render), "init_state": rep + 10 * c.seed,
                  "backend": "real_libero" if self.backend == "libero" else "mock_via_server"}
        with env:
            obs = env.reset()
            if c.policy == "vam":
                result.update(self._run_vam(env, obs, result, c.executor))
            else:
                result.update(self._run_real_expert(env, obs))
        return result

    def _run_real_expert(self, env: RealLiberoEnv, obs: dict) -> dict:
        dt = 1.0 / env.control_hz
        step, info, failure = 0, {"termination": None, "success": False}, None
        while not env.done:
            try:
                action, _ = env.expert_action()
            except LiberoServerError as e:       # the expert gave up (ExpertFailed on the server): say why
                failure = str(e).split("LIBERO server: ", 1)[-1]
                break
            self._record_step(step, obs, action, dt)
            obs, _, _, info = env.step(action)
            step += 1
        out = {"success": bool(info["success"]), "steps": step,
               "termination": info["termination"] if failure is None else "expert_failed"}
        if failure is not None:
            out["expert_failure"] = failure
        self.finish_recording(out | {"suite": env.task.suite, "task": env.task.index, "instruction": env.instruction,
                                     "seed": self.cfg.seed, "episode": env.episode}, step * dt)
        return out
