"""Training losses of the video-action model (method spec, "training" and App. A.2).

Video (rectified flow, on the DiT): sigma_v ~ U[0,1] per sample, x_sigma = (1 - sigma) x0 +
sigma eps on latent frames 1..T-1; latent frame 0 (the current observation) is held clean
(the anchor), marked by the anchor mask channel and given the near-zero anchor time through
`dit.frame_sigmas`; the target velocity is eps - x0, averaged over the non-anchor frames.

Action (flow matching, on the head): sigma_a ~ Beta(1.5, 1) * 0.999 + 0.001, a_sigma =
(1 - sigma_a) a0 + sigma_a eps_a, target eps_a - a0. The head reads block-k features of the
SAME DiT forward (at that sample's sigma_v); its prefix (video tokens tagged with sigma_v,
and the state token) is built once and shared by `action_samples` independent action-noise
draws, which costs little (17 action tokens against a ~490-token prefix).

Joint: L = L_action + lambda L_video with lambda = 1. Stage 1 of two-stage: L_video alone.
Stage 2: the DiT is frozen; `frozen_features` computes block-k features without gradients
(stopping after block k) and `action_loss` trains the head on them.

Randomness comes from an explicit CPU `torch.Generator`, so a step's noise is a function of the
seed and the step index (exact resume) and the same on every device (draws are moved to the
batch's device). Beta(1.5, 1) has CDF x^1.5, so it is sampled by
inversion: u^(1/1.5).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from vam_stack.config import check

from vam_model.networks.model import VideoActionModel
from vam_model.networks.video_solver import anchor_mask, sigma_grid
from vam_model.networks.tokenizer import frames_to_video


@dataclass(frozen=True)
class LossConfig:
    video_weight: float = 1.0          # lambda, weight of the video loss in joint training (paper: 1.0)
    action_samples: int = 4            # action-noise draws per video forward (they share one prefix)
    sigma_v_grid_prob: float = 0.0     # fraction of samples whose sigma_v is a solver grid point instead of U[0,1]
    sigma_v_feature_prob: float = 0.0  # fraction of samples at exactly the inference feature level (grid point
                                       # solver.feature_index), where the head reads features at run time
    text_dropout: float = 0.1          # probability of the zero (null) text embedding, trains the null-text branch
    detach_video_target: bool = True   # no gradient into the tokenizer through x0 of the future frames
    beta_a: float = 1.5                # sigma_a ~ Beta(beta_a, 1) * 0.999 + 0.001 (pi0 / paper: 1.5)
    prefix_prob: float = 0.0           # real-time chunking, trained variant: fraction of action draws whose first d
                                       # actions are given clean (sigma 0) as the committed prefix, d ~ U{1..prefix_max}
    prefix_max: int = 0                # the largest delay d trained (0: none; needs prefix_prob > 0, and < the chunk)
    v0_dropout: float = 0.0            # probability per sample that the head's current-frame features (V0) are zeroed,
                                       # so the scene must reach the actions through the imagined future (V+); 0: off

    def __post_init__(self):
        check(self.video_weight >= 0, f"loss.video_weight must be >= 0, got {self.video_weight!r}")
        check(self.action_samples >= 1, f"loss.action_samples must be >= 1, got {self.action_samples!r}")
        check(0.0 <= self.sigma_v_grid_prob <= 1.0, f"loss.sigma_v_grid_prob must be in [0, 1], got {self.sigma_v_grid_prob!r}")
        check(0.0 <= self.sigma_v_feature_prob <= 1.0,
              f"loss.sigma_v_feature_prob must be in [0, 1], got {self.sigma_v_feature_prob!r}")
        check(self.sigma_v_grid_prob + self.sigma_v_feature_prob <= 1.0,
              f"loss.sigma_v_grid_prob + sigma_v_feature_prob must be <= 1, got "
              f"{self.sigma_v_grid_prob!r} + {self.sigma_v_feature_prob!r}")
        check(0.0 <= self.text_dropout < 1.0, f"loss.text_dropout must be in [0, 1), got {self.text_dropout!r}")
        check(self.beta_a > 0, f"loss.beta_a must be > 0, got {self.beta_a!r}")
        check(0.0 <= self.prefix_prob <= 1.0, f"loss.prefix_prob must be in [0, 1], got {self.prefix_prob!r}")
        check(isinstance(self.prefix_max, int) and not isinstance(self.prefix_max, bool) and self.prefix_max >= 0,
              f"loss.prefix_max must be an integer >= 0, got {self.prefix_max!r}")
        check(0.0 <= self.v0_dropout < 1.0, f"loss.v0_dropout must be in [0, 1), got {self.v0_dropout!r}")
        check((self.prefix_prob > 0) == (self.prefix_max > 0),
              f"loss.prefix_prob {self.prefix_prob!r} and loss.prefix_max {self.prefix_max!r}: the committed-prefix "
              f"objective needs both > 0 (or both 0 for none)")


def sample_sigma_v(model: VideoActionModel, b: int, grid_prob: float, gen: torch.Generator,
                   feature_prob: float = 0.0) -> torch.Tensor:
    """[B] video noise levels: with probability feature_prob the inference feature level, with
    probability grid_prob a uniformly chosen point of the solver grid, otherwise U[0,1]."""
    u = torch.rand(b, generator=gen)
    if grid_prob <= 0 and feature_prob <= 0:
        return u
    grid = torch.tensor(sigma_grid(model.cfg.solver), dtype=torch.float32)
    pick = grid[torch.randint(len(grid), (b,), generator=gen)]
    r = torch.rand(b, generator=gen)
    out = torch.where(r < grid_prob, pick, u)
    return torch.where(r >= 1.0 - feature_prob, grid[model.cfg.solver.feature_index], out)


def sample_sigma_a(b: int, beta_a: float, gen: torch.Generator) -> torch.Tensor:
    """[B] action noise levels Beta(beta_a, 1) * 0.999 + 0.001 (inverse-CDF sampling)."""
    return torch.rand(b, generator=gen).pow(1.0 / beta_a) * 0.999 + 0.001


def project_text(model: VideoActionModel, text_raw: torch.Tensor, dropout: float, gen: torch.Generator) -> torch.Tensor:
    """Raw prompt embeddings [B,L,text_in] -> projected [B,L,text_dim], zeroing whole prompts with p=dropout."""
    if dropout > 0:
        keep = (torch.rand(text_raw.shape[0], generator=gen) >= dropout).to(text_raw.device, text_raw.dtype)
        text_raw = text_raw * keep[:, None, None]
    return model.dit.project_text(text_raw)


def encode_clip(model: VideoActionModel, frames: torch.Tensor) -> torch.Tensor:
    """uint8 [B,17,H,W,3] -> latents [B,16,5,h,w] (the tokenizer is trainable)."""
    return model.tokenizer.encode(frames_to_video(frames))


def noisy_video(model: VideoActionModel, z: torch.Tensor, sigma: torch.Tensor, gen: torch.Generator,
                detach_target: bool):
    """Noised latents with the clean anchor, the anchor mask, per-frame sigmas and the velocity target."""
    b, c, t, h, w = z.shape
    x0 = z.detach() if detach_target else z
    eps = torch.randn(z.shape, generator=gen).to(z.device, z.dtype)       # drawn on the CPU generator
    s = sigma.view(b, 1, 1, 1, 1)
    x = (1 - s) * x0 + s * eps                                           # [B, C, T, h, w]
    mask = anchor_mask(t, b, h, w, z.device).to(z.dtype)                 # [B, 1, T, h, w]
    x = mask * z[:, :, :1] + (1 - mask) * x                              # anchor frame clean (keeps its gradient)
    is_anchor = torch.zeros(t, dtype=torch.bool, device=z.device)
    is_anchor[0] = True
    return x, mask, model.dit.frame_sigmas(sigma, is_anchor), eps - x0


def video_loss(v: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """MSE over the non-anchor latent frames (the anchor's velocity is analytic at inference)."""
    return F.mse_loss(v[:, :, 1:], target[:, :, 1:])


def prefix_delays(n: int, prob: float, max_delay: int, gen: torch.Generator) -> torch.Tensor:
    """[n] committed-prefix lengths: 0 with probability 1 - prob, else uniform on 1..max_delay.
    Draws nothing when prob is 0, so runs without the objective keep their noise stream."""
    if prob <= 0:
        return torch.zeros(n, dtype=torch.long)
    on = torch.rand(n, generator=gen) < prob
    d = torch.randint(1, max_delay + 1, (n,), generator=gen)
    return torch.where(on, d, torch.zeros_like(d))                      # [n]


def action_loss(model: VideoActionModel, feats: torch.Tensor, sigma_v: torch.Tensor, state: torch.Tensor,
                a0: torch.Tensor, samples: int, beta_a: float, gen: torch.Generator,
                rtc_prefix: tuple[float, int] = (0.0, 0), v0_dropout: float = 0.0) -> torch.Tensor:
    """Flow-matching loss of the head on block-k features [B,T,N,D] (first T latent frames used).

    state [B,P] and a0 [B,A,D] are normalised. The prefix cache is differentiable; each of the
    `samples` action-noise draws reuses it. `rtc_prefix` (prob, max delay): real-time chunking's
    trained variant. A draw with delay d > 0 gets its first d actions clean (sigma 0, the
    committed actions the arm runs while the policy infers) and the rest at the draw's sigma; its
    loss is over the free actions only. `v0_dropout` > 0: each sample's current-frame features (V0, the
    first latent frame) are zeroed with that probability (one draw per sample, before the action noise;
    none at 0, so runs without it draw exactly as before).
    """
    t = model.cfg.solver.latent_frames
    if v0_dropout > 0:
        keep = (torch.rand(feats.shape[0], generator=gen) >= v0_dropout).to(feats.device, feats.dtype)  # [B]
        feats = torch.cat([feats[:, :1] * keep.view(-1, 1, 1, 1), feats[:, 1:]], dim=1)  # [B, T, N, D]
    prefix = model.head.embed_prefix(feats[:, :t], model.cfg.dit_grid, sigma_v, state)   # [B, Tv+1, W]
    cache = model.head.prefix_cache(prefix)
    if samples > 1:
        cache = cache.repeat_rows(samples)                               # [layers, B*K, 1, Lp, hd]
        a0 = a0.repeat_interleave(samples, 0)                            # [B*K, A, D]
    eps = torch.randn(a0.shape, generator=gen).to(a0.device, a0.dtype)
    sig = sample_sigma_a(a0.shape[0], beta_a, gen).to(a0.device)         # [B*K]
    prob, max_delay = rtc_prefix
    if prob <= 0:
        a = (1 - sig.view(-1, 1, 1)) * a0 + sig.view(-1, 1, 1) * eps    # [B*K, A, D]
        v, _ = model.head.denoise_step(cache, a, sig)                    # [B*K, A, D]
        return F.mse_loss(v, eps - a0)
    n, horizon = a0.shape[:2]
    if not 1 <= max_delay < horizon:
        raise ValueError(f"loss.prefix_max must be in [1, {horizon - 1}] for a chunk of {horizon} actions, got {max_delay!r}")
    d = prefix_delays(n, prob, max_delay, gen).to(a0.device)            # [B*K]
    free = torch.arange(horizon, device=a0.device)[None] >= d[:, None]  # [B*K, A] True past the prefix
    sig_tok = torch.where(free, sig[:, None], torch.zeros_like(sig[:, None]))  # [B*K, A], 0 on the prefix
    a = (1 - sig_tok[..., None]) * a0 + sig_tok[..., None] * eps        # [B*K, A, D], prefix = a0 exactly
    v, _ = model.head.denoise_step(cache, a, sig_tok)                    # [B*K, A, D]
    err = (v - (eps - a0)).pow(2).mean(-1)                               # [B*K, A]
    return (err * free).sum() / free.sum()                               # mean over the free actions


def noised_inputs(model: VideoActionModel, batch: dict, cfg: LossConfig, gen: torch.Generator,
                  detach_target: bool = True):
    """The start every loss shares, in one fixed order of noise draws (exact resume):
    sigma_v [B], projected text [B,L,text_dim] (prompts dropped with p=text_dropout), and the
    noised latents with the clean anchor: x, mask, per-frame sigmas, velocity target."""
    sigma = sample_sigma_v(model, batch["frames"].shape[0], cfg.sigma_v_grid_prob, gen, cfg.sigma_v_feature_prob)
    sigma = sigma.to(batch["frames"].device)                             # [B], drawn on the CPU generator
    text = project_text(model, batch["text"], cfg.text_dropout, gen)
    z = encode_clip(model, batch["frames"]).float()                      # [B, 16, 5, h, w] (fp32 under autocast too)
    x, mask, sf, target = noisy_video(model, z, sigma, gen, detach_target)
    return sigma, text, x, mask, sf, target


def joint_losses(model: VideoActionModel, batch: dict, cfg: LossConfig, gen: torch.Generator,
                 with_action: bool = True) -> dict[str, torch.Tensor]:
    """One DiT forward giving the video loss and (with_action) the action loss on its block-k features.

    batch: frames uint8 [B,17,H,W,3], text [B,L,text_in] raw, state [B,P], actions [B,A,D] (normalised).
    """
    sigma, text, x, mask, sf, target = noised_inputs(model, batch, cfg, gen, cfg.detach_video_target)
    k = model.cfg.dit.feature_block if with_action else None
    v, feats = model.dit.velocity_and_features(x, mask, sf, text, block=k)
    out = {"video": video_loss(v, target)}
    if with_action:
        out["action"] = action_loss(model, feats, sigma, batch["state"], batch["actions"],
                                    cfg.action_samples, cfg.beta_a, gen, (cfg.prefix_prob, cfg.prefix_max),
                                    cfg.v0_dropout)
    out["total"] = cfg.video_weight * out["video"] + out.get("action", 0.0)
    return out


@torch.no_grad()
def frozen_features(model: VideoActionModel, batch: dict, cfg: LossConfig, gen: torch.Generator):
    """Stage 2 of two-stage: block-k features of the frozen DiT at sampled sigma_v (no gradients)."""
    sigma, text, x, mask, sf, _ = noised_inputs(model, batch, cfg, gen)
    return model.dit.features(x, mask, sf, text), sigma                  # [B, T, N, D], [B]


def text_path_features(model: VideoActionModel, batch: dict, cfg: LossConfig, gen: torch.Generator):
    """Block-k features with gradients only into block k and the shared text projection.

    Blocks 1..k-1 run without gradients; block k runs with them, so the action loss can train
    the DiT's text route (crossattn projection and block-k cross-attention) at the cost of one
    block's backward pass instead of the whole DiT's. The tokenizer is frozen in this stage, so
    the latents carry no graph.
    """
    sigma, text, x, mask, sf, _ = noised_inputs(model, batch, cfg, gen)  # text [B, L, text_dim] differentiable
    b, k = x.shape[0], model.cfg.dit.feature_block
    with torch.no_grad():
        tokens, temb, emb_t, rope, extra, (t, gh, gw, _, _) = model.dit._embed(x, mask, sf)
        tokens = model.dit._blocks(tokens, text.detach(), emb_t, temb, rope, extra, k - 1)
    tokens = model.dit.model.transformer_blocks[k - 1](tokens, text, emb_t, temb, rope, extra)
    return tokens.view(b, t, gh * gw, -1), sigma                        # [B, T, N, D], [B]
