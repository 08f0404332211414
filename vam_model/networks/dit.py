"""Video DiT (Cosmos-Predict2.5 shape) with anchor conditioning and block-k feature exit.

The weights live in `diffusers.CosmosTransformer3DModel` (so the official diffusers
checkpoint layout loads as is); the forward pass is ours, built from that model's own
sub-modules (patch embedding, 3D RoPE, time embedding, blocks, output layer) because we need
(a) to stop after block k, (b) per-frame timesteps with a near-zero anchor time, and (c) no
torchvision: the library forward resizes the padding mask with torchvision, which does not
import beside the CPU torch wheel used here.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from .config import DiTConfig, TokenizerConfig


class VideoDiT(nn.Module):
    def __init__(self, cfg: DiTConfig, tok: TokenizerConfig):
        super().__init__()
        from diffusers import CosmosTransformer3DModel   # heavy (~2 s to import): only when a DiT is built

        self.cfg = cfg
        self.latent_channels = tok.latent_channels
        self.activation_checkpointing = False   # set by the trainer (train.activation_checkpointing); not a weight
        self.model = CosmosTransformer3DModel(
            in_channels=tok.latent_channels + 1,            # + anchor mask channel (17 for the real model)
            out_channels=tok.latent_channels,
            num_attention_heads=cfg.heads,
            attention_head_dim=cfg.head_dim,
            num_layers=cfg.layers,
            mlp_ratio=cfg.mlp_ratio,
            text_embed_dim=cfg.text_dim,
            adaln_lora_dim=cfg.adaln_lora_dim,
            patch_size=tuple(cfg.patch),
            rope_scale=tuple(cfg.rope_scale),
            concat_padding_mask=cfg.concat_padding_mask,
            extra_pos_embed_type="learnable" if cfg.extra_pos_embed else None,
            use_crossattn_projection=True,                  # the shared text projection text_in_dim -> text_dim
            crossattn_proj_in_channels=cfg.text_in_dim,
            encoder_hidden_states_channels=cfg.text_dim,
        )

    # ---- text -----------------------------------------------------------------------------
    def project_text(self, text: torch.Tensor) -> torch.Tensor:
        """Raw prompt embedding [B,L,text_in_dim] -> [B,L,text_dim]; computed once per instruction."""
        return self.model.crossattn_proj(text)                          # [B, L, text_dim]

    # ---- forward --------------------------------------------------------------------------
    def _embed(self, x: torch.Tensor, mask: torch.Tensor, sigma_frames: torch.Tensor):
        """Latent + anchor mask -> tokens and per-token conditioning.

        x: [B,16,T,H,W], mask: [B,1,T,H,W], sigma_frames: [B,T] (sigma_v per latent frame).
        """
        m, cfg = self.model, self.cfg
        b, _, t, h, w = x.shape
        ph, pw = cfg.patch[1], cfg.patch[2]
        pad_h, pad_w = (-h) % ph, (-w) % pw
        x = torch.cat([x, mask], dim=1)                                  # [B, 17, T, H, W]
        x = F.pad(x, (0, pad_w, 0, pad_h))                               # [B, 17, T, Hp, Wp]
        if cfg.concat_padding_mask:
            pad_mask = torch.zeros_like(x[:, :1])                        # [B, 1, T, Hp, Wp]
            pad_mask[..., h:, :] = 1.0
            pad_mask[..., :, w:] = 1.0
            x = torch.cat([x, pad_mask], dim=1)                          # [B, 18, T, Hp, Wp]
        rope = m.rope(x)                                                 # (cos, sin) [T*gh*gw, head_dim]
        extra = m.learnable_pos_embed(x) if m.learnable_pos_embed is not None else None
        gh, gw = x.shape[-2] // ph, x.shape[-1] // pw
        tokens = m.patch_embed(x).flatten(1, 3)                          # [B, T*gh*gw, D]
        timesteps = (sigma_frames * cfg.timestep_scale).flatten()        # [B*T]
        temb, emb_t = m.time_embed(tokens, timesteps)                    # [B*T, 3D], [B*T, D]
        temb, emb_t = (
            e.view(b, t, 1, -1).expand(-1, -1, gh * gw, -1).flatten(1, 2)  # [B, T*gh*gw, *]
            for e in (temb, emb_t)
        )
        return tokens, temb, emb_t, rope, extra, (t, gh, gw, h, w)

    def _blocks(self, tokens, text, emb_t, temb, rope, extra, n_blocks: int):
        for block in self.model.transformer_blocks[:n_blocks]:
            tokens = self._block(block, tokens, text, emb_t, temb, rope, extra)  # [B, N, D]
        return tokens

    def _block(self, block, tokens, text, emb_t, temb, rope, extra):
        """One transformer block; with `activation_checkpointing` set and gradients on, its activations are
        recomputed in the backward pass instead of kept (memory of one block instead of all of them)."""
        if self.activation_checkpointing and torch.is_grad_enabled():
            return checkpoint(block, tokens, text, emb_t, temb, rope, extra, use_reentrant=False)  # [B, N, D]
        return block(tokens, text, emb_t, temb, rope, extra)                                     # [B, N, D]

    def frame_sigmas(self, sigma: torch.Tensor, mask_frames: torch.Tensor) -> torch.Tensor:
        """Per-frame time: sigma_v, with the near-zero anchor sigma at anchor frames if enabled.

        sigma: [B], mask_frames: [T] bool (True at anchor frames) -> [B, T].
        """
        s = sigma[:, None].expand(-1, mask_frames.numel()).clone()      # [B, T]
        if self.cfg.anchor_time_sigma is not None:
            s[:, mask_frames] = self.cfg.anchor_time_sigma
        return s

    def velocity(self, x, mask, sigma_frames, text) -> torch.Tensor:
        """Full forward: predicted flow velocity [B,16,T,H,W] (text already projected)."""
        return self.velocity_and_features(x, mask, sigma_frames, text, block=None)[0]

    def velocity_and_features(self, x, mask, sigma_frames, text, block: int | None):
        """One full forward returning (velocity [B,16,T,H,W], block-k output [B,T,gh*gw,D] or None).

        Training uses this: the video loss needs the velocity, the action loss the block-k
        features of the same noisy input, so one pass serves both.
        """
        tokens, temb, emb_t, rope, extra, (t, gh, gw, h, w) = self._embed(x, mask, sigma_frames)
        feats = None
        for i, blk in enumerate(self.model.transformer_blocks):
            tokens = self._block(blk, tokens, text, emb_t, temb, rope, extra)  # [B, N, D]
            if block is not None and i + 1 == block:
                feats = tokens.view(tokens.shape[0], t, gh * gw, -1)     # [B, T, gh*gw, D]
        m, (pt, ph, pw) = self.model, self.cfg.patch
        out = m.norm_out(tokens, emb_t, temb)                            # [B, N, D]
        out = m.proj_out(out)                                            # [B, N, ph*pw*C]
        b = out.shape[0]
        out = out.view(b, t, gh, gw, ph, pw, pt, -1)                     # diffusers' (h, w, t, c) patch order
        out = out.permute(0, 7, 1, 6, 2, 4, 3, 5).reshape(b, -1, t * pt, gh * ph, gw * pw)  # [B, C, T, Hp, Wp]
        return out[..., :h, :w], feats                                   # [B, C, T, H, W]

    def features(self, x, mask, sigma_frames, text, block: int | None = None) -> torch.Tensor:
        """Output of block k (1-indexed) without running the later blocks: [B, T, gh*gw, D]."""
        k = self.cfg.feature_block if block is None else block
        if not 1 <= k <= len(self.model.transformer_blocks):
            raise ValueError(f"feature block must be in [1, {len(self.model.transformer_blocks)}], got {k}")
        tokens, temb, emb_t, rope, extra, (t, gh, gw, _, _) = self._embed(x, mask, sigma_frames)
        tokens = self._blocks(tokens, text, emb_t, temb, rope, extra, k)  # [B, T*gh*gw, D]
        return tokens.view(tokens.shape[0], t, gh * gw, -1)              # [B, T, gh*gw, D]
