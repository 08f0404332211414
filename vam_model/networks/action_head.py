"""Flow-matching action head: the pi0 "Gemma expert" shape (App. A.1).

Tokens: [video prefix | state | A_H noisy actions]. Video tokens come from DiT block-k
features, grouped in (h, w) neighbourhoods (2x2: 4 x 2048 = 8192 -> 1024) and tagged with
sigma_v by a video-only AdaLN (shift + scale from a Fourier-feature MLP). The state token is
the proprio vector padded to 32; action tokens are the noisy chunk padded to 32.

Layers: multi-query attention (8 query heads, 1 key/value head, head dim 256, 1D RoPE over
the sequence), GeGLU MLP, adaptive RMSNorm on the action tokens (dense 1024 -> 3072 giving
shift/scale/gate from sigma_a; the gate scales each sublayer's residual). Prefix tokens use a
plain RMSNorm unless `prefix_time_conditioned` is set.

Prefix-LM mask with three blocks (video, state, actions): a token attends to its own block
and earlier blocks — bidirectional inside the video prefix, causal at the state and the
first action, bidirectional among the actions. Nothing in the prefix depends on sigma_a
(unless `prefix_time_conditioned`), so its keys/values are computed once per replan
(`prefix_cache`, stacked over layers) and every Euler step runs the action tokens only
(`denoise_step`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from .config import HeadConfig


def fourier_features(sigma: torch.Tensor, dim: int, max_freq: float = 1000.0) -> torch.Tensor:
    """sigma [B] (or per token [B, A]) in [0,1] -> [B, dim] ([B, A, dim]) sin/cos features at
    log-spaced frequencies."""
    freqs = torch.exp(torch.linspace(0.0, math.log(max_freq), dim // 2, device=sigma.device))  # [dim/2]
    angles = sigma.float()[..., None] * freqs * (2 * math.pi)           # [B, (A,) dim/2]
    return torch.cat([angles.sin(), angles.cos()], dim=-1)              # [B, (A,) dim]


def rope_tables(positions: torch.Tensor, head_dim: int, theta: float):
    """1D rotary tables for integer positions [L] -> cos, sin [L, head_dim/2]."""
    inv = 1.0 / theta ** (torch.arange(0, head_dim, 2, device=positions.device).float() / head_dim)
    ang = positions.float()[:, None] * inv[None]                         # [L, hd/2]
    return ang.cos(), ang.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x [B,H,L,hd] rotated pairwise (first half, second half)."""
    x1, x2 = x.chunk(2, dim=-1)                                          # [B, H, L, hd/2] each
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)  # [B, H, L, hd]


class RMSNorm(nn.Module):
    """Gemma RMSNorm (weight applied as 1 + w), optionally adaptive: shift/scale/gate from cond."""

    def __init__(self, width: int, cond_dim: int | None = None, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.zeros(width))
        self.dense = nn.Linear(cond_dim, 3 * width) if cond_dim else None
        if self.dense is not None:
            nn.init.zeros_(self.dense.weight)
            nn.init.zeros_(self.dense.bias)

    def forward(self, x: torch.Tensor, cond: torch.Tensor | None = None):
        normed = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)  # [B, L, W]
        normed = normed * (1.0 + self.weight)                            # [B, L, W]
        if cond is None or self.dense is None:
            return normed, None
        mod = self.dense(cond)                                           # [B, 3W], or per token [B, L, 3W]
        shift, scale, gate = (mod[:, None] if mod.dim() == 2 else mod).chunk(3, dim=-1)  # [B, 1 or L, W] each
        return normed * (1.0 + scale) + shift, 1.0 + gate                # gate starts at 1 (zero-init)


@dataclass
class HeadCache:
    """The prefix's keys and values of every layer, stacked once per replan; a layer reads its
    slice (a view) at every Euler step, so nothing is restacked per step."""
    keys: torch.Tensor    # [layers, B, 1, Lp, hd] rotated prefix keys of every layer
    values: torch.Tensor  # [layers, B, 1, Lp, hd]

    @property
    def batch(self) -> int:
        return self.keys.shape[1]

    def rows(self, start: int, n: int = 1) -> "HeadCache":
        """Batch rows start..start+n-1 (views, no copy)."""
        return HeadCache(self.keys.narrow(1, start, n), self.values.narrow(1, start, n))

    def repeat_rows(self, n: int) -> "HeadCache":
        """Each batch row repeated n times in place (row i -> rows i*n..i*n+n-1)."""
        return HeadCache(self.keys.repeat_interleave(n, 1), self.values.repeat_interleave(n, 1))

    @staticmethod
    def cat(caches: list["HeadCache"]) -> "HeadCache":
        """Caches stacked along the batch (one copy), for one batched Euler call."""
        if len(caches) == 1:
            return caches[0]
        return HeadCache(torch.cat([c.keys for c in caches], dim=1), torch.cat([c.values for c in caches], dim=1))


class HeadLayer(nn.Module):
    def __init__(self, cfg: HeadConfig):
        super().__init__()
        self.cfg = cfg
        w, hd = cfg.width, cfg.head_dim
        self.attn_norm = RMSNorm(w, cond_dim=w)
        self.q = nn.Linear(w, cfg.heads * hd, bias=False)
        self.k = nn.Linear(w, cfg.kv_heads * hd, bias=False)
        self.v = nn.Linear(w, cfg.kv_heads * hd, bias=False)
        self.o = nn.Linear(cfg.heads * hd, w, bias=False)
        self.mlp_norm = RMSNorm(w, cond_dim=w)
        self.gate_up = nn.Linear(w, 2 * cfg.mlp_dim, bias=False)
        self.down = nn.Linear(cfg.mlp_dim, w, bias=False)

    def _heads(self, x, proj, n):
        b, l, _ = x.shape
        return proj(x).view(b, l, n, self.cfg.head_dim).transpose(1, 2)  # [B, n, L, hd]

    def qkv(self, x, cond, rope):
        h, _ = self.attn_norm(x, cond)                                   # [B, L, W]
        q = apply_rope(self._heads(h, self.q, self.cfg.heads), *rope)   # [B, H, L, hd]
        k = apply_rope(self._heads(h, self.k, self.cfg.kv_heads), *rope)  # [B, 1, L, hd]
        v = self._heads(h, self.v, self.cfg.kv_heads)                   # [B, 1, L, hd]
        return q, k, v

    def attend(self, q, k, v, mask, want_probs: bool):
        """q [B,H,Lq,hd], k/v [B,1,Lk,hd], mask [Lq,Lk] bool (True = may attend)."""
        rep = self.cfg.heads // self.cfg.kv_heads
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)  # [B, H, Lk, hd]
        if not want_probs:
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask), None  # [B, H, Lq, hd]
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.cfg.head_dim)  # [B, H, Lq, Lk]
        scores = scores.masked_fill(~mask, float("-inf"))
        probs = scores.softmax(dim=-1)                                   # [B, H, Lq, Lk]
        return probs @ v, probs                                          # [B, H, Lq, hd]

    def finish(self, x, attn_out, cond):
        """Residual updates after attention: gated attention output, then the gated GeGLU MLP."""
        b, _, l, _ = attn_out.shape
        _, gate = self.attn_norm(x, cond)
        out = self.o(attn_out.transpose(1, 2).reshape(b, l, -1))         # [B, L, W]
        x = x + (out if gate is None else gate * out)                    # [B, L, W]
        h, gate = self.mlp_norm(x, cond)                                 # [B, L, W]
        g, u = self.gate_up(h).chunk(2, dim=-1)                          # [B, L, mlp] each
        out = self.down(F.gelu(g, approximate="tanh") * u)               # [B, L, W]
        return x + (out if gate is None else gate * out)                 # [B, L, W]


class ActionHead(nn.Module):
    def __init__(self, cfg: HeadConfig, dit_width: int, action_dim: int, proprio_dim: int):
        super().__init__()
        self.cfg = cfg
        self.action_dim, self.proprio_dim = action_dim, proprio_dim
        w = cfg.width
        gh, gw = cfg.video_group
        self.video_proj = nn.Linear(gh * gw * dit_width, w)              # 8192 -> 1024
        self.video_norm = nn.LayerNorm(w, elementwise_affine=False, eps=1e-6)
        self.video_time = nn.Sequential(nn.Linear(cfg.fourier_dim, w), nn.SiLU(), nn.Linear(w, 2 * w))
        nn.init.zeros_(self.video_time[2].weight)
        nn.init.zeros_(self.video_time[2].bias)
        self.state_proj = nn.Linear(cfg.internal_dim, w)
        self.action_in = nn.Linear(cfg.internal_dim, w)
        self.action_time = nn.Sequential(nn.Linear(cfg.fourier_dim, w), nn.SiLU(), nn.Linear(w, w), nn.SiLU())
        self.layers = nn.ModuleList(HeadLayer(cfg) for _ in range(cfg.layers))
        self.final_norm = RMSNorm(w, cond_dim=w)
        self.action_out = nn.Linear(w, cfg.internal_dim)

    # ---- token embedding ------------------------------------------------------------------
    def group_video(self, feats: torch.Tensor, grid: tuple[int, int]) -> torch.Tensor:
        """DiT features [B,T,gh*gw,D] -> grouped [B, T*(gh/2)*(gw/2), 4D] (zero-padded grid)."""
        b, t, n, d = feats.shape
        gh, gw = grid
        ah, aw = self.cfg.video_group
        x = feats.view(b, t, gh, gw, d)                                  # [B, T, gh, gw, D]
        x = F.pad(x, (0, 0, 0, (-gw) % aw, 0, (-gh) % ah))               # [B, T, GH, GW, D]
        gh2, gw2 = x.shape[2] // ah, x.shape[3] // aw
        x = x.view(b, t, gh2, ah, gw2, aw, d).permute(0, 1, 2, 4, 3, 5, 6)  # [B, T, gh2, gw2, ah, aw, D]
        return x.reshape(b, t * gh2 * gw2, ah * aw * d)                  # [B, Tv, 4D]

    def embed_prefix(self, feats, grid, sigma_v, state) -> torch.Tensor:
        """Video features + sigma_v + proprio -> prefix tokens [B, Tv + 1, W]."""
        video = self.video_proj(self.group_video(feats, grid))           # [B, Tv, W]
        shift, scale = self.video_time(fourier_features(sigma_v, self.cfg.fourier_dim))[:, None].chunk(2, -1)
        video = self.video_norm(video) * (1 + scale) + shift             # [B, Tv, W]
        state = F.pad(state, (0, self.cfg.internal_dim - state.shape[-1]))  # [B, 32]
        state_tok = self.state_proj(state)[:, None]                      # [B, 1, W]
        return torch.cat([video, state_tok], dim=1)                      # [B, Tv+1, W]

    def embed_suffix(self, actions, sigma_a):
        """Noisy actions [B,A,action_dim] + sigma_a [B] -> tokens [B,A,W], time condition [B,W].
        sigma_a may be per token, [B, A]: then the condition is [B, A, W] and each action token's
        adaptive norms read its own time (real-time chunking's trained variant gives the committed
        actions sigma 0, clean)."""
        a = F.pad(actions, (0, self.cfg.internal_dim - actions.shape[-1]))  # [B, A, 32]
        cond = self.action_time(fourier_features(sigma_a, self.cfg.fourier_dim))  # [B, W] or [B, A, W]
        return self.action_in(a), cond                                  # [B, A, W], [B, (A,) W]

    # ---- masks and positions --------------------------------------------------------------
    @staticmethod
    def block_ids(n_video: int, n_actions: int, device=None) -> torch.Tensor:
        """0 = video, 1 = state, 2 = actions: token i may attend to j iff block[j] <= block[i]."""
        return torch.cat([
            torch.zeros(n_video, dtype=torch.long, device=device),
            torch.ones(1, dtype=torch.long, device=device),
            torch.full((n_actions,), 2, dtype=torch.long, device=device),
        ])

    @classmethod
    def attention_mask(cls, n_video: int, n_actions: int, device=None) -> torch.Tensor:
        ids = cls.block_ids(n_video, n_actions, device)
        return ids[None, :] <= ids[:, None]                             # [L, L] bool

    # ---- prefix cache path ----------------------------------------------------------------
    def prefix_cache(self, prefix: torch.Tensor) -> HeadCache:
        """Run the prefix [B, Lp, W] through every layer once; keep each layer's keys/values."""
        if self.cfg.prefix_time_conditioned:
            raise RuntimeError("prefix_time_conditioned=true: the prefix depends on sigma_a and cannot be cached")
        lp = prefix.shape[1]
        mask = self.attention_mask(lp - 1, 0, prefix.device)             # [Lp, Lp]
        rope = rope_tables(torch.arange(lp, device=prefix.device), self.cfg.head_dim, self.cfg.rope_theta)
        keys, values, x = [], [], prefix
        for i, layer in enumerate(self.layers):
            q, k, v = layer.qkv(x, None, rope)                           # [B, H, Lp, hd], [B, 1, Lp, hd] x2
            keys.append(k)
            values.append(v)
            if i + 1 < len(self.layers):                                 # the last layer's prefix output is unused
                out, _ = layer.attend(q, k, v, mask, False)
                x = layer.finish(x, out, None)                           # [B, Lp, W]
        return HeadCache(torch.stack(keys), torch.stack(values))         # [layers, B, 1, Lp, hd] each

    def denoise_step(self, cache: HeadCache, actions, sigma_a, probs_layer: int | None = None):
        """One velocity evaluation from a prefix cache.

        Returns (velocity [B,A,action_dim], probs [B,H,A,Lp+A] of `probs_layer` (1-indexed) or None).
        """
        x, cond = self.embed_suffix(actions, sigma_a)                    # [B, A, W], [B, W]
        lp, a = cache.keys.shape[3], x.shape[1]
        rope = rope_tables(torch.arange(lp, lp + a, device=x.device), self.cfg.head_dim, self.cfg.rope_theta)
        mask = torch.ones(a, lp + a, dtype=torch.bool, device=x.device)  # actions see everything
        probs = None
        for i, layer in enumerate(self.layers):
            q, k, v = layer.qkv(x, cond, rope)                           # [B, H, A, hd], [B, 1, A, hd]
            k = torch.cat([cache.keys[i], k], dim=2)                     # [B, 1, Lp+A, hd]
            v = torch.cat([cache.values[i], v], dim=2)                   # [B, 1, Lp+A, hd]
            out, p = layer.attend(q, k, v, mask, want_probs=(probs_layer == i + 1))
            probs = p if p is not None else probs
            x = layer.finish(x, out, cond)                               # [B, A, W]
        return self._velocity(x, cond), probs

    # ---- uncached path (reference, and the only path when the prefix is time-conditioned) --
    def denoise_step_uncached(self, prefix, actions, sigma_a, probs_layer: int | None = None):
        """Full-sequence evaluation; same outputs as `denoise_step` on a cacheable prefix."""
        s, cond = self.embed_suffix(actions, sigma_a)                    # [B, A, W], [B, W]
        lp, a = prefix.shape[1], s.shape[1]
        mask = self.attention_mask(lp - 1, a, s.device)                  # [L, L]
        rope = rope_tables(torch.arange(lp + a, device=s.device), self.cfg.head_dim, self.cfg.rope_theta)
        if self.cfg.prefix_time_conditioned and cond.dim() == 3:
            raise ValueError("prefix_time_conditioned=true takes one sigma_a per row [B], got per-token "
                             f"{list(sigma_a.shape)}: the prefix cannot read many action times")
        pcond = cond if self.cfg.prefix_time_conditioned else None
        x_p, x_s, probs = prefix, s, None
        for i, layer in enumerate(self.layers):
            q_p, k_p, v_p = layer.qkv(x_p, pcond, tuple(r[:lp] for r in rope))
            q_s, k_s, v_s = layer.qkv(x_s, cond, tuple(r[lp:] for r in rope))
            q, k, v = (torch.cat(t, dim=2) for t in ((q_p, q_s), (k_p, k_s), (v_p, v_s)))  # [B, *, L, hd]
            out, p = layer.attend(q, k, v, mask, want_probs=(probs_layer == i + 1))
            probs = p[:, :, lp:] if p is not None else probs             # action-query rows [B, H, A, L]
            x_p = layer.finish(x_p, out[:, :, :lp], pcond)               # [B, Lp, W]
            x_s = layer.finish(x_s, out[:, :, lp:], cond)                # [B, A, W]
        return self._velocity(x_s, cond), probs

    def _velocity(self, x, cond):
        h, _ = self.final_norm(x, cond)                                  # [B, A, W]
        return self.action_out(h)[..., : self.action_dim]                # [B, A, action_dim]
