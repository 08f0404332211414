"""`vam-stack bench ros`: the ROS 2 path over real DDS between processes, policy inferring.

Starts the robot launch file's processes with synthetic cameras and the emulated arm
(`robot.launch.py preset:=tiny_real camera_config:=cameras_synthetic.yaml
use_emulated_driver:=true instruction:=...`: the stacked 672x168 rgb8 image at 30 Hz, 14 joint
targets at 30 Hz, the policy replanning in its child process all along), each node as its own
process from its console script (`vam_stack.process_graph`). After a warm-up it measures over
`--seconds`, from what the nodes themselves report on /diagnostics (counters read at both ends
of the window, so the window's own numbers):
- camera -> policy: latency p50/p99 of each stacked frame at the policy node behind its capture
  stamp, and the drop rate (frames the bridge published that the policy did not receive);
- policy -> driver: /vam/joint_targets period p50, jitter p99 (|period - 33.3 ms|) and missed
  ticks at the driver, and its latency behind the targets' stamps;
- e-stop: `--estops` times, a volatile publish (as `ros2 topic pub`) -> the driver's hold
  (its "e-stop: holding" line on /rosout, stamped by the driver), p50/max; each followed by a
  release.
The replans during the window (count, latency p50) show the policy was inferring; the CPU
each node process used over the window (its children included: the policy's child process)
shows what competes for the cores. Numbers are for this machine: the graph and this process
share its cores.
"""
from __future__ import annotations

import argparse
import math
import time

import numpy as np

from vam_stack.outputs import write_json_output

INSTRUCTION = "fold the towel"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seconds", type=float, default=30.0, help="measurement window after the warm-up [s]")
    parser.add_argument("--warmup", type=float, default=10.0, help="seconds of replanning before the window [s]")
    parser.add_argument("--estops", type=int, default=20, help="e-stop latch/release cycles to time")
    parser.add_argument("--preset", default="tiny_real", help="policy preset with the real robot's geometry")
    parser.add_argument("--domain-id", type=int, default=None, help="ROS_DOMAIN_ID of the bench's graph (default: a "
                        "random one in 1-100; discovery is limited to this machine either way)")
    parser.add_argument("--log-dir", default=None, help="the processes' logs (default: a temporary folder)")
    parser.add_argument("--json", default=None, metavar="PATH", help="also write the results as JSON here ('-' = stdout)")


def _wait(cond, timeout: float, what: str, graph) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return
        if graph.exited():
            raise RuntimeError(f"{what}: a process exited: {graph.exited()} (logs in {graph.log_dir})")
        time.sleep(0.05)
    raise TimeoutError(f"{what} not within {timeout:.0f} s (logs in {graph.log_dir})")


def measure(args: argparse.Namespace) -> dict:
    from vam_bench.node import Probe
    from vam_stack.process_graph import ProcessGraph, isolate_ros

    for name in ("seconds", "warmup"):
        if not (math.isfinite(getattr(args, name)) and getattr(args, name) > 0):
            raise ValueError(f"--{name} must be > 0, got {getattr(args, name)!r}")
    if args.estops < 1:
        raise ValueError(f"--estops must be >= 1, got {args.estops!r}")
    domain = isolate_ros(args.domain_id)     # never on a real robot's domain
    graph = ProcessGraph("robot", {"preset": args.preset, "camera_config": "cameras_synthetic.yaml",
                                   "use_emulated_driver": "true", "instruction": INSTRUCTION, "use_rviz": "false"},
                         log_dir=args.log_dir)
    with graph, Probe() as probe:
        _wait(lambda: len(probe.telemetry) >= 2, 180, "first replans", graph)
        time.sleep(args.warmup)
        statuses = ("vam_policy_node: camera input", "yam_driver: driver", "camera_bridge: stacked")
        before = {s: probe.values(s) for s in statuses}
        n_tel = len(probe.telemetry)
        cpu0, t0 = graph.cpu_seconds(), time.monotonic()
        time.sleep(args.seconds)
        window = time.monotonic() - t0
        cpu1 = graph.cpu_seconds()
        after = {s: probe.values(s) for s in before}
        tel = probe.telemetry[n_tel:]
        cam_b, cam_a = before["vam_policy_node: camera input"], after["vam_policy_node: camera input"]
        drv_b, drv_a = before["yam_driver: driver"], after["yam_driver: driver"]
        published = after["camera_bridge: stacked"]["published"] - before["camera_bridge: stacked"]["published"]
        received = cam_a["frames_received"] - cam_b["frames_received"]
        latencies = []
        for _ in range(args.estops):
            t_pub = probe.estop(True)
            _wait(lambda: probe.log_after("yam_driver", "e-stop: holding", t_pub - 0.001) is not None, 5,
                  "the driver's e-stop hold", graph)
            latencies.append(probe.log_after("yam_driver", "e-stop: holding", t_pub - 0.001) - t_pub)
            t_rel = probe.estop(False)
            _wait(lambda: probe.log_after("yam_driver", "e-stop released", t_rel - 0.001) is not None, 5,
                  "the driver's e-stop release", graph)
            time.sleep(0.2)
        codes = graph.stop()
    lat_ms = np.array(latencies) * 1e3
    return {
        "preset": args.preset, "window_s": round(window, 2), "ros_domain_id": domain,
        "camera_to_policy": {"published": int(published), "received": int(received),
                             # the two counters come from two processes' diagnostics, read up to a period
                             # apart: a frame can count as received but not yet as published (rate >= 0)
                             "drop_rate": max(0.0, 1.0 - received / published) if published else float("nan"),
                             "latency_ms_p50": cam_a["frames_latency_ms_p50"],
                             "latency_ms_p99": cam_a["frames_latency_ms_p99"],
                             "missed": int(cam_a["frames_missed"] - cam_b["frames_missed"])},
        "policy_to_driver": {"received": int(drv_a["targets_received"] - drv_b["targets_received"]),
                             "rate_hz": (drv_a["targets_received"] - drv_b["targets_received"]) / window,
                             "period_ms_p50": drv_a["targets_period_ms_p50"],
                             "jitter_ms_p99": drv_a["targets_jitter_ms_p99"],
                             "missed_ticks": int(drv_a["targets_missed"] - drv_b["targets_missed"]),
                             "latency_ms_p50": drv_a["targets_latency_ms_p50"],
                             "latency_ms_p99": drv_a["targets_latency_ms_p99"]},
        "estop_to_driver_hold": {"n": int(lat_ms.size), "ms_p50": float(np.median(lat_ms)),
                                 "ms_max": float(lat_ms.max())},
        "replans": {"n": len(tel), "latency_ms_p50": float(np.median([t["latency_ms"] for t in tel])) if tel else None},
        "cpu_percent": {k: (100.0 * (cpu1[k] - cpu0[k]) / window if cpu0[k] is not None and cpu1[k] is not None
                            else None) for k in cpu0},     # of one core, over the window, children included
        "exit_codes": codes,
    }


def run(args: argparse.Namespace) -> int:
    r = measure(args)
    c, d, e = r["camera_to_policy"], r["policy_to_driver"], r["estop_to_driver_hold"]
    print(f"ROS graph over DDS ({len(r['exit_codes'])} node processes + this one; preset {r['preset']}; "
          f"window {r['window_s']} s, {r['replans']['n']} replans, p50 {r['replans']['latency_ms_p50']:.0f} ms)")
    print(f"  camera -> policy   stacked 672x168 rgb8 at 30 Hz: latency p50 {c['latency_ms_p50']:.1f} ms, "
          f"p99 {c['latency_ms_p99']:.1f} ms; received {c['received']} of {c['published']} "
          f"(drop rate {100 * c['drop_rate']:.2f} %)")
    print(f"  policy -> driver   joint targets: {d['rate_hz']:.2f} Hz, period p50 {d['period_ms_p50']:.2f} ms, "
          f"jitter p99 {d['jitter_ms_p99']:.2f} ms, missed ticks {d['missed_ticks']}, "
          f"latency p50/p99 {d['latency_ms_p50']:.1f}/{d['latency_ms_p99']:.1f} ms")
    print(f"  e-stop -> driver hold: p50 {e['ms_p50']:.1f} ms, max {e['ms_max']:.1f} ms (n={e['n']})")
    cpu = ", ".join(f"{k} {v:.0f} %" for k, v in r["cpu_percent"].items() if v is not None)
    print(f"  CPU (of one core, children included): {cpu}")
    print(f"  exit codes: {r['exit_codes']}")
    if args.json is not None:
        write_json_output(args.json, r)
    return 0 if all(v == 0 for v in r["exit_codes"].values()) else 1
