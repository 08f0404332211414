"""Benchmark of the mocked LIBERO environment: physics step, each camera, full step.

Prints milliseconds per call (median and 95th percentile over the measured calls). The
closed loop renders both cameras every step, so `render both` is the number that matters
next to the policy's replan latency. Run: `python -m vam_bench.libero --suite goal`.
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from vam_sim.libero_mock.env import make_env
from vam_sim.libero_mock.expert import expert_action
from vam_sim.libero_mock.tasks import SUITES


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--suite", default="goal", choices=SUITES, help="suite to benchmark")
    parser.add_argument("--task", type=int, default=0, help="task index 0..9")
    parser.add_argument("--episodes", type=int, default=3, help="expert episodes to time")
    parser.add_argument("--json", default=None, help="also write the results as JSON here ('-' = stdout)")


def _stats(samples: list[float]) -> str:
    a = np.asarray(samples) * 1e3
    return f"median {np.median(a):6.3f} ms  p95 {np.percentile(a, 95):6.3f} ms  (n={a.size})"


def _numbers(samples: list[float]) -> dict:
    a = np.asarray(samples) * 1e3
    return {"median_ms": round(float(np.median(a)), 4), "p95_ms": round(float(np.percentile(a, 95)), 4),
            "n": int(a.size)}


def run(args: argparse.Namespace) -> int:
    if args.episodes < 1 or not 0 <= args.task <= 9:
        print(f"error: need --episodes >= 1 and --task in 0..9, got {args.episodes}, {args.task}",
              file=sys.stderr)
        return 2
    from vam_sim.libero_mock.config import LiberoMockConfig

    mock = LiberoMockConfig.load()
    t_reset, t_phys, t_agent, t_wrist, t_both, t_step = [], [], [], [], [], []
    steps = successes = 0
    for ep in range(args.episodes):
        env = make_env(args.suite, args.task, ep, 0, render=True, cfg=mock)
        t0 = time.perf_counter()
        env.reset()
        t_reset.append(time.perf_counter() - t0)
        r = env._renderer
        while not env.done:
            a = expert_action(env)
            pts = r._world_points(env.world)
            t0 = time.perf_counter()
            r._draw_agent(env.world, pts)
            t1 = time.perf_counter()
            r._draw_wrist(env.world, pts)
            t_agent.append(t1 - t0)
            t_wrist.append(time.perf_counter() - t1)
            t0 = time.perf_counter()
            r.render(env.world)
            t_both.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            env.step(a)  # physics + predicate + phase label + both cameras
            t_step.append(time.perf_counter() - t0)
            steps += 1
        successes += int(env.termination == "success")
        blind = make_env(args.suite, args.task, ep, 0, render=False, cfg=mock)
        blind.reset()
        while not blind.done:
            a = expert_action(blind)
            t0 = time.perf_counter()
            blind.step(a)
            t_phys.append(time.perf_counter() - t0)
    print(f"mocked LIBERO, suite {args.suite} task {args.task}: {args.episodes} episodes, {steps} steps, "
          f"{successes} expert successes")
    print(f"  reset           {_stats(t_reset)}")
    print(f"  step, no render {_stats(t_phys)}")
    print(f"  agentview       {_stats(t_agent)}")
    print(f"  wrist           {_stats(t_wrist)}")
    print(f"  render both     {_stats(t_both)}")
    print(f"  env.step total  {_stats(t_step)}")
    if args.json:
        from vam_stack.outputs import write_json_output

        r = {"suite": args.suite, "task": args.task, "episodes": args.episodes, "steps": steps,
             "expert_successes": successes,
             **{k: _numbers(v) for k, v in (("reset", t_reset), ("step_no_render", t_phys), ("agentview", t_agent),
                                            ("wrist", t_wrist), ("render_both", t_both), ("step_total", t_step))}}
        write_json_output(args.json, r)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args())


if __name__ == "__main__":
    sys.exit(main())
