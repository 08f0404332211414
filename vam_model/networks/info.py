"""`vam-stack model-info`: parameter counts, token geometry, sigma grid and forward FLOPs.

The model is built on the `meta` device (no memory, seconds even for the 2 B preset) and
FLOPs are counted by torch's FlopCounterMode on meta tensors running our own forward code,
so the numbers follow the code rather than a separate formula.
"""
from __future__ import annotations


import torch
from torch.utils.flop_counter import FlopCounterMode

from .config import load_config
from .model import VideoActionModel
from .video_solver import sigma_grid


def count(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def _flops(fn) -> int:
    with FlopCounterMode(display=False) as counter:
        fn()
    return int(counter.get_total_flops())


def model_info(preset: str) -> dict:
    cfg = load_config(preset)
    with torch.device("meta"):
        model = VideoActionModel(cfg)
    dit_total = count(model.dit)
    text_proj = count(model.dit.model.crossattn_proj)
    head = count(model.head)
    tok = sum(p.numel() for p in model.tokenizer.encoder_parameters())
    h, w = cfg.latent_hw
    t = cfg.solver.latent_frames
    k, n_full = cfg.dit.feature_block, cfg.solver.feature_index
    dev = torch.device("meta")

    def video_pass():  # n_full full solver calls, then blocks 1..k at the exposed index
        x = torch.zeros(1, cfg.tokenizer.latent_channels, t, h, w, device=dev)
        m = torch.zeros(1, 1, t, h, w, device=dev)
        s = torch.zeros(1, t, device=dev)
        text = torch.zeros(1, cfg.dit.text_tokens, cfg.dit.text_dim, device=dev)
        for _ in range(n_full):
            model.dit.velocity(x, m, s, text)
        model.dit.features(x, m, s, text)

    feats = torch.zeros(1, t, cfg.dit_tokens_per_frame, cfg.dit.width, device=dev)
    state = torch.zeros(1, cfg.robot.proprio_dim, device=dev)
    actions = torch.zeros(1, cfg.robot.chunk, cfg.robot.action_dim, device=dev)
    sig = torch.zeros(1, device=dev)
    holder = {}

    def head_prefix():
        p = model.head.embed_prefix(feats, cfg.dit_grid, sig, state)
        holder["cache"] = model.head.prefix_cache(p)
        holder["prefix"] = p

    def euler_step():
        model.head.denoise_step(holder["cache"], actions, sig)

    def euler_step_uncached():
        model.head.denoise_step_uncached(holder["prefix"], actions, sig)

    flops = {"video_pass": _flops(video_pass), "head_prefix": _flops(head_prefix),
             "euler_step": _flops(euler_step), "euler_step_uncached": _flops(euler_step_uncached)}
    return {
        "preset": cfg.name,
        "dit_params": dit_total - text_proj,
        "text_proj_params": text_proj,
        "head_params": head,
        "tokenizer_encoder_params": tok,
        "total_params": dit_total + head,
        "image": [cfg.robot.image_width, cfg.robot.image_height],
        "latent_grid": [w, h],
        "dit_grid": list(cfg.dit_grid)[::-1],
        "dit_tokens_per_frame": cfg.dit_tokens_per_frame,
        "dit_tokens": cfg.dit_tokens_per_frame * t,
        "head_video_tokens_per_frame": cfg.head_tokens_per_frame,
        "head_video_tokens": cfg.head_video_tokens,
        "latent_frames": t,
        "chunk": cfg.robot.chunk,
        "action_dim": cfg.robot.action_dim,
        "sigma_grid": [round(s, 6) for s in sigma_grid(cfg.solver)],
        "feature_index": n_full,
        "feature_block": k,
        "flops": flops,
    }
