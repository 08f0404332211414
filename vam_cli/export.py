"""`vam-stack export onnx`: its command line; the graphs, their inputs and the manifest are
vam_model/export.py."""
from __future__ import annotations

import argparse
import time

from vam_stack.outputs import claim_out_dir
from vam_stack.paths import models_dir

from vam_model.export import DTYPES, OPSET, export_onnx, load_model


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("format", choices=["onnx"], help="export format (onnx)")
    p.add_argument("--preset", help="preset name (see models/*.yaml) or YAML path; default tiny without "
                                    "--checkpoint, the checkpoint's own with one")
    p.add_argument("--checkpoint", default=None, help="safetensors checkpoint whose weights the graphs carry "
                                                      "(e.g. models/yam64.safetensors); required unless "
                                                      "--random-weights or --graph-only")
    p.add_argument("--random-weights", action="store_true",
                   help="without --checkpoint: export seeded random (untrained) weights, for tests and timing only")
    p.add_argument("--seed", type=int, default=0, help="seed of the random weights (--random-weights)")
    p.add_argument("--out", required=True, help="output directory (must be empty or new)")
    p.add_argument("--overwrite", action="store_true", help="write into a non-empty --out")
    p.add_argument("--dtype", choices=sorted(DTYPES), default="fp32", help="DiT weight/compute dtype inside the graph")
    p.add_argument("--no-head", action="store_true", help="export the DiT graphs only")
    p.add_argument("--no-dit", action="store_true", help="export the head graphs only")
    p.add_argument("--graph-only", action="store_true",
                   help="no weights: build on the meta device and write the graph structure (2 B presets on a CPU)")


def run(args: argparse.Namespace) -> int:
    t0 = time.perf_counter()
    if args.no_head and args.no_dit:
        raise SystemExit("--no-head and --no-dit together leave nothing to export")
    claim_out_dir(args.out, args.overwrite)          # an earlier export is never replaced by accident
    if args.checkpoint is None and not (args.random_weights or args.graph_only):
        shipped = models_dir() / f"{args.preset or 'tiny'}.safetensors"
        hint = f" (the shipped weights: --checkpoint {shipped})" if shipped.is_file() else ""
        raise SystemExit(f"no --checkpoint: the graphs would carry seeded random weights, not a trained "
                         f"model; give --checkpoint C{hint}, or --random-weights for a test export")
    if args.checkpoint is not None and args.random_weights:
        raise SystemExit("--random-weights and --checkpoint together: choose one")
    model = load_model(args.preset, args.checkpoint, args.seed, meta=args.graph_only)
    print(f"[export] {model.cfg.name}: model ready in {time.perf_counter() - t0:.1f} s; opset {OPSET}, {args.dtype}")
    m = export_onnx(model, args.out, args.dtype, head=not args.no_head, with_weights=not args.graph_only,
                    checkpoint=args.checkpoint, dit=not args.no_dit)
    print(f"[export] wrote {len(m['graphs'])} graphs + manifest.json to {args.out} "
          f"in {time.perf_counter() - t0:.1f} s")
    return 0
