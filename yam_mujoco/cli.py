"""`vam-stack sim --robot yam-mujoco`: closed-loop episodes on the simulated bimanual YAM.

Reached through `libero_bridge.cli` (the `sim` command), which hands over its parsed
arguments; this module reads the ones that apply (task instead of suite, preset default
`tiny_real`) and writes the same outputs: summary.json, per-episode tr_trace.png, MCAP.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from .runner import YamRunConfig, YamSimRunner


def weights_notice(policy) -> str:
    if policy is None:
        return "policy: scripted expert (privileged simulator state)"
    if policy.weights == "random":
        return (f"policy: {policy.mcfg.name} preset with RANDOM (untrained) weights -- its actions are noise "
                f"(the safety filter and driver clip them) and success is expected to be ~0 %")
    return f"policy: {policy.mcfg.name} preset, weights {policy.weights}"


def run(args: argparse.Namespace) -> int:
    from libero_bridge.runner import summarise

    cfg = YamRunConfig(task=args.task or "handover", episodes=args.episodes, seed=args.seed,
                       guidance=args.guidance, policy=args.policy, preset=args.preset or "tiny_real",
                       checkpoint=args.checkpoint, record=not args.no_record,
                       record_image_every=args.record_image_every, max_steps=args.max_steps,
                       sim_config=getattr(args, "sim_config", None))
    out = Path(args.out)
    t0 = time.perf_counter()
    episodes = []
    with YamSimRunner(cfg, out) as runner:
        print(weights_notice(runner.policy), flush=True)
        for i in range(cfg.episodes):
            ep = runner.run_episode(i)
            episodes.append(ep)
            print(f"  {ep['name']}: {'success' if ep['success'] else ep['termination']} in {ep['steps']} steps",
                  flush=True)
        weights = getattr(runner.policy, "weights", None)
    rate = round(sum(e["success"] for e in episodes) / len(episodes), 4)
    stats = summarise(episodes)
    summary = {"config": {k: getattr(cfg, k) for k in cfg.__dataclass_fields__} | {"robot": "yam-mujoco"},
               "weights": weights, "episodes": episodes, "success_rate": {cfg.task: rate}, "stats": stats,
               "wall_s": round(time.perf_counter() - t0, 2)}
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(f"\nsuccess: {cfg.task} {100 * rate:.0f} % ({sum(e['success'] for e in episodes)}/{len(episodes)} episodes)")
    if stats["replans"]:
        print(f"replans: {stats['replans']}, latency p50 {stats['latency_ms_p50']:.0f} ms, "
              f"p95 {stats['latency_ms_p95']:.0f} ms")
    for e in episodes:
        extra = f"  -> {out / e['tr_trace']}" if e.get("tr_trace") else ""
        print(f"  {e['name']}: safety clips {e['safety']}, per tick {e['timing_ms']} ms{extra}")
    print(f"summary: {out / 'summary.json'}")
    if cfg.record:
        print(f"recording: {out / 'recording.mcap'} (ros2 bag play / Foxglove)")
    sys.stdout.flush()
    return 0
