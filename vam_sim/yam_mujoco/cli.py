"""`vam-stack sim --robot yam-mujoco`: closed-loop episodes on the simulated bimanual YAM.

Reached through `vam_sim.cli` (the `sim` command), which hands over its parsed
arguments; this module reads the ones that apply (task instead of suite, preset default
`yam64`, the shipped robot-path policy) and writes the same outputs: summary.json, per-episode tr_trace.png, MCAP.
"""
from __future__ import annotations

import argparse
import sys
import time

from vam_stack.outputs import claim_out_dir, write_json_atomic
from vam_stack.recording import Interrupted, stop_on_signals

from ..episode import summarise, wilson_interval
from ..run_config import run_config_from_args
from .runner import YamRunConfig, YamSimRunner


def weights_notice(policy) -> str:
    if policy is None:
        return "policy: scripted expert (privileged simulator state)"
    if policy.checkpoint == "random":
        return (f"policy: {policy.mcfg.name} preset with RANDOM (untrained) weights -- its actions are noise "
                f"(the safety filter and driver clip them) and success is expected to be ~0 %")
    return f"policy: {policy.mcfg.name} preset, weights {policy.checkpoint}"


def furthest_counts(episodes: list[dict]) -> dict[str, int]:
    """How many episodes got furthest to each sub-goal, in the task's order ("none": not even the first)."""
    order = list(episodes[0]["milestones"]) if episodes else []
    counts = {m: 0 for m in ["none", *order]}
    for e in episodes:
        counts[e["furthest"] or "none"] += 1
    return counts


def run(args: argparse.Namespace) -> int:
    cfg = run_config_from_args(YamRunConfig, args, task=args.task or "handover",
                               sim_config=getattr(args, "sim_config", None),
                               executor=getattr(args, "executor", "lockstep"), rtc=getattr(args, "rtc", "off"))
    overwrite = getattr(args, "overwrite", False)
    out = claim_out_dir(args.out, overwrite)
    t0 = time.perf_counter()
    episodes: list[dict] = []
    started: list = []                  # the runner, once its checks have passed

    def write(complete: bool, **extra) -> None:
        n = len(episodes)
        summary = {"config": cfg.as_dict() | {"robot": "yam-mujoco"},
                   "weights": getattr(started[0].policy, "checkpoint", None) if started else None,
                   "episodes": episodes,
                   "success_rate": {cfg.task: round(sum(e["success"] for e in episodes) / n, 4)} if n else {},
                   "stats": summarise(episodes), "furthest": furthest_counts(episodes), "wall_s": round(time.perf_counter() - t0, 2)}
        write_json_atomic(out / "summary.json", summary | {"complete": complete} | extra)

    try:
        with stop_on_signals(), YamSimRunner(cfg, out, overwrite=overwrite) as runner:
            started.append(runner)
            print(weights_notice(runner.policy), flush=True)
            for i in range(cfg.episodes):
                ep = runner.run_episode(i)
                episodes.append(ep)
                write(False)
                how = "success" if ep["success"] else f"{ep['termination']} (furthest: {ep['furthest'] or 'none'})"
                print(f"  {ep['name']}: {how} in {ep['steps']} steps", flush=True)
        write(True)
    except KeyboardInterrupt as e:
        name = e.args[0] if isinstance(e, Interrupted) else "SIGINT"
        code = 128 + (e.signum if isinstance(e, Interrupted) else 2)
        if not started:
            print(f"\ninterrupted ({name}) before the first episode; nothing written", file=sys.stderr)
            return code
        write(False, interrupted=name)
        print(f"\ninterrupted ({name}) after {len(episodes)}/{cfg.episodes} episodes; kept "
              f"{out / 'summary.json'} (complete: false)", file=sys.stderr)
        return code
    k, n = sum(e["success"] for e in episodes), len(episodes)
    lo, hi = wilson_interval(k, n)
    stats = summarise(episodes)
    print(f"\nsuccess: {cfg.task} {100 * k / n:.0f} % ({k}/{n} episodes, 95 % interval {100 * lo:.0f}-{100 * hi:.0f} %)")
    print("furthest sub-goal per episode: " + ", ".join(f"{m} {c}" for m, c in furthest_counts(episodes).items()))
    if stats["replans"]:
        print(f"replans: {stats['replans']}, latency p50 {stats['latency_ms_p50']:.0f} ms, "
              f"p95 {stats['latency_ms_p95']:.0f} ms")
    for e in episodes:
        extra = f"  -> {out / e['tr_trace']}" if e.get("tr_trace") else ""
        clips = ", ".join(f"{k} {v}" for k, v in e["safety"].items()) or "none"
        tick = ", ".join(f"{k} {v:.1f}" for k, v in e["timing_ms"].items())
        print(f"  {e['name']}: safety clips: {clips}; per tick (ms): {tick}{extra}")
        if e.get("realtime"):
            rt = e["realtime"]
            print(f"    realtime: {rt['ticks']} ticks at {rt['achieved_hz']} Hz, missed {rt['missed_ticks']}, held "
                  f"{rt['held_ticks']}, late {rt['late_ticks']}, dropped chunks {rt['dropped_chunks']}, replan "
                  f"p50/p95 {rt['replan_ms_p50']}/{rt['replan_ms_p95']} ms")
    print(f"summary: {out / 'summary.json'}")
    if cfg.record:
        print(f"recording: {out / 'recording.mcap'} (ros2 bag play / Foxglove)")
    sys.stdout.flush()
    return 0
