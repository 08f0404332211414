"""The video-action model: tokenizer + video DiT feature extractor + flow-matching action head.

Inference per replan (App. A.2): encode the current frame (the clean anchor latent), roll the
DiT out from noise with FlowUniPC up to the chosen grid index, take block-k features of the
first T latent frames, build the head's prefix once, then integrate the action velocity.
"""
from __future__ import annotations

import torch
import torch.nn as nn

from .action_head import ActionHead
from .config import ModelConfig
from .dit import VideoDiT
from .video_solver import grid_sigma, rollout
from .tokenizer import VideoTokenizer, frames_to_video


class VideoActionModel(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.tokenizer = VideoTokenizer(cfg.tokenizer)
        self.dit = VideoDiT(cfg.dit, cfg.tokenizer)
        self.head = ActionHead(cfg.head, cfg.dit.width, cfg.robot.action_dim, cfg.robot.proprio_dim)

    # ---- video ----------------------------------------------------------------------------
    def encode_frames(self, frames: torch.Tensor) -> torch.Tensor:
        """uint8 RGB [B,F,H,W,3] (F = 4n+1) -> latent [B,16,n+1,H/8,W/8]."""
        return self.tokenizer.encode(frames_to_video(frames))            # [B, 16, T, h, w]

    def video_noise(self, batch: int, frames: int, generator: torch.Generator | None = None,
                    device=None) -> torch.Tensor:
        h, w = self.cfg.latent_hw
        c = self.cfg.tokenizer.latent_channels
        return torch.randn(batch, c, frames, h, w, generator=generator, device=device)  # [B, 16, T, h, w]

    def video_features(self, anchor: torch.Tensor, text: torch.Tensor, noise: torch.Tensor,
                       feature_index: int | None = None, backend=None) -> tuple[torch.Tensor, float]:
        """Block-k features of the first T latent frames at grid index `feature_index`.

        anchor [B,16,1,h,w] clean current-frame latent; text [B,L,text_dim] projected;
        noise [B,16,T_roll,h,w] (T_roll = T, or T' for the plan branch). Returns
        (features [B, T, gh*gw, D], sigma_v). `backend` (a vam_model.backends.DiTBackend)
        runs the DiT calls instead of `self.dit` (same velocity/features signature).
        """
        scfg = self.cfg.solver
        idx = scfg.feature_index if feature_index is None else feature_index
        if not 0 <= idx < scfg.steps:
            raise ValueError(f"feature_index must be in [0, {scfg.steps - 1}], got {idx}")
        t = noise.shape[2]
        is_anchor = torch.zeros(t, dtype=torch.bool, device=noise.device)
        is_anchor[0] = True
        dit = self.dit if backend is None else backend

        def velocity(x, mask, sigma):
            return dit.velocity(x, mask, self.dit.frame_sigmas(sigma, is_anchor), text)

        x, mask = rollout(anchor, noise, velocity, scfg, stop_index=idx)   # [B, 16, T_roll, h, w]
        sigma_v = grid_sigma(scfg, idx)
        sigma = torch.full((noise.shape[0],), sigma_v, dtype=noise.dtype, device=noise.device)
        feats = dit.features(x, mask, self.dit.frame_sigmas(sigma, is_anchor), text)  # [B, T_roll, N, D]
        return feats[:, : scfg.latent_frames], sigma_v                   # [B, T, N, D]
