"""GPU check (run by scripts/gpu_check.sh): TensorRT engines, parity and latency per preset.

For each preset (default: real, then libero), with seeded random weights on the GPU:
  1. torch eager fp32 reference outputs of the DiT velocity and block-k features (batch 1);
  2. latency of torch eager (bf16 autocast), torch.compile (bf16 autocast) and TensorRT (bf16
     graph, engines built and cached by the `tensorrt` backend; optional FP8);
  3. TensorRT parity against the fp32 reference (cosine and max |err| inside the bf16 bounds);
  4. replan latency composed from measured stages (kept beside the end-to-end figure as a
     cross-check): tokenizer encode, `feature_index` full passes + one block-k pass, head
     prefix and 10 cached Euler steps (torch bf16);
  5. the fraction of the GPU's dense bf16 peak reached by the video pass;
  6. TensorRT head engines: parity of the prefix keys and the step velocity against fp32 torch;
  7. the end-to-end replan, one `VamPolicy.infer` call on `device="cuda"` (`vam_bench.policy`):
     TensorRT (DiT + head engines) and torch bf16 autocast side by side, every guidance mode,
     batched vs unbatched branches, the per-stage split and the bf16-peak fraction;
  8. an episode of replans on changing frames under `tr_adaptive` vs `none` (TR-gated cost).
A deadline (`--budget-s`) stops before a preset that would not fit. Every figure lands in the
JSON as soon as it is measured, and SIGTERM (the script's `timeout`) or Ctrl-C writes what was
measured with `stopped` set before exiting, so a stopped run still leaves one whole JSON.
"""
from __future__ import annotations

import argparse
import json
import signal
import time
from pathlib import Path

import numpy as np
import torch

from vam_model.backends import BackendConfig, make_backend, parity, within_bounds
from vam_bench.backends import dit_call_flops, summarize
from vam_bench.policy import bf16_peak, sync_device
from vam_stack.outputs import jsonable, write_json_atomic

def _time(fn, repeats: int) -> dict:
    fn()
    torch.cuda.synchronize()
    xs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        xs.append(time.perf_counter() - t0)
    return summarize(xs)


class Stopped(Exception):
    """SIGTERM or SIGINT arrived: write what was measured and stop."""


def _stop(signum, frame):
    raise Stopped(signal.Signals(signum).name)


@torch.no_grad()
def check_preset(preset: str, repeats: int, cache_dir: str, precision: str, level: int, compile: bool,
                 log=print, res: dict | None = None, save=lambda: None, episode_replans: int = 20) -> dict:
    """All checks of one preset into `res` (filled as measured); `save()` after each stage."""
    from vam_model.export import example_inputs, load_model
    from vam_model.networks.info import model_info

    t0 = time.perf_counter()
    model = load_model(preset, device="cuda")
    mcfg = model.cfg
    res = {} if res is None else res
    res.update({"preset": preset, "model_init_s": round(time.perf_counter() - t0, 1)})
    ex = {k: v[:1].cuda() for k, v in example_inputs(mcfg).items()}
    args = (ex["x"], ex["mask"], ex["sigma_frames"], ex["text"])
    ref = {c: getattr(model.dit, c)(*args) for c in ("velocity", "features")}
    res["flops_per_call"] = dit_call_flops(mcfg)
    lat: dict = {}

    def bf16(fn):
        def call():
            with torch.autocast("cuda", dtype=torch.bfloat16):
                return fn(*args)
        return call

    for c in ("velocity", "features"):
        lat[f"torch_eager_bf16_{c}"] = _time(bf16(getattr(model.dit, c)), repeats)
    log(f"[gpu_check] {preset}: torch eager bf16 {lat['torch_eager_bf16_velocity']}")
    t0 = time.perf_counter()
    trt = make_backend(BackendConfig(name="tensorrt", precision=precision, cache_dir=cache_dir, builder_level=level),
                       model, progress=lambda m: log(m))
    res["tensorrt_setup_s"] = round(time.perf_counter() - t0, 1)
    res["tensorrt"] = trt.describe()
    for c in ("velocity", "features"):
        p = parity(getattr(trt, c)(*args), ref[c])
        res[f"parity_tensorrt_{c}"] = {**p, "precision": precision, "ok": within_bounds(p, precision)}
        lat[f"tensorrt_{c}"] = _time(lambda c=c: getattr(trt, c)(*args), repeats)
    log(f"[gpu_check] {preset}: tensorrt {lat['tensorrt_velocity']} parity {res['parity_tensorrt_velocity']}")
    res["latency"] = lat
    save()
    if compile:
        t0 = time.perf_counter()
        comp = {c: torch.compile(getattr(model.dit, c)) for c in ("velocity", "features")}
        bf16(comp["velocity"])()
        res["torch_compile_first_call_s"] = round(time.perf_counter() - t0, 1)
        for c in ("velocity", "features"):
            lat[f"torch_compile_bf16_{c}"] = _time(bf16(comp[c]), repeats)
    info = model_info(preset)
    res["replan"] = _compose_replan(model, mcfg, lat, repeats, info["flops"])
    res["model_info_flops"] = info["flops"]
    peak = bf16_peak(torch.cuda.get_device_name())
    n = mcfg.solver.feature_index
    for engine in ("tensorrt", "torch_eager_bf16") + (("torch_compile_bf16",) if compile else ()):
        ms = n * lat[f"{engine}_velocity"]["median_ms"] + lat[f"{engine}_features"]["median_ms"]
        flop = info["flops"]["video_pass"]
        res.setdefault("video_pass", {})[engine] = {
            "ms": round(ms, 3), "tflop_s": round(flop / (ms / 1e3) / 1e12, 2),
            "fraction_of_bf16_peak": round(flop / (ms / 1e3) / peak, 4) if peak else None}
    res["unguided_bf16_compute_limit_ms"] = round(res["replan"]["unguided_flop"] / peak * 1e3, 2) if peak else None
    save()
    res["parity_tensorrt_head"] = head_parity(model, trt)
    log(f"[gpu_check] {preset}: tensorrt head parity {res['parity_tensorrt_head']}")
    save()
    trt.close()
    from vam_bench.policy import achieved, bench_replan

    bkw = {"precision": precision, "builder_level": level}
    e2e = bench_replan(preset, max(3, repeats // 4), 0, "cuda", ("tensorrt", "torch"), "bf16", cache_dir, True,
                       model=model, backend_kw=bkw)
    e2e["achieved"] = {b: achieved(preset, e2e, b) for b in ("tensorrt", "torch")}
    res["end_to_end"] = e2e
    log(f"[gpu_check] {preset}: end to end (ms) {e2e['backends']['tensorrt']['replan_ms']} "
        f"torch bf16 {e2e['backends']['torch']['replan_ms']}")
    save()
    res["episode"] = episode_cost(model, BackendConfig(name="tensorrt", cache_dir=cache_dir, **bkw), "cuda",
                                  episode_replans)
    log(f"[gpu_check] {preset}: episode {res['episode']}")
    save()
    del model
    torch.cuda.empty_cache()
    return res


@torch.no_grad()
def head_parity(model, backend, cos_min: float = 0.999) -> dict:
    """A backend's head calls vs fp32 torch on one prefix and one Euler step, on the model's
    device: cosine and max error of the prefix keys, the velocity and TR; ok at cosine >= cos_min."""
    from vam_model.backends.torch_backend import TorchBackend

    mcfg, ref = model.cfg, TorchBackend(model)
    dev = next(model.parameters()).device
    g = torch.Generator().manual_seed(0)
    feats = torch.randn(1, mcfg.solver.latent_frames, mcfg.dit_tokens_per_frame, mcfg.dit.width, generator=g).to(dev)
    sigma_v, state = torch.full((1,), 0.883, device=dev), torch.zeros(1, mcfg.robot.proprio_dim, device=dev)
    actions = torch.randn(1, mcfg.robot.chunk, mcfg.robot.action_dim, generator=g).to(dev)
    sigma_a = torch.full((1,), 0.7, device=dev)
    c_ref, c_out = ref.head_prefix(feats, sigma_v, state), backend.head_prefix(feats, sigma_v, state)
    o_ref, o_out = ref.head_step(c_ref, actions, sigma_a), backend.head_step(c_ref, actions, sigma_a)
    out = {"keys": parity(c_out.keys, c_ref.keys), "velocity": parity(o_out.velocity, o_ref.velocity),
           "tr": parity(o_out.tr(), o_ref.tr()), "head": backend.describe().get("head")}
    out["ok"] = all(out[k]["cosine"] >= cos_min for k in ("keys", "velocity"))   # the bound (TF32 GEMMs)
    return out


def episode_cost(model, backend_cfg: BackendConfig, device: str, replans: int, seed: int = 1) -> dict:
    """One episode of `replans` replans on changing frames under tr_adaptive and under none (same
    backend, same frames): total time, replans with s > 0, and the tr_adaptive / none ratio."""
    from vam_bench.policy import bench_text_encoder
    from vam_model.guidance import GuidanceConfig
    from vam_model.policy import PolicyConfig, VamPolicy

    mcfg, r = model.cfg, model.cfg.robot
    rng = np.random.default_rng(seed)
    frames = [rng.integers(0, 256, (r.image_height, r.image_width, 3), dtype=np.uint8)
              for _ in range(replans)]
    proprio = np.zeros(r.proprio_dim, np.float32)
    backend, encoder = None, None
    out: dict = {"replans": replans, "backend": backend_cfg.name, "device": device}
    for schedule in ("none", "tr_adaptive"):
        cfg = PolicyConfig(device=device, return_attention=False, guidance=GuidanceConfig(schedule=schedule),
                           backend=backend_cfg)
        if encoder is None:
            encoder, out["text"] = bench_text_encoder(mcfg, cfg.text_encoder)
        p = VamPolicy(model, cfg, encoder, backend=backend)
        backend = p.backend
        p.reset("hand the block to the other arm")
        p.infer({"frame": frames[0], "proprio": proprio})                         # warm-up
        p.reset("hand the block to the other arm")                                # TR_0 from the episode's first replan
        sync_device(p.device)
        t0, s_pos, guided = time.perf_counter(), 0, 0
        for f in frames:
            o = p.infer({"frame": f, "proprio": proprio})
            s_pos += o["s"] > 0
            guided += len(o["branches_computed"]) > 1
        sync_device(p.device)
        out[schedule] = {"total_ms": round((time.perf_counter() - t0) * 1e3, 1), "replans_with_s_gt_0": int(s_pos),
                         "replans_with_guidance_branches": int(guided)}
    out["tr_adaptive_over_none"] = round(out["tr_adaptive"]["total_ms"] / out["none"]["total_ms"], 4)
    out["target"] = "<= 1.5"
    return out


def _compose_replan(model, mcfg, lat: dict, repeats: int, f: dict) -> dict:
    """Replan latency from measured stages (TensorRT video passes, torch bf16 tokenizer and head)."""
    r, steps = mcfg.robot, 10
    frames = torch.randint(0, 256, (1, 1, r.image_height, r.image_width, 3), dtype=torch.uint8, device="cuda")
    enc = _time(lambda: model.encode_frames(frames), repeats)["median_ms"]
    feats = torch.randn(1, mcfg.solver.latent_frames, mcfg.dit_tokens_per_frame, mcfg.dit.width, device="cuda")
    state = torch.zeros(1, r.proprio_dim, device="cuda")
    actions = torch.randn(1, r.chunk, r.action_dim, device="cuda")
    sig = torch.full((1,), 0.5, device="cuda")
    holder = {}

    def prefix():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            holder["cache"] = model.head.prefix_cache(model.head.embed_prefix(feats, mcfg.dit_grid, sig, state))

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            model.head.denoise_step(holder["cache"], actions, sig, probs_layer=mcfg.head.tr_layer)

    pre = _time(prefix, repeats)["median_ms"]
    eul = _time(step, repeats)["median_ms"]
    n = mcfg.solver.feature_index
    video = n * lat["tensorrt_velocity"]["median_ms"] + lat["tensorrt_features"]["median_ms"]
    # the plan branch rolls out T' frames: scale the T-frame pass by the token ratio (attention grows faster; a floor)
    plan_video = video * mcfg.solver.plan_latent_frames / mcfg.solver.latent_frames
    unguided = enc + video + pre + steps * eul
    guided = unguided + video + plan_video + 2 * pre + 2 * steps * eul
    return {"encode_ms": round(enc, 3), "video_pass_ms": round(video, 3), "plan_video_pass_ms_est": round(plan_video, 3),
            "head_prefix_ms": round(pre, 3), "euler_step_ms": round(eul, 3),
            "unguided_ms": round(unguided, 3), "guided_ms_est": round(guided, 3),
            "unguided_flop": f["video_pass"] + f["head_prefix"] + steps * f["euler_step"],
            "targets_h200_real": {"unguided_ms": 70, "guided_ms": 400}}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--preset", action="append", help="presets in order (default: real, libero)")
    p.add_argument("--precision", default="bf16", choices=["fp16", "bf16", "fp8"], help="TensorRT precision")
    p.add_argument("--builder-level", type=int, default=2, help="TensorRT optimisation level (2: faster builds)")
    p.add_argument("--repeats", type=int, default=20, help="timed calls per figure")
    p.add_argument("--no-compile", action="store_true", help="skip torch.compile (saves its compile time)")
    p.add_argument("--budget-s", type=float, default=540.0, help="stop before a preset once this is spent")
    p.add_argument("--cache-dir", default="~/.cache/vam_stack", help="ONNX and engine cache")
    p.add_argument("--episode-replans", type=int, default=20, help="replans of the tr_adaptive vs none episode")
    p.add_argument("--json", required=True, help="results JSON")


def run(args: argparse.Namespace) -> int:
    if not torch.cuda.is_available():
        raise SystemExit("gpu_check needs a CUDA GPU: torch.cuda.is_available() is False")
    t_start = time.perf_counter()
    out = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "bf16_peak_flop_s":
           bf16_peak(torch.cuda.get_device_name()), "presets": {}, "not_run": []}
    path = Path(args.json)
    path.parent.mkdir(parents=True, exist_ok=True)
    ok = True
    presets = args.preset or ["real", "libero"]

    def save():
        out["wall_s"] = round(time.perf_counter() - t_start, 1)
        write_json_atomic(path, json.loads(json.dumps(out, default=jsonable)))   # one whole JSON each time

    old = {s: signal.signal(s, _stop) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        for i, preset in enumerate(presets):
            spent = time.perf_counter() - t_start
            if i and spent > args.budget_s * 0.5:                       # a 2 B preset needs about half the budget
                out["not_run"] += presets[i:]
                break
            res = out["presets"][preset] = {}
            try:
                check_preset(preset, args.repeats, args.cache_dir, args.precision, args.builder_level,
                             not args.no_compile, res=res, save=save, episode_replans=args.episode_replans)
                ok &= all(res[f"parity_tensorrt_{c}"]["ok"] for c in ("velocity", "features"))
                ok &= res["parity_tensorrt_head"]["ok"]
            except Stopped:
                raise
            except Exception as e:  # noqa: BLE001 - recorded; the next preset still runs
                res["error"], ok = f"{type(e).__name__}: {e}", False
            save()
            print(f"[gpu_check] {preset}: {json.dumps(res.get('end_to_end', res.get('replan', res)), default=jsonable)}",
                  flush=True)
    except Stopped as e:
        out["stopped"] = f"{e} after {time.perf_counter() - t_start:.0f} s"
        ok = False
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        out["parity_ok"] = ok
        save()
    print(f"[gpu_check] wrote {path} in {time.perf_counter() - t_start:.0f} s; parity {'ok' if ok else 'FAIL'}"
          + (f"; stopped ({out['stopped']})" if "stopped" in out else ""))
    return 0 if ok else 1


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(p)
    return run(p.parse_args())


if __name__ == "__main__":
    raise SystemExit(main())
