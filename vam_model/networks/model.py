"""The video-action model: tokenizer + video DiT feature extractor + flow-matching action head.

One replan reads top-down in `sample_actions` (App. A.2; the shape of openpi's pi0):
  encode the current frame (the clean anchor latent)            encode_frames
  roll the DiT out with FlowUniPC to the chosen grid index,
  block-k features of the first T latent frames, the head's
  prefix keys/values once                                       embed_prefix
  Euler steps of the action flow from the prefix cache          denoise_step (embed_suffix inside the head)
A backend (vam_model.backends) swaps only the calls: the DiT's velocity/features and the head's
prefix/step; without one the model's own modules run. Guidance (vam_model.policy) combines the
velocities of several branches, each a row of `embed_prefix` / `denoise_step`.
"""
from __future__ import annotations

from contextlib import nullcontext

import torch
import torch.nn as nn

from .action_head import ActionHead
from .action_sampler import euler_integrate
from .config import ModelConfig
from .dit import VideoDiT
from .head_io import HeadCache, HeadOutput, prefix_kv, step_outputs
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

    # ---- action head -------------------------------------------------------------------------
    def embed_prefix(self, anchor: torch.Tensor, text: torch.Tensor, state: torch.Tensor, noise: torch.Tensor,
                     feature_index: int | None = None, backend=None, timer=None) -> tuple[HeadCache, float]:
        """Video pass + head prefix for k branch rows -> (cache [layers, k, 1, Lp, hd], sigma_v).

        anchor [k,16,1,h,w], text [k,L,text_dim], state [k,P], noise [k,16,T_roll,h,w]. `timer(stage)`
        (a context manager factory, optional) times the "video" and "prefix" stages."""
        timer = timer or (lambda stage: nullcontext())
        with timer("video"):
            feats, sigma_v = self.video_features(anchor, text, noise, feature_index, backend)  # [k, T, N, D]
        with timer("prefix"):
            sig = torch.full((feats.shape[0],), sigma_v, device=feats.device)              # [k]
            if backend is None:
                cache = HeadCache(*prefix_kv(self.head, self.cfg.dit_grid, feats, sig, state))
            else:
                cache = backend.head_prefix(feats.float(), sig, state)
        return HeadCache(cache.keys.float(), cache.values.float()), sigma_v              # [layers, k, 1, Lp, hd]

    def denoise_step(self, cache: HeadCache, actions: torch.Tensor, sigma_a: torch.Tensor, backend=None) -> HeadOutput:
        """One cached velocity evaluation: actions [k,A,D_a], sigma_a [k] -> velocity [k,A,D_a] and TR masses.
        Per-token sigma_a [k, A] (committed actions clean at 0) runs the torch head whatever the
        backend: the exported head_step graphs take one time per row."""
        if backend is not None and sigma_a.dim() == 1:
            return backend.head_step(cache, actions, sigma_a)
        c = self.cfg
        return HeadOutput(*step_outputs(self.head, cache.keys, cache.values, actions, sigma_a, c.head.tr_layer,
                                        c.head_tokens_per_frame, c.head_video_tokens))

    @torch.no_grad()
    def sample_actions(self, frame: torch.Tensor, state: torch.Tensor, text: torch.Tensor, noise: dict | None = None,
                       steps: int = 10, backend=None, generator: torch.Generator | None = None) -> torch.Tensor:
        """One unguided replan: frame uint8 [1,1,H,W,3], state [1,P] normalised, text [1,L,text_dim]
        projected -> normalised actions [1, A_H, D]. `noise` ({"video": [1,16,T,h,w], "action":
        [1,A_H,D]}) makes it deterministic; missing draws come from `generator`."""
        noise = dict(noise or {})
        if "video" not in noise:
            noise["video"] = self.video_noise(1, self.cfg.solver.latent_frames, generator, frame.device)  # [1, 16, T, h, w]
        if "action" not in noise:
            a = (1, self.cfg.robot.chunk, self.cfg.robot.action_dim)
            noise["action"] = torch.randn(a, generator=generator).to(frame.device)          # [1, A_H, D]
        anchor = self.encode_frames(frame)                                                # [1, 16, 1, h, w]
        cache, _ = self.embed_prefix(anchor, text, state, noise["video"], backend=backend)  # [layers, 1, 1, Lp, hd]

        def velocity(x, sigma, step):
            return self.denoise_step(cache, x, sigma, backend).velocity                   # [1, A_H, D]

        return euler_integrate(velocity, noise["action"], steps)                          # [1, A_H, D]
