"""Video tokenizer: RGB clip [B,3,17,H,W] in [-1,1] -> latent [B,16,5,H/8,W/8].

Causal 4x temporal compression (frame 0 alone, then groups of 4) and 8x spatial.
- `wan`: the Wan2.1 VAE encoder (the Cosmos-Predict2.5 tokenizer), as implemented by
  `diffusers.AutoencoderKLWan`; loads the official diffusers checkpoint layout.
- `causal_patch`: a small causal 3D patch encoder of our own with the same geometry, for the
  `tiny` CPU preset (the Wan encoder costs seconds per clip on a laptop CPU).
Only the encoder is needed at inference; latents are normalised by the VAE's statistics.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from .config import TokenizerConfig


class CausalPatchEncoder(nn.Module):
    """Causal space-time patch encoder: latent t depends on frames <= 4t only."""

    def __init__(self, cfg: TokenizerConfig):
        super().__init__()
        self.t = cfg.temporal_factor
        s = cfg.spatial_factor
        self.embed = nn.Conv3d(3, cfg.hidden_dim, kernel_size=(self.t, s, s), stride=(self.t, s, s))
        self.mix = nn.Conv3d(cfg.hidden_dim, cfg.hidden_dim, kernel_size=(1, 3, 3), padding=(0, 1, 1))
        self.out = nn.Conv3d(cfg.hidden_dim, cfg.latent_channels, kernel_size=1)

    def forward(self, video: torch.Tensor) -> torch.Tensor:
        # video: [B, 3, F, H, W] with F = 4n + 1
        first = video[:, :, :1].expand(-1, -1, self.t - 1, -1, -1)      # [B, 3, 3, H, W] causal front padding
        x = torch.cat([first, video], dim=2)                             # [B, 3, F+3, H, W]
        x = F.gelu(self.embed(x))                                        # [B, C, n+1, H/8, W/8]
        x = x + F.gelu(self.mix(x))                                      # [B, C, n+1, H/8, W/8]
        return self.out(x)                                               # [B, 16, n+1, H/8, W/8]


class VideoTokenizer(nn.Module):
    def __init__(self, cfg: TokenizerConfig):
        super().__init__()
        self.cfg = cfg
        if cfg.type == "wan":
            from diffusers import AutoencoderKLWan   # heavy (~2 s to import): only the Wan VAE presets

            self.vae = AutoencoderKLWan(base_dim=cfg.base_dim, z_dim=cfg.latent_channels)
            mean = torch.tensor(self.vae.config.latents_mean[: cfg.latent_channels])
            std = torch.tensor(self.vae.config.latents_std[: cfg.latent_channels])
            # The decoder is not used at inference; it is kept so official checkpoints load unchanged.
        else:
            self.encoder = CausalPatchEncoder(cfg)
            mean = torch.zeros(cfg.latent_channels)
            std = torch.ones(cfg.latent_channels)
        self.register_buffer("latent_mean", mean.view(1, -1, 1, 1, 1), persistent=False)
        self.register_buffer("latent_std", std.view(1, -1, 1, 1, 1), persistent=False)

    def encode(self, video: torch.Tensor) -> torch.Tensor:
        """video [B,3,F,H,W] in [-1,1] -> normalised latent [B,16,(F-1)/4+1,H/8,W/8]."""
        b, c, f, h, w = video.shape
        if c != 3 or (f - 1) % 4 != 0 or h % 8 or w % 8:
            raise ValueError(f"tokenizer input must be [B,3,4n+1,8a,8b], got {list(video.shape)}")
        if self.cfg.type == "wan":
            z = self.vae.encode(video).latent_dist.mode()                # [B, 16, T, H/8, W/8]
        else:
            z = self.encoder(video)                                      # [B, 16, T, H/8, W/8]
        return (z - self.latent_mean) / self.latent_std                  # [B, 16, T, H/8, W/8]

    def encoder_parameters(self):
        return self.vae.encoder.parameters() if self.cfg.type == "wan" else self.encoder.parameters()


def frames_to_video(frames: torch.Tensor) -> torch.Tensor:
    """uint8 frames [B,F,H,W,3] (RGB) -> float video [B,3,F,H,W] in [-1,1]."""
    return frames.permute(0, 4, 1, 2, 3).float().div(127.5).sub(1.0)   # [B, 3, F, H, W]
