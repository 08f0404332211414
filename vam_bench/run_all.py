"""`vam-stack bench all`: every benchmark in one run, one JSON.

Sections (each records its own wall time; a section that fails records its error and the run
goes on, so the JSON is always complete and says what broke):
  model_info  parameters, tokens and the FLOP model of the preset (`vam-stack model-info`)
  replan      replan latency by stage (encode = tokenizer, video pass per branch, head prefix
              per branch, Euler steps, TR, guidance) for unguided / TR-gated (s = 0) /
              guided (s = s_max) / flat, interleaved repeats
  head        10 Euler steps with the prefix KV cache vs without
  backends    DiT velocity / features: torch vs onnxruntime (+ tensorrt on CUDA), parity
  achieved    FLOP/s of the video pass, head prefix and Euler steps against the FLOP model
  camera, executor, driver, libero   the other cores' benches, each with its own JSON
  peak_memory process max RSS (and CUDA peak allocation on a GPU)
Every latency is reported as median and p90 over repeats. On shared machines compare
ratios; absolute times only on a GPU. `--quick` shrinks every repeat count so the whole run
takes a couple of minutes on 2 cores (the test suite runs it); `--preset libero/real` on a
CPU skips the replan (minutes per replan) unless `--full`.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import json
import os
import platform
import resource
import sys
import tempfile
import time
import traceback
from dataclasses import replace
from pathlib import Path

import numpy as np

from vam_stack.outputs import write_json_output, in_words

MODES = {  # name -> (guidance schedule, TR_0 forcing s): TR_0 far above TR gives s = 0, far below s = s_max
    "unguided": ("none", None),
    "gated_s0": ("tr_adaptive", 1e9),
    "guided_s_max": ("tr_adaptive", 1e-9),
    "flat": ("flat", None),
}


def _summ(xs: list[float]) -> dict:
    a = np.asarray(xs, dtype=np.float64)
    return {"median_ms": round(float(np.median(a)), 3), "p90_ms": round(float(np.percentile(a, 90)), 3), "n": int(a.size)}


def bench_replan(preset: str, backend: str, repeats: int, threads: int, cache_dir: str | None = None) -> dict:
    """Per-stage timing of `VamPolicy.infer` for each guidance mode (stage times in ms)."""
    from vam_model.backends import BackendConfig
    from vam_model.guidance import GuidanceConfig
    from vam_model.policy import PolicyConfig, build_policy

    base = build_policy(preset, config=PolicyConfig(threads=threads, return_attention=False,
                                                    backend=BackendConfig(name=backend, **(
                                                        {"cache_dir": cache_dir} if cache_dir else {}))))
    r = base.mcfg.robot
    rng = np.random.default_rng(0)
    obs = {"frame": rng.integers(0, 256, (r.image_height, r.image_width, 3), dtype=np.uint8),
           "proprio": np.zeros(r.proprio_dim, np.float32)}
    policies = {}
    for name, (schedule, _) in MODES.items():
        cfg = replace(base.cfg, guidance=GuidanceConfig(schedule=schedule))
        p = type(base)(base.model, cfg, base.text_encoder, checkpoint=base.checkpoint,
                       backend=base.backend)                             # one backend (session/engine) for all modes
        p.reset("put the black bowl on the plate")
        policies[name] = p
    stages: dict[str, dict[str, list[float]]] = {name: {} for name in MODES}
    branches = {}
    policies["unguided"].infer(obs)                                      # warm-up: the modes share model and backend
    for _ in range(repeats):
        for name, (_, tr0) in MODES.items():                             # interleaved: drift hits every mode alike
            p = policies[name]
            p.guidance.tr0 = tr0
            out = p.infer(obs)
            branches[name] = out["branches_computed"]
            for k, v in out["timing_ms"].items():
                stages[name].setdefault(k, []).append(v)
    res = {"backend": base.backend.describe(), "branches": branches, "euler_steps": base.cfg.euler_steps,
           "stages": {name: {k: _summ(v) for k, v in st.items()} for name, st in stages.items()}}
    med = {name: res["stages"][name]["total"]["median_ms"] for name in MODES}
    res["total_median_ms"] = med
    res["gated_over_unguided"] = round(med["gated_s0"] / med["unguided"], 4)
    res["guided_over_unguided"] = round(med["guided_s_max"] / med["unguided"], 4)
    res["flat_over_unguided"] = round(med["flat"] / med["unguided"], 4)
    return res


def bench_head(preset: str, repeats: int, steps: int = 10) -> dict:
    """Prefix + `steps` cached Euler evaluations vs `steps` full-sequence evaluations."""
    from vam_bench.policy import head_timings

    t, _ = head_timings(preset, repeats, steps)
    res = {k: _summ([x * 1e3 for x in v]) for k, v in t.items()}
    res["euler_steps"] = steps
    res["cache_speedup"] = round(res["uncached"]["median_ms"] / res["cached"]["median_ms"], 3)
    return res


def achieved_flops(info: dict, replan: dict) -> dict:
    """GFLOP/s of the unguided replan's stages against the model-info FLOP model."""
    f, st = info["flops"], replan["stages"]["unguided"]
    steps = replan["euler_steps"]

    def rate(flop, ms):
        return round(flop / (ms / 1e3) / 1e9, 3) if ms > 0 else None
    return {"video_pass_gflop_s": rate(f["video_pass"], st["video_cond"]["median_ms"]),
            "head_prefix_gflop_s": rate(f["head_prefix"], st["prefix_cond"]["median_ms"]),
            "euler_gflop_s": rate(f["euler_step"] * steps, st["euler"]["median_ms"]),
            "replan_flop": f["video_pass"] + f["head_prefix"] + steps * f["euler_step"],
            "replan_gflop_s": rate(f["video_pass"] + f["head_prefix"] + steps * f["euler_step"],
                                   st["total"]["median_ms"])}


def _sub_bench(module: str, argv: list[str], json_flag: bool = True) -> dict:
    """Run another bench's `run(args)` with `argv` (+ --json tmp); its JSON, or its printed text."""
    mod = importlib.import_module(module)
    parser = argparse.ArgumentParser()
    mod.add_arguments(parser)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.json"
        args = parser.parse_args(argv + (["--json", str(out)] if json_flag else []))
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            rc = mod.run(args)
        res = json.loads(out.read_text()) if json_flag and out.is_file() else {"text": buf.getvalue().splitlines()}
    res = res if isinstance(res, dict) else {"results": res}
    res["rc"] = int(rc or 0)
    return res


def _peak_memory() -> dict:
    out = {"max_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}
    import torch

    if torch.cuda.is_available():
        out["cuda_max_allocated_mb"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
    return out


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--preset", default="tiny", help="model preset for the policy/backend sections")
    p.add_argument("--backend", default="torch", choices=["torch", "onnxruntime", "tensorrt"],
                   help="DiT backend of the replan section")
    p.add_argument("--quick", action="store_true", help="few repeats: a couple of minutes on 2 cores")
    p.add_argument("--full", action="store_true", help="time replans on 2 B presets even without a GPU")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0 = default)")
    p.add_argument("--cache-dir", default=None, help="ONNX/engine cache of the backends section")
    p.add_argument("--skip", action="append", default=[], help="section to leave out (repeatable)")
    p.add_argument("--json", required=True, metavar="OUT", help="write the single results JSON here")


def run(args: argparse.Namespace) -> int:
    import torch

    from vam_model.networks.config import load_config

    q = args.quick
    reps = 2 if q else 10
    cfg = load_config(args.preset)
    big = cfg.dit.layers * cfg.dit.width > 10_000 and not torch.cuda.is_available() and not args.full
    result: dict = {"meta": {"preset": args.preset, "backend": args.backend, "quick": q, "repeats": reps,
                             "torch": torch.__version__, "python": platform.python_version(),
                             "cpu_count": os.cpu_count(),
                             "cuda": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
                             "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}}
    from vam_bench.backends import bench_backends, default_backends
    from vam_model.networks.info import model_info

    sections = {
        "model_info": lambda: model_info(args.preset),
        "replan": (lambda: {"skipped": "2 B DiT on a CPU: minutes per replan (use --full or a GPU)"}) if big else
                  (lambda: bench_replan(args.preset, args.backend, reps, args.threads, args.cache_dir)),
        "head": lambda: bench_head(args.preset, reps),
        "backends": lambda: bench_backends(args.preset, default_backends(), reps, args.threads,
                                           cache_dir=args.cache_dir, progress=lambda m: print(m, flush=True)),
        "camera": lambda: _sub_bench("vam_bench.camera", ["--ticks", "60" if q else "600"]),
        "executor": lambda: _sub_bench("vam_bench.executor",
                                       ["--seconds", "2" if q else "20", "--fake-policy-ms", "50", "--worker", "thread",
                                        "--rt-priority", "0"]),
        "driver": lambda: _sub_bench("vam_bench.driver", ["--ticks", "30" if q else "300",
                                                          "--seconds", "0.5" if q else "3"]),
        "libero": lambda: _sub_bench("vam_bench.libero", ["--episodes", "1"], json_flag=False),
    }
    t_all = time.perf_counter()
    for name, fn in sections.items():
        if name in args.skip:
            result[name] = {"skipped": "--skip"}
            continue
        print(f"[bench all] {name} ...", flush=True)
        t0 = time.perf_counter()
        try:
            result[name] = fn()
        except Exception as e:  # noqa: BLE001 - recorded in the JSON, the other sections still run
            result[name] = {"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc(limit=5)}
            print(f"[bench all] {name} FAILED: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        result[name]["wall_s"] = round(time.perf_counter() - t0, 2)
        _print_section(name, result[name])
    if "stages" in result.get("replan", {}) and "flops" in result.get("model_info", {}):
        result["achieved"] = achieved_flops(result["model_info"], result["replan"])
        print(f"[bench all] achieved {in_words(result['achieved'])}")
    result["peak_memory"] = _peak_memory()
    result["meta"]["wall_s"] = round(time.perf_counter() - t_all, 2)
    write_json_output(args.json, result)
    failed = [n for n, v in result.items() if isinstance(v, dict) and "error" in v]
    print(f"[bench all] {result['meta']['wall_s']:.1f} s, peak RSS {result['peak_memory']['max_rss_mb']} MB; "
          f"JSON {args.json}" + (f"; FAILED sections: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


def _print_section(name: str, r: dict) -> None:
    if "error" in r or "skipped" in r:
        return
    if name == "replan":
        for mode, st in r["stages"].items():
            parts = "  ".join(f"{k} {v['median_ms']:.1f}/{v['p90_ms']:.1f}" for k, v in st.items())
            print(f"  {mode:13s} (median/p90 ms) {parts}")
        print(f"  gated/unguided {r['gated_over_unguided']}  guided/unguided {r['guided_over_unguided']}  "
              f"flat/unguided {r['flat_over_unguided']}")
    elif name == "head":
        print(f"  head 10 steps: cached {r['cached']['median_ms']:.1f}/{r['cached']['p90_ms']:.1f} ms  "
              f"uncached {r['uncached']['median_ms']:.1f}/{r['uncached']['p90_ms']:.1f} ms  speed-up {r['cache_speedup']}")
    elif name == "backends":
        from vam_bench.backends import print_report

        print_report(r)
    elif name == "model_info":
        print(f"  FLOP model: {in_words(r['flops'])}")
