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
    frames, proprio, actions, phases = [], [], [], []
    while not env.done:
        phases.append(expert_phase(env))
        action = expert_action(env, noise=noise, rng=rng)
        proprio.append(obs["proprio"])
        if render:
            frames.append(obs["stacked"])
        actions.append(np.clip(action, -1.0, 1.0))
        obs, _, _, _ = env.step(action)
    return Demo(suite, task, episode, seed, env.instruction, env.termination == "success",
                env.termination, np.stack(proprio), np.stack(actions), phases,
                np.stack(frames) if render else None)
