"""Benchmark of closed-loop evaluation throughput: episodes per minute on the mocked LIBERO bridge.

The same episodes (goal suite, tasks 0.., bench seed 900: not a reporting seed) run under each
arm, one after the other in this process's run:
  torch x1     the sequential path `eval` ran before: torch, one process, every core's threads
  ort x1       onnxruntime (exported graphs, cached), one process
  torch xN     torch, N worker processes (vam_sim.parallel), cores / N threads each
  ort xN       onnxruntime, N worker processes
Each arm prints episodes per minute and its ratio to `torch x1`, plus its successes (the arms
must agree within noise: the backends hold a parity bound, the episodes draw the same noise).
The first onnxruntime arm includes no export time: graphs are exported before the clock starts.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from vam_stack.outputs import write_json_output

ARMS = (("torch", 1), ("onnxruntime", 1), ("torch", 0), ("onnxruntime", 0))   # 0 = the --workers value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--episodes", type=int, default=20, help="episodes per arm (default 20)")
    parser.add_argument("--preset", default="libero64", help="model preset with shipped weights (default libero64)")
    parser.add_argument("--guidance", default="none", help="guidance schedule of every episode (default none)")
    parser.add_argument("--workers", type=int, default=0, help="worker processes of the xN arms (0: one per core)")
    parser.add_argument("--max-steps", type=int, default=None, help="cap episode length (quick runs)")
    parser.add_argument("--json", default=None, help="also write the results as JSON here ('-' = stdout)")


def _arm(backend: str, workers: int, threads: int, args, out: Path) -> dict:
    from vam_sim.libero_mock.runner import SimConfig, SimRunner
    from vam_sim.parallel import run_parallel

    cfg = SimConfig(suite="goal", episodes=args.episodes, seed=900, guidance=args.guidance, preset=args.preset,
                    record=False, plots=False, max_steps=args.max_steps, backend=backend, device="cpu")
    t0 = time.perf_counter()
    if workers == 1:
        import torch

        torch.set_num_threads(threads)
        with SimRunner(cfg, out, policy=SimRunner.policy_for_run(
                None, args.preset, "libero64", args.guidance, 0, "cpu", backend, threads=threads)) as runner:
            t0 = time.perf_counter()                     # the policy build is not an episode
            eps = [runner.run_episode(i) for i in range(args.episodes)]
    else:
        eps = run_parallel([(cfg, out, i) for i in range(args.episodes)], workers, threads)
    wall = time.perf_counter() - t0
    return {"backend": backend, "workers": workers, "threads": threads, "episodes": len(eps),
            "successes": sum(bool(e["success"]) for e in eps), "steps": sum(e["steps"] for e in eps),
            "wall_s": round(wall, 2), "episodes_per_min": round(60 * len(eps) / wall, 1)}


def run(args: argparse.Namespace) -> int:
    from vam_sim.parallel import default_workers

    if args.episodes < 1 or args.workers < 0:
        print(f"error: need --episodes >= 1 and --workers >= 0, got {args.episodes}, {args.workers}", file=sys.stderr)
        return 2
    cores = default_workers()
    n = args.workers or cores
    if n < 2:
        print(f"error: this machine gives the process {cores} core(s); the xN arms need --workers >= 2", file=sys.stderr)
        return 2
    from vam_sim.libero_mock.runner import SimRunner

    # the shipped weights' graphs exported (or found in the cache) before any clock starts
    SimRunner.policy_for_run(None, args.preset, "libero64", args.guidance, 0, "cpu", "onnxruntime")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for k, (backend, workers) in enumerate(ARMS):
            w = workers or n
            threads = cores if w == 1 else max(1, cores // w)
            row = _arm(backend, w, threads, args, Path(tmp) / f"arm{k}")
            rows.append(row)
            base = rows[0]["episodes_per_min"]
            print(f"{backend:>12} x{w} ({threads} thread{'s' if threads > 1 else ''}): "
                  f"{row['episodes_per_min']:6.1f} episodes/min ({row['episodes_per_min'] / base:4.2f}x torch x1), "
                  f"{row['successes']}/{row['episodes']} solved, {row['wall_s']} s", flush=True)
    best = max(rows, key=lambda r: r["episodes_per_min"])
    target = 100.0
    print(f"fastest: {best['backend']} x{best['workers']} at {best['episodes_per_min']} episodes/min "
          f"({'MET' if best['episodes_per_min'] >= target else 'MISSED'}: target {target:.0f}/min on this machine)")
    write_json_output(args.json, {"cores": cores, "preset": args.preset, "guidance": args.guidance,
                                  "episodes_per_arm": args.episodes, "arms": rows, "target_episodes_per_min": target})
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
