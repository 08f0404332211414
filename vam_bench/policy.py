"""`vam-stack bench policy`: the end-to-end replan, one `VamPolicy.infer` call, per backend and device.

Everything is measured side by side in one run (interleaved repeats, medians), so the ratios
hold on a noisy shared machine even when absolute times drift:
  - replan by guidance mode: unguided (`none`) vs `tr_adaptive` with s = 0 (TR below TR_0:
    extra branches gated off) vs `tr_adaptive` with s > 0 vs `flat`;
  - per backend (`--backend torch --backend onnxruntime`: the whole policy, DiT and head, in
    ONNX Runtime): each mode's time over torch's;
  - real-time chunking: `unguided` and `flat` also with a committed chunk, guided (the VJP's
    cost) and trained (the torch head with per-token times; the prefix length is set on the
    bench's random head, which times the path, not a trained head's actions);
  - branch batching: the guided modes with the branches batched (the default) vs one call per
    branch;
  - per-stage split (encode, video passes, head prefixes, Euler steps, TR, copy-out); on CUDA
    from a separate pass whose stage timers wait for the device (`sync_timing`), so the
    end-to-end figures carry no extra syncs;
  - achieved FLOP/s of the unguided replan against `vam-stack model-info`'s FLOP model, and on
    CUDA the fraction of the GPU's dense bf16 peak;
  - head: 10 Euler steps with the prefix KV cache (prefix once + 10 suffix-only steps) vs
    without it (10 full-sequence steps).
On presets with the 2 B DiT (`libero`, `real`) a replan costs ~25 TFLOP, minutes on a CPU:
the replan part is skipped there on a CPU unless `--full`; the head part always runs.
"""
from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import replace

import numpy as np
import torch

from vam_bench import backend_list
from vam_model.backends import BACKENDS, BackendConfig
from vam_model.guidance import GuidanceConfig
from vam_model.networks.action_head import ActionHead
from vam_model.networks.config import load_config
from vam_model.policy import AUTOCAST, PolicyConfig, VamPolicy
from vam_stack.outputs import in_words

MODES = {  # name -> (guidance schedule, TR_0 forcing s): TR_0 far above TR gives s = 0, far below s = s_max
    "unguided": ("none", None),
    "gated_s0": ("tr_adaptive", 1e9),
    "guided_s_max": ("tr_adaptive", 1e-9),
    "flat": ("flat", None),
}
BATCH_MODES = ("guided_s_max", "flat")   # the modes with more than one branch
RTC_MODES = ("unguided", "flat")          # also timed with a committed chunk (real-time chunking)
RTC_METHODS = ("guided", "trained")        # how the committed chunk is continued (vam_model/realtime_chunking.py)


# Dense bf16 tensor-core peak (FLOP/s, no sparsity) by GPU name fragment, from vendor data sheets.
BF16_PEAK = {"H200": 989e12, "H100 SXM": 989e12, "H100 80GB HBM3": 989e12, "H100 PCIe": 756e12, "H100": 756e12,
             "A100": 312e12, "L40S": 362e12, "L4": 121e12, "RTX 4090": 165e12, "A10": 125e12}


def bf16_peak(name: str) -> float | None:
    for frag, peak in BF16_PEAK.items():
        if frag in name:
            return peak
    return None


def _median_ms(xs):
    return round(statistics.median(xs) * 1e3, 3)


def _p95_ms(xs):
    return round(float(np.percentile(xs, 95)) * 1e3, 3)


def sync_device(device: torch.device) -> None:
    """Wait for the device's queued work (CUDA); a no-op on the CPU. Timers call it around a measure."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def bench_replan(preset: str, repeats: int, threads: int, device: str = "auto", backends=("torch",),
                 autocast: str = "none", cache_dir: str | None = None, batch_compare: bool = True,
                 model=None, backend_kw: dict | None = None) -> dict:
    """End-to-end replans, interleaved over backends x modes (and unbatched guided modes).

    `model`: an already built VideoActionModel of `preset` (the GPU check passes its own, made
    on the GPU); default: seeded random weights. `backend_kw`: extra BackendConfig fields
    (TensorRT precision, builder level)."""
    mcfg = load_config(preset)
    r = mcfg.robot
    rng = np.random.default_rng(0)
    obs = {"frame": rng.integers(0, 256, (r.image_height, r.image_width, 3), dtype=np.uint8),
           "proprio": np.zeros(r.proprio_dim, np.float32)}
    bkw = {**({"cache_dir": cache_dir} if cache_dir else {}), **(backend_kw or {})}
    pcfg = PolicyConfig(threads=threads, return_attention=False, device=device, autocast=autocast)
    if model is None:
        from vam_model.device import resolve_device
        from vam_model.export import load_model

        model = load_model(preset, seed=pcfg.seed, device=str(resolve_device(device)))   # made where it runs
    text, text_source = bench_text_encoder(mcfg, pcfg.text_encoder)
    base = VamPolicy(model, pcfg, text)
    dev = base.device
    variants = {}                                  # (backend, mode, batched) -> policy
    for backend in backends:
        shared = None
        for mode, (schedule, _) in MODES.items():
            for batched in ((True, False) if batch_compare and mode in BATCH_MODES and backend == backends[0] else (True,)):
                cfg = replace(base.cfg, guidance=GuidanceConfig(schedule=schedule), batch_branches=batched,
                              backend=BackendConfig(name=backend, **bkw))
                p = VamPolicy(base.model, cfg, base.text_encoder, checkpoint=base.checkpoint, backend=shared)
                shared = shared or p.backend       # one session/engine set per backend for all its modes
                p.reset("put the black bowl on the plate")
                variants[(backend, mode, batched)] = p
    times = {k: [] for k in variants}
    rtc_times = {(k, m): [] for k in RTC_METHODS for m in RTC_MODES}   # the same policy, a committed chunk given
    out_of = {}
    for rep in range(repeats + 1):                                      # first round is warm-up
        for key, p in variants.items():
            p.guidance.tr0 = MODES[key[1]][1]
            sync_device(dev)
            t0 = time.perf_counter()
            out = p.infer(obs)
            sync_device(dev)
            if rep:
                times[key].append(time.perf_counter() - t0)
            out_of[key] = out
            if key[0] == backends[0] and key[1] in RTC_MODES and key[2]:
                # real-time chunking: the rest of a chunk 4 ticks before its executed part ends, 3 frozen
                p.rtc_prefix_max = 8                                    # times the trained path on this head
                for method in RTC_METHODS:
                    committed = {"actions": out["actions"][max(r.execute - 4, 0):], "delay": 3, "method": method}
                    sync_device(dev)
                    t0 = time.perf_counter()
                    p.infer(obs, committed=committed)
                    sync_device(dev)
                    if rep:
                        rtc_times[(method, key[1])].append(time.perf_counter() - t0)
    res: dict = {"device": str(dev), "autocast": autocast, "euler_steps": base.cfg.euler_steps, "text": text_source,
                 "backends": {}}
    for backend in backends:
        b = {"describe": variants[(backend, "unguided", True)].backend.describe(),
             "replan_ms": {m: _median_ms(times[(backend, m, True)]) for m in MODES},
             "replan_ms_p95": {m: _p95_ms(times[(backend, m, True)]) for m in MODES},
             "branches": {m: out_of[(backend, m, True)]["branches_computed"] for m in MODES}}
        med = b["replan_ms"]
        b.update({"gated_over_unguided": round(med["gated_s0"] / med["unguided"], 4),
                  "guided_over_unguided": round(med["guided_s_max"] / med["unguided"], 4),
                  "flat_over_unguided": round(med["flat"] / med["unguided"], 4)})
        res["backends"][backend] = b
    ref = backends[0]
    for backend in backends[1:]:
        res[f"{backend}_over_{ref}"] = {m: round(res["backends"][backend]["replan_ms"][m] /
                                                 res["backends"][ref]["replan_ms"][m], 4) for m in MODES}
    res["rtc_replan_ms"] = {k: {m: _median_ms(rtc_times[(k, m)]) for m in RTC_MODES} for k in RTC_METHODS}
    res["rtc_over_plain"] = {k: {m: round(_median_ms(rtc_times[(k, m)]) / res["backends"][ref]["replan_ms"][m], 4)
                                 for m in RTC_MODES} for k in RTC_METHODS}
    if batch_compare:
        res["batched_over_unbatched"] = {m: round(_median_ms(times[(ref, m, True)]) / _median_ms(times[(ref, m, False)]), 4)
                                         for m in BATCH_MODES}
        res["unbatched_replan_ms"] = {m: _median_ms(times[(ref, m, False)]) for m in BATCH_MODES}
    res["stages_ms"] = _stages(variants, ref, obs, repeats, dev, out_of)
    return res


class StandInText:
    """A seeded random instruction embedding of the preset's shape. For timing random-weight
    models whose text encoder (the full-size presets' Qwen2.5-VL-7B class: 28 x 3584 features
    per token) is not on the machine: a replan's cost does not depend on the embedding's values."""

    def __init__(self, tokens: int, dim: int):
        self.shape = (1, tokens, dim)

    def encode(self, instruction: str) -> torch.Tensor:
        import zlib

        g = torch.Generator().manual_seed(zlib.crc32(instruction.encode()))
        return 0.1 * torch.randn(self.shape, generator=g)                    # [1, L, text_in_dim]


def bench_text_encoder(mcfg, spec: str):
    """(encoder, what it is): the configured text encoder, or a StandInText where it cannot load."""
    from vam_model.networks.text_encoder import TextEncoder

    try:
        return TextEncoder(spec, mcfg.dit.text_tokens, mcfg.dit.text_in_dim), spec
    except (ValueError, FileNotFoundError, OSError) as e:
        return StandInText(mcfg.dit.text_tokens, mcfg.dit.text_in_dim), f"seeded random stand-in ({e})"


def _stages(variants: dict, backend: str, obs: dict, repeats: int, dev: torch.device, out_of: dict) -> dict:
    """Median stage times per mode of `backend`: on CUDA from a pass with device-synchronised
    stage timers, on the CPU from the timed runs' own telemetry (stage wall times are exact there)."""
    split = {}
    for mode in MODES:
        p = variants[(backend, mode, True)]
        if dev.type == "cuda":
            p.cfg = replace(p.cfg, sync_timing=True)
            runs = []
            for _ in range(max(1, repeats // 2)):
                p.guidance.tr0 = MODES[mode][1]
                runs.append(p.infer(obs)["timing_ms"])
            p.cfg = replace(p.cfg, sync_timing=False)
        else:
            runs = [out_of[(backend, mode, True)]["timing_ms"]]
        split[mode] = {k: round(statistics.median(r[k] for r in runs if k in r), 3) for k in runs[0]}
    return split


def achieved(preset: str, replan: dict, backend: str = "torch") -> dict:
    """FLOP/s of the unguided replan against the FLOP model; on CUDA also the bf16 peak fraction."""
    from vam_model.networks.info import model_info

    f = model_info(preset)["flops"]
    steps = replan["euler_steps"]
    flop = f["video_pass"] + f["head_prefix"] + steps * f["euler_step"]
    ms = replan["backends"][backend]["replan_ms"]["unguided"]
    out = {"unguided_flop": flop, "unguided_tflop_s": round(flop / (ms / 1e3) / 1e12, 4)}
    if replan["device"].startswith("cuda"):
        peak = bf16_peak(torch.cuda.get_device_name())
        out["bf16_peak_flop_s"] = peak
        out["fraction_of_bf16_peak"] = round(flop / (ms / 1e3) / peak, 4) if peak else None
        out["compute_limit_ms_at_peak"] = round(flop / peak * 1e3, 3) if peak else None
    return out


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
    p.add_argument("--device", default="auto", help="policy device: auto | cpu | cuda | cuda:N (default auto)")
    p.add_argument("--backend", action="extend", type=backend_list, metavar="B[,B...]",
                   help=f"backend(s) of {', '.join(BACKENDS)}, comma-separated or the flag repeated, measured "
                        f"side by side; the first is the reference (default: torch)")
    p.add_argument("--autocast", default="none", choices=sorted(AUTOCAST), help="torch backend autocast precision")
    p.add_argument("--no-batch-compare", action="store_true", help="skip the unbatched-branches comparison")
    p.add_argument("--cache-dir", default=None, help="exported graphs / engines cache (default ~/.cache/vam_stack)")
    p.add_argument("--full", action="store_true", help="also time replans on 2 B presets on a CPU (very slow)")
    p.add_argument("--json", metavar="PATH", help="write the results as JSON to PATH ('-' = stdout)")


def run(args: argparse.Namespace) -> int:
    from vam_model.device import resolve_device

    if args.repeats < 1:
        raise SystemExit(f"--repeats must be >= 1, got {args.repeats}")
    try:
        dev = resolve_device(args.device)
    except (ValueError, RuntimeError) as e:
        raise SystemExit(str(e)) from None
    if dev.type == "meta":
        raise SystemExit("--device meta has no data to time; use cpu or cuda")
    presets = args.preset or ["tiny", "libero"]
    backends = tuple(dict.fromkeys(args.backend or ["torch"]))
    if args.threads:
        torch.set_num_threads(args.threads)   # fewer threads = steadier ratios on a shared machine
    results = {}
    for preset in presets:
        cfg = load_config(preset)
        res = {"preset": preset}
        big = cfg.dit.layers * cfg.dit.width > 10_000
        if big and dev.type == "cpu" and not args.full:
            res["replan_skipped"] = "2 B DiT: ~25 TFLOP per replan, minutes on a CPU (use --full or a GPU)"
            print(f"[{preset}] replan: skipped ({res['replan_skipped']})")
        else:
            print(f"[{preset}] replan on {dev}: {args.repeats} rounds x {len(MODES)} modes x {', '.join(backends)} ...",
                  flush=True)
            rep = bench_replan(preset, args.repeats, args.threads, str(dev), backends, args.autocast, args.cache_dir,
                               not args.no_batch_compare)
            res.update(rep)
            res["achieved"] = achieved(preset, rep, backends[0])
            _print_replan(preset, res, backends)
        print(f"[{preset}] head: {args.repeats} rounds, cached vs uncached ...", flush=True)
        res.update(bench_head(preset, 1 if big else args.repeats))
        h = res["head_ms"]
        print(f"[{preset}] head 10 steps ms  cached {h['cached']}  uncached {h['uncached']}  "
              f"cache_speedup {res['cache_speedup']} (target >= 5 on libero: "
              f"{mark(res['cache_speedup'] >= 5) if preset == 'libero' else 'not this preset'})")
        results[preset] = res
    out = results if len(results) > 1 else next(iter(results.values()))
    if args.json:
        from vam_stack.outputs import write_json_output
        write_json_output(args.json, out)
    return 0


def mark(ok: bool) -> str:
    """What a reader looks for beside a target: met or missed."""
    return "MET" if ok else "MISSED"


def _print_replan(preset: str, res: dict, backends: tuple) -> None:
    for k in RTC_METHODS:
        print(f"[{preset}] {backends[0]} replan ms with a committed chunk (real-time chunking, {k})  " +
              "  ".join(f"{m} {res['rtc_replan_ms'][k][m]} ({res['rtc_over_plain'][k][m]}x plain)" for m in RTC_MODES))
    for backend in backends:
        b = res["backends"][backend]
        m, q = b["replan_ms"], b["replan_ms_p95"]
        print(f"[{preset}] {backend} ({b['describe'].get('head')} head) replan ms p50 (p95)  " +
              "  ".join(f"{k} {m[k]} ({q[k]})" for k in MODES))
        print(f"[{preset}] {backend} gated/unguided {b['gated_over_unguided']} (target <= 1.1: "
              f"{mark(b['gated_over_unguided'] <= 1.1)})  "
              f"guided/unguided {b['guided_over_unguided']}  flat/unguided {b['flat_over_unguided']}")
    for backend in backends[1:]:
        print(f"[{preset}] {backend}/{backends[0]} per mode: {in_words(res[f'{backend}_over_{backends[0]}'])}")
    if "batched_over_unbatched" in res:
        print(f"[{preset}] batched/unbatched branches: {in_words(res['batched_over_unbatched'])}")
    print(f"[{preset}] stages (ms, unguided): {in_words(res['stages_ms']['unguided'])}")
    a = res["achieved"]
    extra = f"  {a['fraction_of_bf16_peak']} of the bf16 peak" if a.get("fraction_of_bf16_peak") is not None else ""
    print(f"[{preset}] unguided: {a['unguided_flop'] / 1e12:.3f} TFLOP at {a['unguided_tflop_s']} TFLOP/s{extra}")
