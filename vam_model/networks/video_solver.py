"""FlowUniPC video rollout with anchor conditioning, and the feature exit at one grid index.

The solver is diffusers' `UniPCMultistepScheduler` in flow mode (`use_flow_sigmas`,
`prediction_type="flow_prediction"`), given our 6-point grid. The grid follows the
diffusers/Cosmos flow schedules: the unshifted floor is the *shifted* 1/num_train_timesteps,
then the shift is applied to a linear ramp from 1 to that floor, which reproduces the paper's
values {1.000, 0.953, 0.883, 0.562, 0.024} at indices {0, 1, 2, 4, 5}.

Anchor conditioning (App. A.2), around every solver call:
  (i)  a mask channel M (1 at latent frame 0) is concatenated to the DiT input;
  (ii) before the call, x <- M*x0_anchor + (1-M)*x (the DiT never sees a noised frame 0);
  (iii) after the call, v <- M*(eps - x0_anchor) + (1-M)*v (analytic clean velocity);
  and after each update the anchor frame is reset to the clean latent, so it stays bit-exact.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import torch

from .config import SolverConfig


def shift_sigma(s, shift: float):
    return shift * s / (1.0 + (shift - 1.0) * s)


def base_sigmas(cfg: SolverConfig) -> np.ndarray:
    """Unshifted ramp from 1 to the (shifted) schedule floor, `steps` points."""
    floor = shift_sigma(1.0 / cfg.num_train_timesteps, cfg.shift)
    return np.linspace(1.0, floor, cfg.steps)


def sigma_grid(cfg: SolverConfig) -> list[float]:
    """The `steps`-point sigma_v grid the solver visits (the last update goes to 0)."""
    return [float(v) for v in shift_sigma(base_sigmas(cfg), cfg.shift)]


def make_scheduler(cfg: SolverConfig):
    from diffusers import UniPCMultistepScheduler   # heavy (~2 s to import): only a solver that is built

    sched = UniPCMultistepScheduler(
        num_train_timesteps=cfg.num_train_timesteps,
        solver_order=cfg.order,
        prediction_type="flow_prediction",
        use_flow_sigmas=True,
        flow_shift=cfg.shift,
        final_sigmas_type="zero",
    )
    sched.set_timesteps(sigmas=base_sigmas(cfg).copy())
    return sched


def anchor_mask(latent_frames: int, batch: int, h: int, w: int, device=None) -> torch.Tensor:
    """Binary mask [B,1,T,H,W]: 1 at latent frame 0 (the clean current observation)."""
    m = torch.zeros(batch, 1, latent_frames, h, w, device=device)
    m[:, :, 0] = 1.0
    return m


VelocityFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def rollout(
    x0_anchor: torch.Tensor,
    noise: torch.Tensor,
    velocity_fn: VelocityFn,
    cfg: SolverConfig,
    stop_index: int | None = None,
    on_step: Callable[[int, torch.Tensor], None] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Run the solver from sigma=1 for `stop_index` steps (default: all `steps`).

    x0_anchor: clean latent of the current frame [B,C,1,H,W]; noise: eps [B,C,T,H,W].
    velocity_fn(x, mask, sigma[B]) -> v [B,C,T,H,W]. Returns (x at the stop point with the
    anchor clean, mask). `on_step(i, x)` sees the state after each update (for tests/plots).
    """
    b, c, t, h, w = noise.shape
    n = cfg.steps if stop_index is None else stop_index
    mask = anchor_mask(t, b, h, w, noise.device).to(noise.dtype)       # [B, 1, T, H, W]
    anchor = x0_anchor.expand(-1, -1, t, -1, -1)                        # [B, C, T, H, W] (frame 0 used)
    sched = make_scheduler(cfg)
    sigmas = sched.sigmas.to(noise.device, noise.dtype)                 # [steps + 1] uploaded once
    x = mask * anchor + (1 - mask) * noise                              # [B, C, T, H, W] sigma = 1
    for i in range(n):
        sigma = sigmas[i].expand(b)                                     # [B] on the device
        x = mask * anchor + (1 - mask) * x                              # (ii) clean anchor in
        v = velocity_fn(x, mask, sigma)                                 # [B, C, T, H, W]
        v = mask * (noise - anchor) + (1 - mask) * v                    # (iii) analytic anchor velocity
        x = sched.step(v, sched.timesteps[i], x).prev_sample            # [B, C, T, H, W]
        x = mask * anchor + (1 - mask) * x                              # anchor stays exact
        if on_step is not None:
            on_step(i, x)
    return x, mask


def grid_sigma(cfg: SolverConfig, index: int) -> float:
    return sigma_grid(cfg)[index]
