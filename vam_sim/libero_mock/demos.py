"""Scripted demonstrations: one expert rollout as arrays (images, proprio, actions, phases).

Each step records the observation the action was chosen from, so `actions[t]` follows
`stacked[t]` and `proprio[t]`, as in LIBERO's HDF5 demonstrations.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .config import LiberoMockConfig
from .env import make_env
from .expert import expert_action, expert_phase


@dataclass
class Demo:
    """One expert episode (T steps)."""

    suite: str  # suite name
    task: int  # task index
    episode: int  # episode index (initial-state seed part)
    seed: int  # seed id (initial-state seed part)
    instruction: str  # language instruction
    success: bool  # whether the episode ended in success
    termination: str | None  # "success" or "timeout"
    proprio: np.ndarray  # [T, 8] float32
    actions: np.ndarray  # [T, 7] float32, in [-1, 1]
    phases: list[str] = field(default_factory=list)  # T labels: planning / manipulation
    stacked: np.ndarray | None = None  # [T, 224, 448, 3] uint8 (None when rendering is off)

    def __len__(self) -> int:
        return len(self.actions)


def rollout_expert(suite: str, task: int, episode: int, seed: int, render: bool = True,
                   noise: float = 0.0, cfg: LiberoMockConfig | None = None) -> Demo:
    """Run the scripted expert on one seeded episode; `noise` > 0 perturbs it reproducibly."""
    env = make_env(suite, task, episode, seed, render=render, cfg=cfg)
    obs = env.reset()
    rng = np.random.default_rng(env.state_seed ^ 0x5EED) if noise > 0 else None
    return record_expert(env, obs, noise=noise, rng=rng)


def record_expert(env, obs: dict, noise: float = 0.0, rng: np.random.Generator | None = None) -> Demo:
    """Let the expert finish `env`'s episode from its current state (`obs`), recording every step.

    Used from a fresh reset (a demonstration) and from a state a policy left behind (a
    recovery demonstration: the expert's feedback brings it back to the task).
    """
    frames, proprio, actions, phases = [], [], [], []
    while not env.done:
        phases.append(expert_phase(env))
        action = expert_action(env, noise=noise, rng=rng)
        proprio.append(obs["proprio"])
        if env.render_enabled:
            frames.append(obs["stacked"])
        actions.append(np.clip(action, -1.0, 1.0))
        obs, _, _, _ = env.step(action)
    if not actions:
        raise ValueError(f"record_expert: the episode of {env.task.suite} task {env.task.index} is already over "
                         f"({env.termination}); nothing to record")
    return Demo(env.task.suite, env.task.index, env.episode, env.seed, env.instruction,
                env.termination == "success", env.termination, np.stack(proprio), np.stack(actions), phases,
                np.stack(frames) if env.render_enabled else None)
