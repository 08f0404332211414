"""Temporal Ratio (TR): how much the action head attends to the imagined future vs. the present.

    TR = (attention mass of action-token queries on future-frame video tokens V+)
       / (attention mass of action-token queries on current-frame video tokens V0)

read from one action-head layer (the preset's `head.tr_layer`, 15 of 18 on the real model).

Reduction (our definition; the paper leaves it open): for every head, sum the attention
probabilities over all action queries and over the keys of each set (V0 = the first
`tokens_per_frame` video tokens, V+ = the remaining video tokens of frames 1..T-1); average
each mass over heads; TR is the ratio of the two head-averaged masses. Averaging masses
before dividing keeps one head with almost no mass on V0 from dominating the ratio.
Zero-mass guard: both masses get `eps` added, so TR stays finite (and equals 1 when the
action queries put no mass on video at all). State and action keys count in neither set.

With uniform attention over video, TR equals the token-count ratio (T-1), e.g. 4 at T=5.
"""
from __future__ import annotations

import torch

EPS = 1e-6


def attention_masses(probs: torch.Tensor, tokens_per_frame: int, video_tokens: int,
                     queries: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """probs [B,H,A,L] (action-query rows) -> (mass on V0 [B], mass on V+ [B]), head-averaged,
    summed over the action queries, or over those where `queries` [B, A] (bool) is true (the
    trained real-time chunking variant leaves its committed, clean action tokens out)."""
    if probs.ndim != 4:
        raise ValueError(f"attention probabilities must be [B, heads, queries, keys], got {list(probs.shape)}")
    if not 0 < tokens_per_frame < video_tokens <= probs.shape[-1]:
        raise ValueError(
            f"need 0 < tokens_per_frame ({tokens_per_frame}) < video_tokens ({video_tokens}) <= keys ({probs.shape[-1]})"
        )
    p = probs.float()
    if queries is not None:
        p = p * queries[:, None, :, None].to(p.dtype)                    # [B, H, A, L], left-out queries zero
    m0 = p[..., :tokens_per_frame].sum(dim=(-1, -2))                     # [B, H]
    mp = p[..., tokens_per_frame:video_tokens].sum(dim=(-1, -2))         # [B, H]
    return m0.mean(dim=-1), mp.mean(dim=-1)                              # [B], [B]


def ratio_from_masses(mass_v0: torch.Tensor, mass_vplus: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    """TR [B] from the head-averaged masses on V0 and V+ (what the exported head graph returns)."""
    return (mass_vplus + eps) / (mass_v0 + eps)                          # [B]


def video_attention_map(probs: torch.Tensor, video_tokens: int) -> torch.Tensor:
    """Action-token attention over video tokens, averaged over heads: [B,H,A,L] -> [B,A,Tv]."""
    return probs[..., :video_tokens].float().mean(dim=1)                 # [B, A, Tv]
