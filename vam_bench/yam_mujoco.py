"""`vam-stack bench yam-mujoco`: physics and rendering time per 30 Hz tick of the simulated YAM.

Runs the scripted expert of a task through the safety filter (each target stamped with the simulated
time, as the simulator's expert path does) and the driver core on the simulated bus, for `--ticks` ticks, and times each part of a tick separately: physics (one
control period = 17 MuJoCo steps), the three offscreen views rendered alone, the camera
bridge tick (render + checks + stack), the driver step (bus read + write) and the expert's
IK. Prints p50/p99 per part and the equivalent rates; real time needs the sum under 33 ms.
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np

from vam_sim.yam_mujoco.tasks import TASKS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of the benchmark."""
    parser.add_argument("--task", choices=sorted(TASKS), default="handover", help="scene and expert to run")
    parser.add_argument("--ticks", type=int, default=150, help="30 Hz ticks to time (after the first, warm-up)")
    parser.add_argument("--json", default=None, help="also write the results as JSON here ('-' = stdout)")


def _stats(values_s: list[float]) -> dict[str, float]:
    a = np.asarray(values_s) * 1e3
    return {"p50_ms": round(float(np.percentile(a, 50)), 3), "p99_ms": round(float(np.percentile(a, 99)), 3),
            "mean_ms": round(float(a.mean()), 3)}


def bench(task: str, ticks: int) -> dict:
    """Time `ticks` ticks of the expert's closed loop; returns per-part statistics."""
    from vam_control.safety import SafetyFilter, load_safety_config

    from vam_sim.yam_mujoco.expert import make_expert
    from vam_sim.yam_mujoco.robot import build_sim_robot

    robot = build_sim_robot(task=task)
    sim = robot.sim
    parts: dict[str, list[float]] = {k: [] for k in ("physics", "render_3_views", "bridge_tick", "driver_step",
                                                      "expert_ik")}
    driver, bridge = robot.driver(), robot.bridge()
    safety = SafetyFilter(load_safety_config(), clock=sim.clock)
    try:
        bridge.connect()
        safety.reset(driver.start())
        expert = make_expert(sim)
        for k in range(ticks + 1):
            t = [time.perf_counter()]
            for view in sim.cfg.cameras:
                sim.render(view)
            t.append(time.perf_counter())
            bridge.tick()
            t.append(time.perf_counter())
            action = expert.act()
            t.append(time.perf_counter())
            driver.set_targets(safety.filter(action, stamp=sim.time, now=sim.time).sent, stamp=sim.time)
            driver.step()
            t.append(time.perf_counter())
            sim.step_control()
            t.append(time.perf_counter())
            if k == 0:
                continue  # the first render creates the GL context
            for name, i in (("render_3_views", 0), ("bridge_tick", 1), ("expert_ik", 2), ("driver_step", 3),
                            ("physics", 4)):
                parts[name].append(t[i + 1] - t[i])
    finally:
        driver.shutdown()
        bridge.close()
        robot.close()
    out = {name: _stats(v) for name, v in parts.items()}
    tick_ms = sum(out[k]["mean_ms"] for k in ("physics", "bridge_tick", "driver_step"))
    return {"task": task, "ticks": ticks, "mujoco_gl": os.environ.get("MUJOCO_GL", ""),
            "physics_steps_per_tick": sim.cfg.substeps, "views": list(sim.cfg.cameras),
            "view_size": [sim.cfg.camera_width, sim.cfg.camera_height], "parts": out,
            "three_view_fps": round(1e3 / max(out["render_3_views"]["mean_ms"], 1e-9), 1),
            "sim_tick_mean_ms": round(tick_ms, 3), "realtime_factor": round(1e3 / 30.0 / max(tick_ms, 1e-9), 2)}


def run(args: argparse.Namespace) -> int:
    if args.ticks < 1:
        raise SystemExit(f"--ticks must be >= 1, got {args.ticks}")
    res = bench(args.task, args.ticks)
    print(f"yam-mujoco ({res['task']}, MUJOCO_GL={res['mujoco_gl']}, {res['physics_steps_per_tick']} physics "
          f"steps per tick, {len(res['views'])} views of {res['view_size'][0]}x{res['view_size'][1]}):")
    for name, s in res["parts"].items():
        print(f"  {name:15s} p50 {s['p50_ms']:8.3f} ms   p99 {s['p99_ms']:8.3f} ms   mean {s['mean_ms']:8.3f} ms")
    print(f"  three views: {res['three_view_fps']} fps; physics + bridge + driver per tick "
          f"{res['sim_tick_mean_ms']:.1f} ms = {res['realtime_factor']}x real time (policy excluded)")
    if args.json is not None:
        from vam_stack.outputs import write_json_output
        write_json_output(args.json, res)
    return 0
