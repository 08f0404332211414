"""`vam-stack bench policy`: replan latency by schedule and the prefix-cache speedup.

Everything is measured side by side in one run (interleaved repeats, medians), so the
ratios hold on a noisy shared machine even when absolute times drift:
  - replan: unguided (`none`) vs `tr_adaptive` with s = 0 (TR below TR_0: extra branches
    gated off) vs `tr_adaptive` with s > 0 vs `flat`;
  - head: 10 Euler steps with the prefix KV cache (prefix once + 10 suffix-only steps) vs
    without it (10 full-sequence steps).
On presets with the 2 B DiT (`libero`, `real`) a replan costs ~25 TFLOP, minutes on a CPU:
the replan part is skipped unless `--full`; the head part always runs.
"""
from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import replace

import numpy as np
import torch

from vam_model.guidance import GuidanceConfig
from vam_model.networks.action_head import ActionHead
from vam_model.networks.config import load_config
from vam_model.policy import PolicyConfig, build_policy


def _median_ms(xs):
    return round(statistics.median(xs) * 1e3, 3)


def bench_replan(preset: str, repeats: int, threads: int) -> dict:
    mcfg = load_config(preset)
    r = mcfg.robot
    rng = np.random.default_rng(0)
    obs = {"frames": rng.integers(0, 256, (r.frames, r.image_height, r.image_width, 3), dtype=np.uint8),
           "proprio": np.zeros(r.proprio_dim, np.float32)}
    base = build_policy(preset, config=PolicyConfig(threads=threads, return_attention=False))
    modes = {
        "unguided": ("none", None),
        "gated_s0": ("tr_adaptive", 1e9),       # TR_0 far above TR -> s = 0
        "guided_s_max": ("tr_adaptive", 1e-9),  # TR_0 far below TR -> s = s_max
        "flat": ("flat", None),
    }
    policies = {}
    for name, (schedule, _) in modes.items():
        cfg = replace(base.cfg, guidance=GuidanceConfig(schedule=schedule))
        p = type(base)(base.model, cfg, base.text_encoder, checkpoint=base.checkpoint)
        p.reset("put the black bowl on the plate")
        policies[name] = p
    times = {name: [] for name in modes}
    branches = {}
    for rep in range(repeats + 1):                       # first round is warm-up
        for name, (_, tr0) in modes.items():
            p = policies[name]
            p.guidance.tr0 = tr0
            t0 = time.perf_counter()
            out = p.infer(obs)
            dt = time.perf_counter() - t0
            if rep:
                times[name].append(dt)
            branches[name] = out["branches_computed"]
    med = {name: _median_ms(v) for name, v in times.items()}
    return {
        "replan_ms": med,                                # medians (p50)
        "replan_ms_p95": {name: round(float(np.percentile(v, 95)) * 1e3, 3) for name, v in times.items()},
        "branches": branches,
        "gated_over_unguided": round(med["gated_s0"] / med["unguided"], 4),
        "guided_over_unguided": round(med["guided_s_max"] / med["unguided"], 4),
        "flat_over_unguided": round(med["flat"] / med["unguided"], 4),
    }


@torch.no_grad()
def head_timings(preset: str, repeats: int, steps: int = 10) -> tuple[dict[str, list[float]], int]:
    """Seconds per round (after one warm-up round), interleaved: prefix + `steps` cached Euler
    evaluations vs `steps` full-sequence evaluations. Returns (samples, head sequence length)."""
    cfg = load_config(preset)
    torch.manual_seed(0)
    head = ActionHead(cfg.head, cfg.dit.width, cfg.robot.action_dim, cfg.robot.proprio_dim).eval()
    feats = torch.randn(1, cfg.solver.latent_frames, cfg.dit_tokens_per_frame, cfg.dit.width)
    state = torch.zeros(1, cfg.robot.proprio_dim)
    actions = torch.randn(1, cfg.robot.chunk, cfg.robot.action_dim)
    prefix = head.embed_prefix(feats, cfg.dit_grid, torch.tensor([0.883]), state)
    sig = torch.linspace(1, 0, steps + 1)

    def cached():
        cache = head.prefix_cache(prefix)
        for i in range(steps):
            head.denoise_step(cache, actions, sig[i:i + 1])

    def uncached():
        for i in range(steps):
            head.denoise_step_uncached(prefix, actions, sig[i:i + 1])

    t = {"cached": [], "uncached": []}
    for rep in range(repeats + 1):
        for name, fn in (("cached", cached), ("uncached", uncached)):
            t0 = time.perf_counter()
            fn()
            if rep:
                t[name].append(time.perf_counter() - t0)
    return t, prefix.shape[1] + cfg.robot.chunk


def bench_head(preset: str, repeats: int, steps: int = 10) -> dict:
    t, tokens = head_timings(preset, repeats, steps)
    med = {k: _median_ms(v) for k, v in t.items()}
    return {"head_ms": med, "head_tokens": tokens, "euler_steps": steps,
            "cache_speedup": round(med["uncached"] / med["cached"], 3)}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--preset", action="append", help="preset(s) to measure (default: tiny and libero)")
    p.add_argument("--repeats", type=int, default=5, help="measured rounds per mode (after one warm-up)")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0 = default)")
    p.add_argument("--full", action="store_true", help="also time replans on 2 B presets (very slow on a CPU)")
    p.add_argument("--json", metavar="PATH", help="write the results as JSON to PATH ('-' = stdout)")


def run(args: argparse.Namespace) -> int:
    if args.repeats < 1:
        raise SystemExit(f"--repeats must be >= 1, got {args.repeats}")
    presets = args.preset or ["tiny", "libero"]
    if args.threads:
        torch.set_num_threads(args.threads)   # fewer threads = steadier ratios on a shared machine
    results = {}
    for preset in presets:
        cfg = load_config(preset)
        res = {"preset": preset}
        big = cfg.dit.layers * cfg.dit.width > 10_000
        if big and not args.full:
            res["replan_skipped"] = "2 B DiT: ~25 TFLOP per replan, minutes on a CPU (use --full or a GPU)"
            print(f"[{preset}] replan: skipped ({res['replan_skipped']})")
        else:
            print(f"[{preset}] replan: {args.repeats} rounds x 4 modes ...", flush=True)
            res.update(bench_replan(preset, args.repeats, args.threads))
            m = res["replan_ms"]
            q = res["replan_ms_p95"]
            print(f"[{preset}] replan ms p50 (p95)  unguided {m['unguided']} ({q['unguided']})  gated(s=0) "
                  f"{m['gated_s0']} ({q['gated_s0']})  guided(s=s_max) {m['guided_s_max']} ({q['guided_s_max']})  "
                  f"flat {m['flat']} ({q['flat']})")
            print(f"[{preset}] gated/unguided {res['gated_over_unguided']} (target <= 1.1)  "
                  f"guided/unguided {res['guided_over_unguided']}  flat/unguided {res['flat_over_unguided']}")
        print(f"[{preset}] head: {args.repeats} rounds, cached vs uncached ...", flush=True)
        res.update(bench_head(preset, 1 if big else args.repeats))
        h = res["head_ms"]
        print(f"[{preset}] head 10 steps ms  cached {h['cached']}  uncached {h['uncached']}  "
              f"cache_speedup {res['cache_speedup']} (target >= 5 on libero)")
        results[preset] = res
    out = results if len(results) > 1 else next(iter(results.values()))
    if args.json:
        from vam_stack.outputs import write_json_output
        write_json_output(args.json, out)
    return 0
