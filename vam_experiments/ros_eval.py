"""`vam-stack ros-eval`: episodes of the simulated YAM through the ROS graph, as processes over DDS.

Each episode starts `robot.launch.py sim:=mujoco` as its processes (`vam_stack.process_graph`:
yam_mujoco_sim with its camera bridge and driver, the policy node with its policy in a child
process, the TR monitor), with a params file that is the shipped one plus the episode's seeds:
the scene is the one `vam-stack sim --robot yam-mujoco` builds for the same episode and seed id
(`episode_seed`), and the policy's noise seed is that episode's `policy_seed`. The episode runs
on the wall clock from the policy's first replan for the task's time limit (handover: 750 ticks
= 25 s); it succeeds when the world's diagnostics report the task solved. Then every process is
stopped with SIGINT and must exit 0. Writes `results.json` (per episode: solved, time to solve,
replans and their latency, exit codes) after every episode and prints the success rate with its
95 % interval. The graph runs on a domain of its own, this machine only.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import yaml

from vam_stack.names import GUIDANCE_SCHEDULES, YAM_TASKS
from vam_stack.outputs import claim_out_dir, write_json_atomic, in_words


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--task", default="handover", choices=YAM_TASKS)
    p.add_argument("--episodes", type=int, default=10, help="episodes 0..N-1 of the seed id")
    p.add_argument("--seed", type=int, default=0, help="seed id (the same episodes as vam-stack sim's)")
    p.add_argument("--guidance", default="none", choices=GUIDANCE_SCHEDULES)
    p.add_argument("--preset", default="yam64")
    p.add_argument("--checkpoint", default="", help="empty: models/<preset>.safetensors")
    p.add_argument("--no-warm-up", action="store_true", help="configure the policy node without its warm-up "
                   "(to measure what the warm-up saves on the first replan)")
    p.add_argument("--out", default="runs/ros_eval", help="results folder")
    p.add_argument("--overwrite", action="store_true", help="write over a non-empty --out")


def run_episode(args, index: int, out: Path) -> dict:
    from vam_stack.probe import Probe
    from vam_sim.yam_mujoco.runner import episode_seed, policy_seed
    from vam_sim.yam_mujoco.tasks import TASKS
    from vam_stack.paths import config_dir
    from vam_stack.process_graph import ProcessGraph

    task = TASKS[args.task]
    ep_seed = episode_seed(args.task, index, args.seed)
    params = yaml.safe_load((config_dir() / "vam_stack.params.yaml").read_text())
    params["vam_policy_node"]["ros__parameters"]["seed"] = int(policy_seed(ep_seed))
    params["vam_policy_node"]["ros__parameters"]["warm_up"] = not args.no_warm_up
    params["yam_mujoco_sim"] = {"ros__parameters": {"seed": int(ep_seed)}}
    params_file = out / f"e{index:03d}" / "params.yaml"
    params_file.parent.mkdir(parents=True, exist_ok=True)
    params_file.write_text(yaml.safe_dump(params))
    limit_s = task.max_steps / 30.0
    graph = ProcessGraph("robot", {"sim": "mujoco", "sim_task": args.task, "preset": args.preset,
                                   "checkpoint": args.checkpoint, "guidance": args.guidance,
                                   "instruction": task.instruction, "params_file": str(params_file),
                                   "use_rviz": "false"}, log_dir=params_file.parent / "logs")
    result = {"episode": index, "episode_seed": int(ep_seed), "policy_seed": int(policy_seed(ep_seed)),
              "success": False, "solved_after_s": None}
    with graph, Probe() as probe:
        end = time.monotonic() + 300
        while not probe.telemetry and time.monotonic() < end and not graph.exited():
            time.sleep(0.05)
        if not probe.telemetry:
            raise RuntimeError(f"episode {index}: no replan within 300 s; exited {graph.exited()}; "
                               f"logs in {graph.log_dir}")
        t0 = time.monotonic()
        while time.monotonic() - t0 < limit_s and not graph.exited():
            with probe.lock:
                world = dict(probe.status.get("yam_mujoco_sim: world", {}).get("values", {}))
            if world.get("task_solved") == "true":   # (diagnostics values are text; vam_stack.msgs writes bools so)
                result.update(success=True, solved_after_s=round(time.monotonic() - t0, 2))
                break
            time.sleep(0.1)
        tel = list(probe.telemetry)
        result["exit_codes"] = graph.stop()
    lat = [t["latency_ms"] for t in tel]
    result.update(replans=len(tel), first_replan_ms=lat[0] if lat else None,
                  replan_ms_p50=float(np.median(lat)) if lat else None,
                  replan_ms_p95=float(np.percentile(lat, 95)) if lat else None)
    return result


def run(args: argparse.Namespace) -> int:
    from vam_sim.episode import wilson_interval
    from vam_stack.process_graph import isolate_ros

    if args.episodes < 1:
        raise ValueError(f"--episodes must be >= 1, got {args.episodes!r}")
    out = Path(args.out)
    claim_out_dir(out, args.overwrite)
    domain = isolate_ros()
    episodes = []
    for i in range(args.episodes):
        r = run_episode(args, i, out)
        episodes.append(r)
        k, n = sum(e["success"] for e in episodes), len(episodes)
        lo, hi = wilson_interval(k, n)
        outcome = f"solved after {r['solved_after_s']:.1f} s" if r["success"] else "not solved"
        print(f"episode {i} (seed {r['episode_seed']}): {outcome}; {r['replans']} replans, first "
              f"{r['first_replan_ms']:.0f} ms, p50 {r['replan_ms_p50']:.0f} ms; exit codes {in_words(r['exit_codes'])}  "
              f"[{k}/{n} = {100 * k / n:.0f} % [{100 * lo:.0f}-{100 * hi:.0f}]]", flush=True)
        write_json_atomic(out / "results.json", {"task": args.task, "seed": args.seed, "guidance": args.guidance,
                                                 "warm_up": not args.no_warm_up,
                                                 "preset": args.preset, "ros_domain_id": domain,
                                                 "successes": k, "episodes": n, "ci95": [lo, hi],
                                                 "per_episode": episodes})
    bad = [e["episode"] for e in episodes if any(c != 0 for c in e["exit_codes"].values())]
    if bad:
        print(f"episodes {bad}: a process did not exit 0 (logs under {out})")
    return 1 if bad else 0
