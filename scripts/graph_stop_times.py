#!/usr/bin/env python
"""How long each launch file's processes take to exit after a terminal's Ctrl-C, as `ros2 launch`
is stopped (SIGINT to the whole process group; launch sends SIGTERM 5 s later): `--stops` runs
of each graph, each stopped mid-inference (the policy's worker busy; record: the teleoperator
moving the arm), with every exit code, p50 and max of the time to exit, the driver's refused
targets (/diagnostics refused_*) and the TR values the monitor published per second of running.

    python scripts/graph_stop_times.py --stops 10            # robot (sim:=mujoco preset:=yam64), sim, record
    python scripts/graph_stop_times.py --graphs sim --stops 3
    python scripts/graph_stop_times.py --stops 5 --load 2     # two busy processes beside the graph

Each stop line and the summary carry the 1-minute load average at the stop.

The graphs run on a ROS domain of their own (random, localhost discovery).
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time

from vam_stack.process_graph import ProcessGraph, driver_refusals, isolate_ros, wait_until_busy

HANDOVER = "pick up the blue block with the left arm and hand it to the right arm"
GRAPHS = {
    "robot": ("robot", {"sim": "mujoco", "preset": "yam64", "instruction": HANDOVER}),
    "sim": ("sim", {}),
    "record": ("record", {"teleop": "expert"}),
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graphs", nargs="+", choices=list(GRAPHS), default=list(GRAPHS))
    ap.add_argument("--stops", type=int, default=10)
    ap.add_argument("--timeout", type=float, default=240.0, help="seconds a graph may take to get busy")
    ap.add_argument("--run-s", type=float, default=0.0,
                    help="let each graph run this long after its first TR values before the stop (the TR rate)")
    ap.add_argument("--load", type=int, default=0, help="CPU-bound processes to run beside the graphs (other work)")
    a = ap.parse_args()
    isolate_ros()
    import os
    import subprocess
    import sys

    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(a.load)]
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray
    from rclpy.executors import SingleThreadedExecutor
    from std_msgs.msg import Float32
    from std_srvs.srv import Trigger

    rclpy.init()
    node = rclpy.create_node("graph_stop_times")
    seen = {"tr": 0, "diag": []}
    node.create_subscription(Float32, "/vam/tr", lambda m: seen.__setitem__("tr", seen["tr"] + 1), 100)
    from vam_stack import ros

    node.create_subscription(DiagnosticArray, "/diagnostics",
                             lambda m: seen["diag"].append(ros.from_ros(m, "diagnostic_msgs/msg/DiagnosticArray")), 100)
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    done = threading.Event()

    def spin() -> None:
        while not done.is_set():
            executor.spin_once(timeout_sec=0.1)
    spinner = threading.Thread(target=spin, daemon=True)
    spinner.start()
    summary = {}
    for name in a.graphs:
        launch, args = GRAPHS[name]
        times, worst, refused_total, tr_rates, bad, loads = [], [], {}, [], [], []
        for i in range(a.stops):
            seen["tr"], seen["diag"] = 0, []
            graph = ProcessGraph(launch, args, log_dir=tempfile.mkdtemp(prefix=f"stop_{name}_{i}_"))
            graph.start()
            t_start = time.monotonic()
            try:
                if name == "record":
                    client = node.create_client(Trigger, "/yam_mujoco_sim/start_teleop")
                    end = time.monotonic() + a.timeout
                    ok = False
                    while time.monotonic() < end and not ok:
                        if client.wait_for_service(timeout_sec=1.0):
                            fut = client.call_async(Trigger.Request())
                            while not fut.done() and time.monotonic() < end:
                                time.sleep(0.05)
                            ok = fut.done() and fut.result().success
                        if not ok:
                            time.sleep(0.5)
                    node.destroy_client(client)
                    time.sleep(3.0)                     # the teleoperator moves the arm
                    busy = ok
                else:
                    end = time.monotonic() + a.timeout
                    while seen["tr"] < 2 and time.monotonic() < end:
                        time.sleep(0.1)
                    t_first = time.monotonic()
                    n_first = seen["tr"]
                    time.sleep(a.run_s)
                    busy = wait_until_busy(graph.pid("vam_policy_node"), timeout_s=max(1.0, end - time.monotonic()))
                    ran = time.monotonic() - t_first
                    if ran > 0.5:
                        tr_rates.append((seen["tr"] - n_first) / ran)
            finally:
                refused = driver_refusals(seen["diag"])
                loads.append(os.getloadavg()[0])
                codes = graph.stop()
            stop = dict(graph.stop_times)
            times += list(stop.values())
            worst.append(max(stop.values()))
            for k, v in refused.items():
                refused_total[k] = refused_total.get(k, 0) + v
            if not busy or any(c != 0 for c in codes.values()):
                bad.append((i, busy, codes))
            print(f"{name} #{i}: {'mid-inference' if busy else 'NOT BUSY'} after {time.monotonic() - t_start:.0f} s; "
                  f"exit codes {codes}; exit after SIGINT {({k: round(v, 2) for k, v in stop.items()})}; "
                  f"refused {refused or 'n/a'}; load {loads[-1]:.1f}", flush=True)
        summary[name] = (statistics.median(worst), max(worst), statistics.median(times), refused_total, tr_rates, bad,
                         (min(loads), max(loads)))
    print("\ngraph   stops  p50 (slowest process)  max   p50 (every process)  refused targets   TR/s while running  load")
    for name, (p50, mx, p50_all, refused, rates, bad, (lo, hi)) in summary.items():
        rate = f"{statistics.median(rates):.2f}" if rates else "n/a"
        print(f"{name:7s} {a.stops:5d}  {p50:8.2f} s            {mx:5.2f} s {p50_all:8.2f} s        "
              f"{sum(refused.values()) if refused else 'n/a'!s:16s} {rate:18s} {lo:.1f}-{hi:.1f}"
              + (f"   PROBLEMS: {bad}" if bad else ""))
    for h in hogs:
        h.kill()
        h.wait()
    done.set()
    spinner.join(2.0)
    executor.shutdown()
    node.destroy_node()
    rclpy.try_shutdown()
    return 1 if any(s[5] for s in summary.values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
