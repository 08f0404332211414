"""`vam-stack export onnx`: its command line; the graphs, their inputs and the manifest are
vam_model/export.py. `vam-stack export cache`: the pre-export step, the graphs the onnxruntime
policy node would export at its first start, written into the same cache beforehand
(vam_model/onnx_cache.py), so the arm's first launch starts in seconds."""
from __future__ import annotations

import argparse
import time

from vam_stack.outputs import claim_out_dir
from vam_stack.paths import models_dir

from vam_model.backends import BackendConfig
from vam_model.export import DTYPES, OPSET, export_onnx, load_model


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("format", choices=["onnx", "cache"],
                   help="onnx: graphs into --out; cache: the graphs an onnxruntime policy runs, into the cache it "
                        "reads (~/.cache/vam_stack/onnx), before its first launch")
    p.add_argument("--preset", help="preset name (see models/*.yaml) or YAML path; default tiny without "
                                    "--checkpoint, the checkpoint's own with one")
    p.add_argument("--checkpoint", default=None, help="safetensors checkpoint whose weights the graphs carry "
                                                      "(e.g. models/yam64.safetensors); required unless "
                                                      "--random-weights or --graph-only")
    p.add_argument("--random-weights", action="store_true",
                   help="without --checkpoint: export seeded random (untrained) weights, for tests and timing only")
    p.add_argument("--seed", type=int, default=0, help="seed of the random weights (--random-weights)")
    p.add_argument("--out", help="onnx: output directory (must be empty or new)")
    p.add_argument("--cache-dir", default=BackendConfig().cache_dir,
                   help="cache: the cache directory (default: the policy node's, %(default)s of the user it runs as)")
    p.add_argument("--overwrite", action="store_true", help="write into a non-empty --out")
    p.add_argument("--dtype", choices=sorted(DTYPES), default="fp32", help="DiT weight/compute dtype inside the graph")
    p.add_argument("--no-head", action="store_true", help="export the DiT graphs only")
    p.add_argument("--no-dit", action="store_true", help="export the head graphs only")
    p.add_argument("--graph-only", action="store_true",
                   help="no weights: build on the meta device and write the graph structure (2 B presets on a CPU)")


def run(args: argparse.Namespace) -> int:
    if args.format == "cache":
        return run_cache(args)
    if not args.out:
        raise SystemExit("export onnx needs --out DIR")
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


def run_cache(args: argparse.Namespace) -> int:
    """The pre-export step: the checkpoint the node resolves (--checkpoint, else the preset's shipped
    models/<preset>.safetensors, as `checkpoint:=` / `preset:=` resolve in the launch files), its graphs
    exported into the node's cache unless there, damaged ones again, then loaded once in onnxruntime."""
    from vam_model.backends import make_backend
    from vam_model.networks.checkpoint import resolve_checkpoint

    if args.out or args.random_weights or args.graph_only or args.no_dit or args.no_head or args.dtype != "fp32":
        raise SystemExit("export cache takes --checkpoint or --preset (and --cache-dir): the graphs are the ones "
                         "the policy node runs, from the weights it loads")
    t0 = time.perf_counter()
    ckpt, preset = resolve_checkpoint(args.checkpoint, args.preset, "tiny")
    if ckpt is None:
        raise SystemExit(f"preset {preset!r} ships no weights (models/{preset}.safetensors): give --checkpoint C, "
                         f"the file the launch's checkpoint:= names")
    model = load_model(None if args.checkpoint else preset, ckpt)
    backend = make_backend(BackendConfig(name="onnxruntime", cache_dir=args.cache_dir), model, checkpoint=ckpt)
    d = backend.describe()
    backend.close()
    print(f"[export] {model.cfg.name} ({ckpt}): graphs ready in {d['onnx_dir']} and {d['head_dir']} after "
          f"{time.perf_counter() - t0:.1f} s; the policy node's first start with this checkpoint and backend "
          f"auto/onnxruntime exports nothing")
    return 0
