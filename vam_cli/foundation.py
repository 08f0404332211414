"""`vam-stack foundation import|inspect`: its command line; reading the published DiT / VAE (and pi0)
weights into a checkpoint is vam_model/foundation.py."""
from __future__ import annotations

import argparse
import json
import sys

from vam_model.foundation import DIT_CONFIG_FIELDS, dit_variant, import_foundation, read_transformer


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    a = sub.add_parser("import", help="write a vam_stack checkpoint from the public foundation weights")
    a.add_argument("--preset", required=True, help="model preset whose DiT/VAE the weights fill (e.g. real, libero)")
    a.add_argument("--transformer", required=True,
                   help="DiT weights: a diffusers folder (or its parent holding transformer/) or NVIDIA's native .pt")
    a.add_argument("--vae", help="Wan 2.1 VAE: a diffusers folder (or its parent holding vae/) or the native .pth")
    a.add_argument("--pi0", help="initialise the action head from a pi0 checkpoint's Gemma expert (model.safetensors)")
    a.add_argument("--text-encoder", help="local Qwen2.5-VL folder to record as the checkpoint's text encoder")
    a.add_argument("--weights", choices=("ema", "net"), default="ema",
                   help="native training checkpoints: the EMA copy (default) or the raw weights")
    a.add_argument("--trust-pickle", action="store_true",
                   help="load a native .pt that holds more than tensors (runs code from the file: trusted "
                        "sources only)")
    a.add_argument("--seed", type=int, default=0, help="seed of the freshly initialised action head")
    a.add_argument("--out", required=True, help="checkpoint to write (.safetensors; never replaces a file)")
    i = sub.add_parser("inspect", help="name the variant and list the keys of a DiT file or folder")
    i.add_argument("path", help="a diffusers transformer folder or a native .pt")
    i.add_argument("--trust-pickle", action="store_true", help="as for import")


def run(args: argparse.Namespace) -> int:
    if args.action == "inspect":
        config, state = read_transformer(args.path, trust_pickle=args.trust_pickle)
        n = sum(t.numel() for t in state.values())
        print(f"{args.path}: {dit_variant(state)}, {len(state)} tensors, {n / 1e9:.3f} B parameters, "
              f"dtypes {sorted({str(t.dtype) for t in state.values()})}"
              + ("" if config is None else f", config: {json.dumps({k: config.get(k) for k in DIT_CONFIG_FIELDS})}"))
        return 0
    summary = import_foundation(args.preset, args.transformer, args.vae, args.out, pi0=args.pi0,
                                text_encoder=args.text_encoder, weights=args.weights,
                                trust_pickle=args.trust_pickle, seed=args.seed,
                                log=lambda m: print(m, file=sys.stderr, flush=True))
    print(f"wrote {summary['out']}: preset {summary['preset']}, {summary['parameters'] / 1e9:.3f} B parameters, "
          f"{summary['bytes'] / 1e9:.2f} GB, {summary['seconds']} s; tensor_sha256 {summary['tensor_sha256']}")
    if summary["head"]:
        print(f"head from pi0: {summary['head']}")
    print(f"train from it with `init_from: {summary['out']}` in a train config")
    return 0
