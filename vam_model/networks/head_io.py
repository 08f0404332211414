"""The action head's two calls as every backend runs them, and the cache they pass along.

    head_prefix(features [B,T,N,D], sigma_v [B], state [B,P]) -> HeadCache
        keys/values of every layer over the prefix (video tokens + state), stacked:
        [layers, B, 1, Lp, hd] each; computed once per branch and replan.
    head_step(cache, actions [B,A,D_a], sigma_a [B]) -> HeadOutput
        one cached Euler evaluation: the velocity [B,A,D_a], and from the TR layer the
        attention masses on V0 and V+ [B] and the head-averaged video attention [B,A,Tv].
        Per-token times sigma_a [B, A] (real-time chunking's trained variant: committed actions
        at sigma 0) run on the torch head only; TR then sums over the tokens with sigma > 0.

The torch backend calls `prefix_kv` / `step_outputs` directly; `vam-stack export onnx` traces
the same two functions into the `head_prefix` / `head_step` graphs, so every backend computes
TR from the same masses.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..temporal_ratio import attention_masses, ratio_from_masses, video_attention_map
from .action_head import HeadCache

__all__ = ["HeadCache", "HeadOutput", "prefix_kv", "step_outputs"]


@dataclass
class HeadOutput:
    velocity: torch.Tensor          # [B, A, action_dim]
    mass_v0: torch.Tensor           # [B] TR layer: head-averaged attention mass on the current frame's tokens
    mass_vplus: torch.Tensor        # [B] ... on the imagined future frames' tokens
    attention: torch.Tensor | None  # [B, A, Tv] head-averaged attention over video tokens (None if not computed)

    def tr(self) -> torch.Tensor:
        """TR per batch row [B], on the device (no host read)."""
        return ratio_from_masses(self.mass_v0, self.mass_vplus)

    def detached(self) -> "HeadOutput":
        """The same outputs cut from the autograd graph (what guidance and TR read)."""
        att = None if self.attention is None else self.attention.detach()
        return HeadOutput(self.velocity.detach(), self.mass_v0.detach(), self.mass_vplus.detach(), att)

    def row(self, i: int) -> "HeadOutput":
        att = None if self.attention is None else self.attention[i:i + 1]
        return HeadOutput(self.velocity[i:i + 1], self.mass_v0[i:i + 1], self.mass_vplus[i:i + 1], att)


def prefix_kv(head, grid: tuple[int, int], feats, sigma_v, state) -> tuple[torch.Tensor, torch.Tensor]:
    """(features, sigma_v, state) -> stacked prefix keys, values [layers, B, 1, Lp, hd]."""
    cache = head.prefix_cache(head.embed_prefix(feats, grid, sigma_v, state))  # prefix [B, Lp, W] -> cache
    return cache.keys, cache.values                                      # [layers, B, 1, Lp, hd] each


def step_outputs(head, keys, values, actions, sigma_a, tr_layer: int, tokens_per_frame: int, video_tokens: int):
    """One cached Euler evaluation -> (velocity [B,A,D], mass_v0 [B], mass_vplus [B], attention [B,A,Tv])."""
    v, probs = head.denoise_step(HeadCache(keys, values), actions, sigma_a, probs_layer=tr_layer)  # [B, A, D], [B, H, A, L]
    free = sigma_a > 0 if sigma_a.dim() == 2 else None                  # per-token times: clean tokens are not queries
    m0, mp = attention_masses(probs, tokens_per_frame, video_tokens, free)  # [B], [B]
    return v, m0, mp, video_attention_map(probs, video_tokens)          # ..., [B, A, Tv]
