"""Stateless flow-matching sampler: fixed-step Euler from sigma = 1 (noise) to 0.

The velocity convention is v = eps - a0 (d a / d sigma), so one step from sigma to
sigma - 1/N is a <- a - v / N. A fixed Python loop over `num_steps` (no float-compared while
loop) traces cleanly to ONNX/TensorRT.
"""
from __future__ import annotations

from typing import Callable

import torch

DenoiseFn = Callable[[torch.Tensor, torch.Tensor, int], torch.Tensor]


def sigma_schedule(num_steps: int) -> torch.Tensor:
    """num_steps + 1 sigmas from 1 to 0."""
    if num_steps < 1:
        raise ValueError(f"num_steps must be >= 1, got {num_steps}")
    return torch.linspace(1.0, 0.0, num_steps + 1)


def euler_integrate(denoise_fn: DenoiseFn, noise: torch.Tensor, num_steps: int) -> torch.Tensor:
    """Integrate `denoise_fn(x, sigma[B], step) -> v` from `noise` (sigma=1) to sigma=0."""
    sigmas = sigma_schedule(num_steps).to(noise.device, noise.dtype)
    x = noise
    for i in range(num_steps):
        sigma = sigmas[i].expand(noise.shape[0])                        # [B]
        v = denoise_fn(x, sigma, i)                                      # [B, A, D]
        x = x + (sigmas[i + 1] - sigmas[i]) * v                          # [B, A, D]
    return x
