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
- the latency budget, stage by stage (p50/p99 of each frame's own stage times, which the camera
  bridge and the policy node note per frame and send on `vam_stack.latency`'s debug topic, paired
  here by header stamp; wall clock, one machine): capture -> host arrival -> stacked -> published
  -> received by the policy node -> in the policy's input; side by side, in the same window, a
  bare rclpy transfer of the same image (raw or its JPEG) between two processes (a publisher
  process of this bench -> this process), publish call -> callback; targets: tick deadline ->
  published (the executor's tick lateness), published -> received by the driver, the driver's bus
  write (its I/O time per tick).
`--transport compressed` runs the graph on the JPEG stacked topic (camera_bridge publish_compressed,
policy image_transport:=compressed, through a params file written next to the logs); `--graph
mujoco` runs `robot.launch.py sim:=mujoco preset:=yam64` (the MuJoCo world, its camera bridge and
driver in one process) instead of the synthetic cameras and the emulated arm.
Before the graph starts, this process times one joint state built and read the way the nodes
did before and do now (`vam_bench.messages`; `--messages-only` prints just that).
The replans during the window (count, latency p50) show the policy was inferring; the CPU
each node process used over the window (its children included: the policy's child process)
shows what competes for the cores. Numbers are for this machine: the graph and this process
share its cores.
"""
from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from vam_bench.messages import format_costs, message_costs
from vam_stack.latency import FLUSH_PERIOD_S
from vam_stack.outputs import write_json_output
from vam_stack.realtime import HostFreezeProbe

INSTRUCTION = "fold the towel"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seconds", type=float, default=30.0, help="measurement window after the warm-up [s]")
    parser.add_argument("--warmup", type=float, default=10.0, help="seconds of replanning before the window [s]")
    parser.add_argument("--estops", type=int, default=20, help="e-stop latch/release cycles to time")
    parser.add_argument("--preset", default=None, help="policy preset with the real robot's geometry (default: "
                        "tiny_real; yam64 with --graph mujoco)")
    parser.add_argument("--transport", choices=("raw", "compressed"), default="raw",
                        help="the stacked frame to the policy: raw rgb8 or its JPEG (image_transport's compressed)")
    parser.add_argument("--graph", choices=("robot", "mujoco"), default="robot",
                        help="robot: synthetic cameras + emulated arm; mujoco: the simulated YAM (sim:=mujoco)")
    parser.add_argument("--domain-id", type=int, default=None, help="ROS_DOMAIN_ID of the bench's graph (default: a "
                        "random one in 1-100; discovery is limited to this machine either way)")
    parser.add_argument("--log-dir", default=None, help="the processes' logs (default: a temporary folder)")
    parser.add_argument("--json", default=None, metavar="PATH", help="also write the results as JSON here ('-' = stdout)")
    parser.add_argument("--messages-only", action="store_true", help="only the per-message cost in this process "
                        "(vam_bench.messages: a joint state built and read before and after rclpy_msgs); no graph")


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
    from vam_stack.probe import Probe
    from vam_stack.process_graph import ProcessGraph, isolate_ros

    _check_args(args)
    domain = isolate_ros(args.domain_id)     # never on a real robot's domain
    preset = args.preset or ("yam64" if args.graph == "mujoco" else "tiny_real")
    launch = {"preset": preset, "instruction": INSTRUCTION, "use_rviz": "false"}
    if args.graph == "mujoco":
        launch.update(sim="mujoco")
    else:
        launch.update(camera_config="cameras_synthetic.yaml", use_emulated_driver="true")
    tmp = tempfile.TemporaryDirectory(prefix="vam_bench_ros_")
    if args.transport == "compressed":
        launch["params_file"] = compressed_params(Path(tmp.name))
    graph = ProcessGraph("robot", launch, log_dir=args.log_dir)
    with tmp, graph, Probe() as probe, bare_transfer(args.transport, graph.log_dir):
        _wait(lambda: len(probe.telemetry) >= 2, 180, "first replans", graph)
        time.sleep(args.warmup)
        probe.take_latency()
        bare_before = probe.bare_received
        statuses = ("vam_policy_node: camera input", "yam_driver: driver", "camera_bridge: stacked")
        before = {s: probe.values(s) for s in statuses}
        n_tel = len(probe.telemetry)
        cpu0, t0, t0_wall = graph.cpu_seconds(), time.monotonic(), time.time_ns()
        with HostFreezeProbe() as host:           # the host's own freezes of this machine's CPUs, beside the window
            time.sleep(args.seconds)
        window = time.monotonic() - t0
        cpu1 = graph.cpu_seconds()
        after = {s: probe.values(s) for s in before}
        executor = probe.values("vam_policy_node: executor")
        time.sleep(2 * FLUSH_PERIOD_S)                 # the window's last stage records
        records, bare = probe.take_latency()
        bare_sent = probe.bare_received - bare_before
        tel = probe.telemetry[n_tel:]
        cam_b, cam_a = before["vam_policy_node: camera input"], after["vam_policy_node: camera input"]
        drv_b, drv_a = before["yam_driver: driver"], after["yam_driver: driver"]
        published = _delta(after["camera_bridge: stacked"], before["camera_bridge: stacked"], "published")
        received = _delta(cam_a, cam_b, "frames_received")
        latencies, problems = [], []
        missed_holds = missed_releases = 0
        for _ in range(args.estops):
            t_pub = probe.estop(True)
            try:
                _wait(lambda: probe.log_after("yam_driver", "e-stop: holding", t_pub - 0.001) is not None, 5,
                      "the driver's e-stop hold", graph)
                latencies.append(probe.log_after("yam_driver", "e-stop: holding", t_pub - 0.001) - t_pub)
            except TimeoutError:        # a loaded machine: counted, and the next cycle tried
                missed_holds += 1
            t_rel = probe.estop(False)
            try:
                _wait(lambda: probe.log_after("yam_driver", "e-stop released", t_rel - 0.001) is not None, 5,
                      "the driver's e-stop release", graph)
            except TimeoutError:
                missed_releases += 1
            time.sleep(0.2)
        codes = graph.stop()
    problems += window_problems(args.estops, missed_holds, missed_releases, after)
    lat_ms = np.array(latencies) * 1e3
    return {
        "preset": preset, "graph": args.graph, "transport": args.transport,
        "window_s": round(window, 2), "ros_domain_id": domain,
        "stages": stage_table(records.get("camera_bridge", []), records.get("vam_policy_node", []), bare,
                              args.transport, t0_wall, window,
                              targets={"tick deadline -> tick thread woke": (executor.get("p50_jitter_ms"),
                                                                             executor.get("p99_jitter_ms")),
                                       "tick's work, publish included (mean, p99)": (
                                           executor.get("overhead_us", math.nan) / 1e3,
                                           executor.get("p99_overhead_us", math.nan) / 1e3),
                                       "published -> received by the driver": (drv_a.get("targets_latency_ms_p50"),
                                                                               drv_a.get("targets_latency_ms_p99")),
                                       "driver's bus write (I/O per tick)": (drv_a.get("io_p50_ms"),
                                                                             drv_a.get("io_p99_ms"))}),
        "bare_transfer": {"received": int(bare_sent), "kind": args.transport},
        "camera_to_policy": {"published": _int(published), "received": _int(received),
                             # the two counters come from two processes' diagnostics, read up to a period
                             # apart: a frame can count as received but not yet as published (rate >= 0)
                             "drop_rate": (max(0.0, 1.0 - received / published) if published and received is not None
                                           else float("nan")),
                             "latency_ms_p50": cam_a.get("frames_latency_ms_p50"),
                             "latency_ms_p99": cam_a.get("frames_latency_ms_p99"),
                             "missed": _int(_delta(cam_a, cam_b, "frames_missed"))},
        "policy_to_driver": {"received": _int(_delta(drv_a, drv_b, "targets_received")),
                             "rate_hz": (_delta(drv_a, drv_b, "targets_received") / window
                                         if _delta(drv_a, drv_b, "targets_received") is not None else None),
                             "period_ms_p50": drv_a.get("targets_period_ms_p50"),
                             "jitter_ms_p99": drv_a.get("targets_jitter_ms_p99"),
                             "missed_ticks": _int(_delta(drv_a, drv_b, "targets_missed")),
                             "latency_ms_p50": drv_a.get("targets_latency_ms_p50"),
                             "latency_ms_p99": drv_a.get("targets_latency_ms_p99")},
        "estop_to_driver_hold": {"n": int(lat_ms.size), "missed": missed_holds,
                                 "ms_p50": float(np.median(lat_ms)) if lat_ms.size else None,
                                 "ms_max": float(lat_ms.max()) if lat_ms.size else None},
        "problems": problems,                       # what the window lacked (a loaded machine); [] when complete
        "replans": {"n": len(tel), "latency_ms_p50": float(np.median([t["latency_ms"] for t in tel])) if tel else None},
        "cpu_percent": {k: (100.0 * (cpu1[k] - cpu0[k]) / window if cpu0[k] is not None and cpu1[k] is not None
                            else None) for k in cpu0},     # of one core, over the window, children included
        "exit_codes": codes,
        # a CPU stopped for >= 40 ms by the host (a virtual machine's vCPU taken away): ticks lost to it are not the graph's
        "host_freezes": {"n": len(host.freezes), "ms": [round(f[2], 1) for f in host.freezes]},
    }


def window_problems(estops: int, missed_holds: int, missed_releases: int, statuses: dict[str, dict]) -> list[str]:
    """What makes a window's measurement incomplete: e-stops or releases the driver's log did not show
    within 5 s, and a node's /diagnostics status (`statuses`: name -> its last values) never seen. A window
    without a replan is not one of them: the bench measures the graph's transport, and `replans.n` says
    how many there were (a 3 s window at load 10 had none)."""
    problems = []
    if missed_holds or missed_releases:
        problems.append(f"{missed_holds} of {estops} e-stops and {missed_releases} releases not seen in the "
                        f"driver's log within 5 s")
    for status, values in statuses.items():
        if not values:
            problems.append(f"no /diagnostics status {status!r} in the window (a node too slow to report)")
    return problems


def _delta(after: dict, before: dict, key: str) -> float | None:
    """A cumulative diagnostics counter's growth over the window (None when a node never reported it)."""
    if key not in after:
        return None
    return after[key] - before.get(key, 0.0)


def _int(v) -> int | None:
    return None if v is None or v != v else int(v)


STAGES = ("capture -> host arrival", "host arrival -> stacked", "stacked -> published",
          "published -> received by the policy node", "received -> in the policy's input",
          "capture -> received (camera -> policy)", "capture -> in the policy's input")


def _pct(values) -> dict:
    v = np.asarray(values, float)
    return {"n": int(v.size), "p50_ms": float(np.percentile(v, 50)) if v.size else float("nan"),
            "p99_ms": float(np.percentile(v, 99)) if v.size else float("nan")}


def stage_table(bridge: list[dict], policy: list[dict], bare_ms: list[float], transport: str = "raw",
                since_ns: int | None = None, window_s: float | None = None,
                targets: dict[str, tuple] | None = None) -> dict:
    """The latency budget: each stage's p50/p99 [ms] over the frames both the bridge and the policy
    node noted (paired by header stamp; captured within the window when `since_ns`/`window_s` are
    given), the bare transfer's beside them, and the targets' rows as the nodes' diagnostics gave
    them ((p50, p99) each). Keys: "frames" (rows in STAGES order), "bare", "targets", "paired"."""
    published = "published_jpeg" if transport == "compressed" else "published"
    by_stamp = {r["stamp"]: r for r in bridge}
    end = None if since_ns is None or window_s is None else since_ns + int(window_s * 1e9)
    pairs = [(by_stamp[r["stamp"]], r) for r in policy if r["stamp"] in by_stamp
             and (since_ns is None or by_stamp[r["stamp"]]["capture"] >= since_ns)
             and (end is None or by_stamp[r["stamp"]]["capture"] <= end)]
    spans = {STAGES[0]: ("capture", "arrival"), STAGES[1]: ("arrival", "stacked"), STAGES[2]: ("stacked", published),
             STAGES[3]: (published, "received"), STAGES[4]: ("received", "input"), STAGES[5]: ("capture", "received"),
             STAGES[6]: ("capture", "input")}
    frames = {}
    for name, (a, b) in spans.items():
        frames[name] = _pct([((p if b in p else c)[b] - (c if a in c else p)[a]) / 1e6 for c, p in pairs
                             if (a in c or a in p) and (b in c or b in p)])
    return {"frames": frames, "bare": _pct(bare_ms), "paired": len(pairs),
            "targets": {k: {"p50_ms": _num(v[0]), "p99_ms": _num(v[1])} for k, v in (targets or {}).items()}}


def _num(v) -> float:
    return float("nan") if v is None else float(v)


def format_stages(st: dict, transport: str = "raw") -> list[str]:
    """The stage table as printed lines."""
    bare = st["bare"]
    lines = [f"  latency budget ({st['paired']} frames; wall clock)        p50 ms   p99 ms",]
    for name, row in st["frames"].items():
        lines.append(f"    {name:<44} {row['p50_ms']:7.2f}  {row['p99_ms']:7.2f}")
    lines.append(f"    {'bare rclpy transfer, same image (' + transport + ')':<44} {bare['p50_ms']:7.2f}  "
                 f"{bare['p99_ms']:7.2f}   (n={bare['n']}, two processes, same window)")
    cam = st["frames"]["capture -> received (camera -> policy)"]
    lines.append(f"    camera -> policy p99 minus bare p99: {cam['p99_ms'] - bare['p99_ms']:+.2f} ms (target <= +5)")
    lines.append("  targets                                          p50 ms   p99 ms")
    for name, row in st["targets"].items():
        lines.append(f"    {name:<44} {row['p50_ms']:7.3f}  {row['p99_ms']:7.3f}")
    return lines


def compressed_params(folder: Path) -> str:
    """A copy of the shipped robot params file with the JPEG stacked topic on both ends."""
    import yaml

    from vam_stack.paths import config_dir

    params = yaml.safe_load((config_dir() / "vam_stack.params.yaml").read_text())
    params["camera_bridge"]["ros__parameters"]["publish_compressed"] = True
    params["vam_policy_node"]["ros__parameters"]["image_transport"] = "compressed"
    path = folder / "params_compressed.yaml"
    path.write_text(yaml.safe_dump(params))
    return str(path)


class bare_transfer:
    """The bare transfer's publisher process (`python -m vam_bench.node <kind>`) for the block's span."""

    def __init__(self, kind: str, log_dir):
        self.kind, self.log = kind, Path(log_dir) / "bare_publisher.log"

    def __enter__(self):
        self.fh = open(self.log, "w")
        self.proc = subprocess.Popen([sys.executable, "-m", "vam_bench.node", self.kind], stdout=self.fh,
                                     stderr=subprocess.STDOUT, env=dict(os.environ))
        return self

    def __exit__(self, *exc):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.fh.close()


def _n(value, fmt: str = ".1f") -> str:
    """A measured number, or "n/a" where the window gave none (no replan in a short window, no frame
    paired): the table is printed whatever the window caught."""
    if value is None or (isinstance(value, float) and value != value):
        return "n/a"
    return format(value, fmt)


def _check_args(args: argparse.Namespace) -> None:
    """A mistake in the command line (ValueError: one line from vam_cli.main), before anything starts."""
    for name in ("seconds", "warmup"):
        if not (math.isfinite(getattr(args, name)) and getattr(args, name) > 0):
            raise ValueError(f"--{name} must be > 0, got {getattr(args, name)!r}")
    if args.estops < 1:
        raise ValueError(f"--estops must be >= 1, got {args.estops!r}")


def run(args: argparse.Namespace) -> int:
    _check_args(args)
    costs = message_costs()                 # in this process, before the graph competes for the cores
    if args.messages_only:
        print("\n".join(["per-message cost in the node process (vam_bench.messages):", *format_costs(costs)]))
        if args.json is not None:
            write_json_output(args.json, {"benchmark": "ros", "messages": costs})
        return 0
    try:
        r = {**measure(args), "messages": costs}
    except Exception as e:         # the graph failed on this machine (too slow to start, a node died): one line
        why = " ".join(f"{type(e).__name__}: {e}".split())
        if args.json is not None:
            write_json_output(args.json, {"benchmark": "ros", "complete": False, "error": why,
                                          "log_dir": args.log_dir})
        print(f"vam-stack bench ros: error: the graph gave no result: {why}", file=sys.stderr, flush=True)
        return 1
    c, d, e = r["camera_to_policy"], r["policy_to_driver"], r["estop_to_driver_hold"]
    print(f"ROS graph over DDS ({len(r['exit_codes'])} node processes + this one; graph {r['graph']}, "
          f"transport {r['transport']}, preset {r['preset']}; "
          f"window {r['window_s']} s, {r['replans']['n']} replans, p50 {_n(r['replans']['latency_ms_p50'], '.0f')} ms)")
    print(f"  camera -> policy   stacked 672x168 rgb8 at 30 Hz: latency p50 {_n(c['latency_ms_p50'])} ms, "
          f"p99 {_n(c['latency_ms_p99'])} ms; received {_n(c['received'], 'd')} of {_n(c['published'], 'd')} "
          f"(drop rate {_n(100 * c['drop_rate'], '.2f')} %)")
    print(f"  policy -> driver   joint targets: {_n(d['rate_hz'], '.2f')} Hz, period p50 {_n(d['period_ms_p50'], '.2f')} "
          f"ms, jitter p99 {_n(d['jitter_ms_p99'], '.2f')} ms, missed ticks {_n(d['missed_ticks'], 'd')}, "
          f"latency p50/p99 {_n(d['latency_ms_p50'])}/{_n(d['latency_ms_p99'])} ms")
    print(f"  e-stop -> driver hold: p50 {_n(e['ms_p50'])} ms, max {_n(e['ms_max'])} ms (n={e['n']}"
          + (f", {e['missed']} not seen within 5 s" if e.get("missed") else "") + ")")
    for line in format_stages(r["stages"], r["transport"]) + format_costs(costs):
        print(line)
    cpu = ", ".join(f"{k} {v:.0f} %" for k, v in r["cpu_percent"].items() if v is not None)
    print(f"  CPU (of one core, children included): {cpu}")
    codes = r["exit_codes"]
    bad = {k: v for k, v in codes.items() if v != 0}
    print(f"  exit codes: all {len(codes)} processes 0" if not bad else
          "  exit codes: " + ", ".join(f"{k} {v}" for k, v in codes.items()))
    h = r["host_freezes"]
    shown = ", ".join(f"{x:.0f}" for x in h["ms"][:8]) + (", ..." if len(h["ms"]) > 8 else "")
    print(f"  host: a CPU stopped for >= 40 ms {h['n']} times in the window" + (f" ({shown} ms)" if h["ms"] else "")
          + ": the ticks and frames lost to that are the machine's, not the graph's")
    for p in r.get("problems", []):
        print(f"  incomplete: {p}")
    if args.json is not None:
        write_json_output(args.json, r)
    return 0 if all(v == 0 for v in r["exit_codes"].values()) and not r.get("problems") else 1
