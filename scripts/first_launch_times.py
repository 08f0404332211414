#!/usr/bin/env python
"""The first launch on a fresh machine, measured (docs/bring_up.md, "The first launch"): seconds from
`ros2 launch vam_stack robot.launch.py sim:=mujoco preset:=yam64 instruction:=...` to the first joint
target and the first TR value, with an empty ONNX cache (the policy node exports its graphs inside its
start-up) and after the pre-export step (`vam-stack export cache --preset yam64`, timed too).

    python scripts/first_launch_times.py                     # both, under the real ros2 launch if present
    python scripts/first_launch_times.py --runner ros-graph  # the same processes without launch

A fresh cache: HOME points at an empty temporary folder for the whole run (the cache is
~/.cache/vam_stack of the user the nodes run as). Prints one JSON line per launch and a summary.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HANDOVER = "pick up the blue block with the left arm and hand it to the right arm"
ARGS = ["sim:=mujoco", "preset:=yam64", f"instruction:={HANDOVER}"]


def first_messages(timeout_s: float, t0: float) -> dict:
    """Seconds from t0 to the first /vam/joint_targets and /vam/tr (this process's own DDS reader)."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float32

    from vam_stack import ros

    rclpy.init()
    node = rclpy.create_node("first_launch_probe")
    seen: dict = {}
    node.create_subscription(JointState, "/vam/joint_targets",
                             lambda m: seen.setdefault("first_target_s", time.monotonic() - t0), ros.qos("joint_targets", True))
    node.create_subscription(Float32, "/vam/tr", lambda m: seen.setdefault("first_tr_s", time.monotonic() - t0),
                             ros.qos("tr", True))
    ex = SingleThreadedExecutor()
    ex.add_node(node)
    end = time.monotonic() + timeout_s
    while time.monotonic() < end and len(seen) < 2:
        ex.spin_once(timeout_sec=0.2)
    node.destroy_node()
    rclpy.try_shutdown()
    return seen


def launch_once(runner: str, env: dict, timeout_s: float, log: Path) -> dict:
    if runner == "ros2-launch":
        argv = [shutil.which("ros2"), "launch", "vam_stack", "robot.launch.py", *ARGS]
    else:
        argv = [sys.executable, "-m", "vam_cli.main", "ros-graph", "robot", *ARGS]
    out: dict = {}
    t0 = time.monotonic()
    with open(log, "w") as f:
        p = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    probe = threading.Thread(target=lambda: out.update(first_messages(timeout_s, t0)))
    probe.start()
    probe.join()
    t_stop = time.monotonic()
    os.killpg(p.pid, signal.SIGINT)                  # a terminal's Ctrl-C
    try:
        p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    text = log.read_text()
    out.update(exit_code=p.returncode, stop_s=round(time.monotonic() - t_stop, 2),
               exported="[onnx]" in text and " done in " in text, load=round(os.getloadavg()[0], 1))
    return {k: round(v, 1) if isinstance(v, float) else v for k, v in out.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runner", choices=("ros2-launch", "ros-graph"),
                    default="ros2-launch" if shutil.which("ros2") else "ros-graph")
    ap.add_argument("--timeout", type=float, default=1500.0, help="seconds to wait for the first TR")
    a = ap.parse_args()
    from vam_stack.process_graph import isolate_ros

    isolate_ros()
    home = Path(tempfile.mkdtemp(prefix="fresh_home_"))
    env = dict(os.environ, HOME=str(home))
    os.environ["HOME"] = str(home)
    results = {}
    try:
        results["cold"] = launch_once(a.runner, env, a.timeout, home / "cold.log")
        print(json.dumps({"launch": "empty cache", **results["cold"]}), flush=True)
        shutil.rmtree(home / ".cache", ignore_errors=True)
        t0 = time.monotonic()
        r = subprocess.run([sys.executable, "-m", "vam_cli.main", "export", "cache", "--preset", "yam64"], env=env,
                           capture_output=True, text=True)
        results["pre_export_s"] = round(time.monotonic() - t0, 1)
        print(r.stdout[-2000:], r.stderr[-2000:] if r.returncode else "", flush=True)
        results["warm"] = launch_once(a.runner, env, a.timeout, home / "warm.log")
        print(json.dumps({"launch": "after vam-stack export cache", **results["warm"]}), flush=True)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    print(json.dumps({"runner": a.runner, **results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
