"""`vam-stack model-info`: its command line; the numbers (parameter counts, token geometry, sigma
grid and forward FLOPs) come from vam_model/networks/info.py."""
from __future__ import annotations

import argparse
import json

from vam_model.networks.info import model_info


def _fmt(n: float) -> str:
    for unit, div in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(n) >= div:
            return f"{n / div:.2f} {unit}"
    return str(n)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--preset", default="tiny", help="preset name (real, libero, tiny) or a YAML path")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    info = model_info(args.preset)
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    f = info["flops"]
    print(f"preset {info['preset']}: image {info['image'][0]}x{info['image'][1]}, "
          f"latent {info['latent_grid'][0]}x{info['latent_grid'][1]} x {info['latent_frames']} frames")
    print(f"  parameters   DiT {_fmt(info['dit_params'])}  text projection {_fmt(info['text_proj_params'])}  "
          f"action head {_fmt(info['head_params'])}  total {_fmt(info['total_params'])}  "
          f"(+ tokenizer encoder {_fmt(info['tokenizer_encoder_params'])})")
    print(f"  DiT tokens   {info['dit_tokens_per_frame']}/frame ({info['dit_grid'][0]}x{info['dit_grid'][1]}), "
          f"{info['dit_tokens']} total")
    print(f"  head tokens  {info['head_video_tokens_per_frame']}/frame video, {info['head_video_tokens']} total "
          f"+ 1 state + {info['chunk']} actions")
    print(f"  sigma_v grid {', '.join(f'{s:.3f}' for s in info['sigma_grid'])}  "
          f"(features: block {info['feature_block']} at index {info['feature_index']})")
    print(f"  FLOPs        video pass {_fmt(f['video_pass'])}  head prefix {_fmt(f['head_prefix'])}  "
          f"Euler step {_fmt(f['euler_step'])} (uncached {_fmt(f['euler_step_uncached'])})")
    return 0
