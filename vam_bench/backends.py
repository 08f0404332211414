"""`vam-stack bench backends`: DiT velocity / features latency and parity per backend.

For one preset with seeded random weights and one set of inputs (batch 1, T latent frames,
anchor mask and anchor sigma at frame 0), every backend runs the full forward (`velocity`, the
solver steps before the exposed one) and the forward up to block k (`features`, the exposed
step). Repeats are interleaved across backends so drift on a shared machine hits all alike.
Reported per backend: setup time (export / session / engine build), median and p90 latency,
achieved FLOP/s against the FLOP count of each call (counted by torch's FlopCounterMode on
the preset's model on the meta device, so it follows the code), and parity against torch
eager fp32 (cosine, max |error|, and whether it is inside the precision's bound).
Ratios are what count on a shared CPU; absolute times only on a GPU.
"""
from __future__ import annotations

import argparse
import time
from dataclasses import replace

import numpy as np
import torch
from torch.utils.flop_counter import FlopCounterMode

from vam_bench import backend_list
from vam_model.backends import BACKENDS, PARITY_BOUNDS, BackendConfig, BackendUnavailable, make_backend, parity, within_bounds
from vam_stack.outputs import in_words

CALLS = ("velocity", "features")


def summarize(samples_s: list[float]) -> dict:
    """Median and p90 in ms of a list of durations in seconds."""
    a = np.asarray(samples_s, dtype=np.float64) * 1e3
    return {"median_ms": round(float(np.median(a)), 3), "p90_ms": round(float(np.percentile(a, 90)), 3), "n": int(a.size)}


def dit_call_flops(mcfg, frames: int | None = None) -> dict[str, int]:
    """FLOPs of one velocity and one features call at batch 1 (meta device: no memory, no time)."""
    from vam_model.export import example_inputs
    from vam_model.networks.dit import VideoDiT

    with torch.device("meta"):
        dit = VideoDiT(mcfg.dit, mcfg.tokenizer)
    ex = {k: v.to("meta") for k, v in example_inputs(mcfg, batch=1, frames=frames).items()}
    out = {}
    for call in CALLS:
        with FlopCounterMode(display=False) as counter:
            getattr(dit, call)(ex["x"], ex["mask"], ex["sigma_frames"], ex["text"])
        out[call] = int(counter.get_total_flops())
    return out


def bench_backends(preset: str, backends: list[str], repeats: int, threads: int = 0, compile: bool = False,
                   onnx_dir: str | None = None, cache_dir: str | None = None, precision: str = "bf16",
                   progress=print) -> dict:
    from vam_model.export import example_inputs, load_model

    if threads:
        torch.set_num_threads(threads)
    model = load_model(preset)
    mcfg = model.cfg
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = model.to(device)
    ex = {k: v[:1].to(device) for k, v in example_inputs(mcfg).items()}
    args = (ex["x"], ex["mask"], ex["sigma_frames"], ex["text"])
    with torch.no_grad():
        ref = {c: getattr(model.dit, c)(*args) for c in CALLS}
    flops = dit_call_flops(mcfg)
    base = BackendConfig(threads=threads, onnx_dir=onnx_dir, precision=precision,
                         **({"cache_dir": cache_dir} if cache_dir else {}))
    variants = []
    for name in backends:
        variants.append((name, replace(base, name=name)))
        if name == "torch" and compile:
            variants.append(("torch_compile", replace(base, name="torch", compile=True)))
    res: dict = {"preset": mcfg.name, "device": device, "input_shape": list(ex["x"].shape), "flops": flops,
                 "parity_bounds": {k: list(v) for k, v in PARITY_BOUNDS.items()}, "backends": {}}
    live = {}
    for label, cfg in variants:
        t0 = time.perf_counter()
        try:
            live[label] = make_backend(cfg, model, progress=progress)
        except BackendUnavailable as e:
            res["backends"][label] = {"unavailable": str(e)}
            progress(f"[backends] {label}: unavailable: {e}")
            continue
        entry = {"setup_s": round(time.perf_counter() - t0, 2), **live[label].describe()}
        prec = cfg.precision if cfg.name == "tensorrt" else "fp32"
        with torch.no_grad():
            for c in CALLS:                                              # warm-up + parity
                p = parity(getattr(live[label], c)(*args), ref[c])
                entry[f"parity_{c}"] = {**{k: float(f"{v:.6g}") for k, v in p.items()}, "precision": prec,
                                        "ok": within_bounds(p, prec)}
        res["backends"][label] = entry
    times = {label: {c: [] for c in CALLS} for label in live}
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    with torch.no_grad():
        for _ in range(repeats):
            for label, b in live.items():
                for c in CALLS:
                    sync()
                    t0 = time.perf_counter()
                    getattr(b, c)(*args)
                    sync()
                    times[label][c].append(time.perf_counter() - t0)
    for label, b in live.items():
        e = res["backends"][label]
        for c in CALLS:
            e[f"{c}_ms"] = summarize(times[label][c])
            e[f"{c}_gflop_s"] = round(flops[c] / (e[f"{c}_ms"]["median_ms"] / 1e3) / 1e9, 3)
        b.close()
    ref_ms = res["backends"].get("torch", {}).get("velocity_ms", {}).get("median_ms")
    if ref_ms:
        res["velocity_speedup_over_torch"] = {
            label: round(ref_ms / e["velocity_ms"]["median_ms"], 3)
            for label, e in res["backends"].items() if "velocity_ms" in e}
    res["parity_ok"] = all(e[f"parity_{c}"]["ok"] for e in res["backends"].values() if "setup_s" in e for c in CALLS)
    return res


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--preset", default="tiny", help="preset (2 B presets need a GPU to finish in minutes)")
    p.add_argument("--backend", action="extend", type=backend_list, metavar="B[,B...]",
                   help=f"backend(s) of {', '.join(BACKENDS)} to measure, comma-separated or the flag repeated "
                        f"(default: torch and onnxruntime, plus tensorrt when CUDA is present)")
    p.add_argument("--compile", action="store_true", help="also measure torch.compile")
    p.add_argument("--precision", default="bf16", choices=["fp32", "fp16", "bf16", "fp8"], help="tensorrt precision")
    p.add_argument("--repeats", type=int, default=5, help="timed rounds (after the warm-up/parity call)")
    p.add_argument("--threads", type=int, default=0, help="torch and onnxruntime threads (0 = default)")
    p.add_argument("--onnx-dir", default=None, help="graphs from `vam-stack export onnx` (default: export into the cache)")
    p.add_argument("--cache-dir", default=None, help="export/engine cache (default ~/.cache/vam_stack)")
    p.add_argument("--json", default=None, metavar="PATH", help="write the results as JSON here ('-' = stdout)")


def default_backends() -> list[str]:
    return ["torch", "onnxruntime"] + (["tensorrt"] if torch.cuda.is_available() else [])


def print_report(res: dict) -> None:
    print(f"backends on {res['preset']} ({res['device']}), input {res['input_shape']}, "
          f"GFLOP velocity {res['flops']['velocity'] / 1e9:.2f}  features {res['flops']['features'] / 1e9:.2f}")
    for label, e in res["backends"].items():
        if "unavailable" in e:
            print(f"  {label:14s} unavailable: {e['unavailable']}")
            continue
        pv, pf = e["parity_velocity"], e["parity_features"]
        print(f"  {label:14s} setup {e['setup_s']:7.1f} s  velocity {e['velocity_ms']['median_ms']:9.2f} ms "
              f"(p90 {e['velocity_ms']['p90_ms']:.2f}, {e['velocity_gflop_s']:.1f} GFLOP/s)  "
              f"features {e['features_ms']['median_ms']:9.2f} ms (p90 {e['features_ms']['p90_ms']:.2f})  "
              f"parity cos {pv['cosine']:.6f}/{pf['cosine']:.6f} max|err| {pv['max_abs']:.2e}/{pf['max_abs']:.2e} "
              f"{'ok' if pv['ok'] and pf['ok'] else 'FAIL'}")
    if "velocity_speedup_over_torch" in res:
        print(f"  velocity speed-up over torch eager: {in_words(res['velocity_speedup_over_torch'])}")


def run(args: argparse.Namespace) -> int:
    if args.repeats < 1:
        raise SystemExit(f"--repeats must be >= 1, got {args.repeats}")
    res = bench_backends(args.preset, args.backend or default_backends(), args.repeats, args.threads, args.compile,
                         args.onnx_dir, args.cache_dir, args.precision)
    print_report(res)
    if args.json:
        from vam_stack.outputs import write_json_output
        write_json_output(args.json, res)
    return 0 if res["parity_ok"] else 1
