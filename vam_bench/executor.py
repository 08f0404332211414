"""`vam-stack bench executor`: the policy node's control loop, its tick jitter while a policy infers
in parallel.

Runs the loop the policy node runs, `PolicyRuntime` (vam_control.runtime: the realtime chunk
executor on its own tick thread, each target through the e-stop gate and the safety filter
config/yam_safety.yaml, fed camera frames and joint states at the tick rate as the node's callbacks
feed it), at `--rate-hz` (30 by default) for `--seconds` (60 by default), and the `tiny_real`
policy (the robot's 14 joints; or, with
`--fake-policy-ms`, a fake policy that holds the CPU and the GIL in pure Python for that long
per replan) inferring in parallel: in a child process by default (`ProcessPolicy`), or in the
executor's worker thread with `--worker thread`. The tick thread asks for SCHED_FIFO priority
50 by default (`--rt-priority 0` turns it off). Prints and optionally writes as JSON:
achieved rate, wake-up jitter p50/p99/max, missed ticks, executor + safety overhead per tick,
replans and inference latency. Targets: p99 jitter <= 2 ms and 0 missed ticks at 30 Hz.

On the 2-core CPU machine a real preset's replan can be longer than a whole chunk, so its chunks
arrive after their last action and are dropped while the arm holds: with it the bench measures tick
timing under a real inference load. Seams, latency compensation and replans at rate are exercised
with `--fake-policy-ms` (e.g. 100). A preset must drive the robot (14 absolute joint targets).

The driver write is a no-op here: the number measured is the control loop's own timing (executor,
gate and filter per tick).
"""
from __future__ import annotations

import argparse
import dataclasses
import functools
import math
import time
from types import SimpleNamespace
from typing import Any

import numpy as np

import threading

from vam_control.runtime import PolicyRuntime, RuntimeConfig
from vam_control.schedule import ExecutorConfig
from vam_control.executor_worker import ProcessPolicy
from vam_control.safety import SafetyFilter, load_safety_config
from vam_stack.robot import load_robot


REQUIRED_KEYS = ("achieved_hz", "p50_jitter_ms", "p99_jitter_ms", "max_jitter_ms", "missed_ticks", "overhead_us")


class CpuBurnPolicy:
    """Fake policy: burns `ms` of CPU in pure Python (holds the GIL), returns a smooth chunk."""

    def __init__(self, ms: float, chunk: int = 50, execute: int = 30, action_dim: int = 14, rate_hz: float = 30.0,
                 center: tuple[float, ...] | None = None):
        self.spec = SimpleNamespace(chunk=chunk, execute=execute, action_dim=action_dim, rate_hz=rate_hz,
                                    proprio_dim=action_dim, height=8, width=16, action_type="absolute_joint")
        self.ms = ms
        self.center = np.zeros(action_dim) if center is None else np.asarray(center, dtype=np.float64)
        self.calls = 0

    def reset(self, instruction: str) -> None:
        self.calls = 0

    def infer(self, obs: dict) -> dict:
        end = time.perf_counter() + self.ms / 1e3
        n = 0
        while time.perf_counter() < end:
            n += sum(range(200))
        t = (self.calls * self.spec.execute + np.arange(self.spec.chunk)) / self.spec.rate_hz
        self.calls += 1
        wave = 0.2 * np.sin(2 * np.pi * 0.2 * t)[:, None]  # a slow 0.2 Hz sweep, well inside the limits
        actions = self.center + np.repeat(wave, self.spec.action_dim, 1)
        return {"actions": actions.astype(np.float32), "burn_iters": n}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seconds", type=float, default=60.0, help="run time (default 60)")
    parser.add_argument("--json", default=None, metavar="PATH", help="also write the results as JSON here ('-' = stdout)")
    parser.add_argument("--rate-hz", type=float, default=30.0, help="executor rate (default 30, the real robot's)")
    parser.add_argument("--preset", default="tiny_real", help="policy preset for build_policy (default tiny_real: "
                        "the robot's 14 joints)")
    parser.add_argument("--fake-policy-ms", type=float, default=None, metavar="MS",
                        help="use a fake policy that burns MS of CPU per replan instead of the real one")
    parser.add_argument("--policy-threads", type=int, default=1,
                        help="torch intra-op threads for the policy (default 1: leave a core to the executor)")
    parser.add_argument("--blend-ticks", type=int, default=5, help="cross-fade window (default 5)")
    parser.add_argument("--switch-interval-ms", type=float, default=0.5,
                        help="Python GIL switch interval while running (default 0.5 ms)")
    parser.add_argument("--worker", choices=("process", "thread"), default="process",
                        help="where the policy runs: a child process (default; no GIL sharing) or a thread")
    parser.add_argument("--rt-priority", type=int, default=50,
                        help="SCHED_FIFO priority for the tick thread (default 50; 0 = normal scheduling; "
                             "needs root or CAP_SYS_NICE, else a warning and normal scheduling)")
    parser.add_argument("--spin-ms", type=float, default=0.5,
                        help="last part of each wait spent polling the clock (default 0.5 ms)")


def _build(args: argparse.Namespace, home: np.ndarray) -> tuple[Any, dict, str]:
    """(policy, example observation, description); the policy runs in a thread or a child process."""
    if args.fake_policy_ms is not None:
        if not (args.fake_policy_ms >= 0 and math.isfinite(args.fake_policy_ms)):
            raise SystemExit(f"--fake-policy-ms must be >= 0, got {args.fake_policy_ms!r}")
        factory = functools.partial(CpuBurnPolicy, args.fake_policy_ms, rate_hz=args.rate_hz,
                                    center=tuple(home.tolist()))
        obs: dict = {"proprio": np.zeros(14, np.float32)}
        what = f"fake policy burning {args.fake_policy_ms:g} ms of Python CPU"
    else:
        from vam_model.policy import build_policy

        factory = functools.partial(build_policy, preset=args.preset)
        obs = {}  # built from the policy's spec once it exists (height, width, proprio_dim)
        what = f"{args.preset} policy, {args.policy_threads} torch thread(s)"
    if args.worker == "process":
        return ProcessPolicy(factory, torch_threads=args.policy_threads), obs, what + ", child process"
    if args.fake_policy_ms is None:
        import torch

        torch.set_num_threads(max(1, args.policy_threads))
    return factory(), obs, what + ", worker thread"


def run(args: argparse.Namespace) -> int:
    if not (args.seconds > 0 and math.isfinite(args.seconds)):
        raise SystemExit(f"--seconds must be > 0, got {args.seconds!r}")
    scfg = load_safety_config()
    policy, obs, what = _build(args, _home(scfg, 2))
    try:
        return _measure(args, policy, obs, what, scfg)
    finally:
        if isinstance(policy, ProcessPolicy):
            policy.close()


def _home(scfg, arms: int) -> np.ndarray:
    lo, hi, _ = dataclasses.replace(scfg, arms=arms).bounds()
    return (lo + hi) / 2


def _measure(args: argparse.Namespace, policy: Any, obs: dict, what: str, scfg) -> int:
    spec = policy.spec
    if not obs:
        rng = np.random.default_rng(0)
        obs = {"frame": rng.integers(0, 256, (spec.height, spec.width, 3), dtype=np.uint8),
               "proprio": np.zeros(spec.proprio_dim, np.float32)}
    policy.reset("pick up the black bowl and place it on the plate")
    t0 = time.perf_counter()
    policy.infer(obs)  # warm-up outside the measured run (first call allocates and compiles)
    warm_ms = (time.perf_counter() - t0) * 1e3

    names = load_robot().published_names()
    if getattr(spec, "action_type", "") != "absolute_joint" or int(spec.action_dim) != len(names) \
            or int(spec.proprio_dim) != len(names):
        raise SystemExit(f"{what}: the node's loop drives {len(names)} absolute joint targets; this policy gives "
                         f"{spec.action_dim} {getattr(spec, 'action_type', '?')!r} actions ({spec.proprio_dim} proprio)")
    scfg = dataclasses.replace(scfg, rate_hz=args.rate_hz)
    safety = SafetyFilter(scfg)
    home = _home(scfg, scfg.arms)
    cfg = ExecutorConfig.from_spec(spec, rate_hz=args.rate_hz, mode="realtime", action_kind="absolute",
                                   blend_ticks=min(args.blend_ticks, int(spec.chunk)),
                                   latency_init_s=warm_ms / 1e3, switch_interval_s=args.switch_interval_ms / 1e3,
                                   rt_priority=args.rt_priority, spin_s=args.spin_ms / 1e3)
    runtime = PolicyRuntime(policy, cfg, RuntimeConfig(), names, send=lambda sent: None, on_telemetry=lambda tel: None,
                            safety=safety)
    ex = runtime.executor
    frame = obs.get("frame", np.zeros((spec.height, spec.width, 3), np.uint8))
    feeding = threading.Event()

    def feed() -> None:                          # the node's camera and joint-state callbacks, at the tick rate
        while not feeding.wait(1.0 / args.rate_hz):
            runtime.add_frame(frame)
            runtime.set_state(names, home)
    runtime.add_frame(frame)
    runtime.set_state(names, home)
    feeder = threading.Thread(target=feed, name="bench-inputs", daemon=True)
    print(f"executor bench: the node's PolicyRuntime, {args.seconds:g} s at {args.rate_hz:g} Hz, chunk {cfg.chunk}, "
          f"execute {cfg.execute}, blend {cfg.blend_ticks}; {what}; warm-up replan {warm_ms:.1f} ms", flush=True)
    feeder.start()
    try:
        ok, message = runtime.request_start("pick up the black bowl and place it on the plate", wait=True)
        if not ok:
            raise SystemExit(f"the runtime did not start: {message}")
        time.sleep(args.seconds)
        runtime.request_stop("bench over", wait=True)
    finally:
        feeding.set()
        runtime.close(5.0)
    st = ex.stats()
    result = {k: st.get(k, float("nan")) for k in REQUIRED_KEYS}
    result.update(
        rate_hz=args.rate_hz, seconds=args.seconds, policy=what, rt_priority=args.rt_priority, spin_ms=args.spin_ms, chunk=cfg.chunk, execute=cfg.execute,
        blend_ticks=cfg.blend_ticks, ticks=st["ticks"], mean_period_ms=st.get("mean_period_ms", float("nan")),
        max_period_ms=st.get("max_period_ms", float("nan")), p99_overhead_us=st.get("p99_overhead_us", float("nan")),
        replans=st["replans"], inference_errors=st["errors"], dropped_chunks=st["dropped"],
        latency_estimate_ms=st["latency_estimate_ms"], last_latency_ms=st["last_latency_ms"],
        warmup_ms=warm_ms, safety_counts=dict(safety.counts))
    result["missed_ticks"] = int(result["missed_ticks"])
    print(f"  achieved {result['achieved_hz']:.3f} Hz over {int(result['ticks'])} ticks, "
          f"missed {result['missed_ticks']}")
    print(f"  jitter p50 {result['p50_jitter_ms']:.3f} ms  p99 {result['p99_jitter_ms']:.3f} ms  "
          f"max {result['max_jitter_ms']:.3f} ms  (target p99 <= 2 ms, 0 missed)")
    print(f"  executor + gate + safety per tick: mean {result['overhead_us']:.1f} us, p99 {result['p99_overhead_us']:.1f} us")
    print(f"  replans {int(result['replans'])}, inference latency est. {result['latency_estimate_ms']:.1f} ms, "
          f"errors {int(result['inference_errors'])}, dropped {int(result['dropped_chunks'])}")
    if args.json is not None:
        from vam_stack.outputs import write_json_output
        write_json_output(args.json, result)
    return 0
