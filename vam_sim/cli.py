"""`vam-stack sim` (closed-loop episodes; `vam-stack eval`, success by suite and schedule, is
`vam_sim.cli_eval`) for every simulator: the mocked LIBERO bridge here, real LIBERO (`vam_sim.libero_real`) and the
MuJoCo YAM (`vam_sim.yam_mujoco.cli`) as adapters the `--robot` option picks.

Both refuse a non-empty `--out` unless `--overwrite`, check everything that can fail before they write anything,
rewrite their JSON (summary.json, results.json) atomically after every finished episode with `"complete": false`
until the run ends, and on SIGINT or SIGTERM close the recording and mark the JSON `"interrupted"` (exit 128 +
the signal number). Failed replans are counted per episode and per cell; a run in which no replan succeeded at
all exits 1 with the first error.
"""
from __future__ import annotations

import argparse
import logging
import os
import shlex
import sys
import time
from functools import partial
from pathlib import Path

from vam_stack.image_msgs import JPEG_QUALITY_DEFAULT
from vam_stack.outputs import claim_out_dir, write_json_atomic
from vam_stack.progress import progress_bar
from vam_stack.recording import Interrupted, stop_on_signals

from .cli_executor import add_executor_arguments, latency_options
from .episode import load_1min, success_intervals, success_rates, summarise
from .libero_mock.config import CONVENTIONS, LiberoMockConfig, checkpoint_conventions
from .libero_mock.runner import SimConfig, SimRunner
from .libero_mock.tasks import SUITES, canonical_suite
from .libero_real.client import libero_python
from .libero_real.runner import RealLiberoRunner
from .run_config import add_run_arguments, run_config_from_args
from .reports import errors_line, reach_line, realtime_line, realtime_verdict


def suite_arg(text: str) -> str:
    """argparse type: a suite name, LIBERO's aliases accepted."""
    try:
        return canonical_suite(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _weights_notice(runner: SimRunner) -> str:
    p = runner.policy
    if p is None:
        return "policy: scripted expert"
    notice = ""
    if p.checkpoint not in ("random", None):
        got = checkpoint_conventions(p.checkpoint)
        if got != CONVENTIONS:
            notice = (f"\nWARNING: these weights were trained on the mock's conventions {got or 'before libero-1'!r}, "
                      f"not the current {CONVENTIONS!r} (LIBERO's frames, 20 Hz ticks, LIBERO's tasks): expect "
                      f"~0 % success until they are retrained on the current mock")
    if p.checkpoint == "random":
        return (f"policy: {p.mcfg.name} preset with RANDOM (untrained) weights -- its actions are noise and "
                f"success is expected to be ~0 %; train and ship weights (models/{p.mcfg.name}.safetensors) "
                f"to see the method work")
    return f"policy: {p.mcfg.name} preset, weights {p.checkpoint}" + notice


def run_suite(cfg: SimConfig, out: Path, policy=None, quiet: bool = False, runner_cls=SimRunner,
              overwrite: bool = False, episodes: list | None = None, on_start=None,
              on_episode=None) -> tuple[list[dict], SimRunner]:
    """Run `cfg.episodes` episodes; finished ones are appended to `episodes` (a new list when None)
    as they end, so a caller that catches an interrupt still holds them. `on_start(runner)` runs
    once the runner has passed its checks, `on_episode(runner)` after every finished episode."""
    episodes = [] if episodes is None else episodes
    with runner_cls(cfg, out, policy=policy, overwrite=overwrite) as runner:
        if on_start is not None:
            on_start(runner)
        if not quiet:
            print(_weights_notice(runner), flush=True)
        bar = progress_bar(total=cfg.episodes, desc=f"{cfg.suite}/{cfg.label if cfg.policy == 'vam' else 'expert'}",
                   unit="ep", disable=quiet, file=sys.stdout)
        ran = []
        for i in range(cfg.episodes):
            ep = runner.run_episode(i)
            ran.append(ep)
            episodes.append(ep)
            ok = sum(e["success"] for e in ran)
            bar.set_postfix_str(f"success {ok}/{len(ran)}, last {ep['steps']} steps", refresh=False)
            bar.update(1)                # one redraw, with the count and the success of the same episodes
            if on_episode is not None:
                on_episode(runner)
        bar.close()
    return ran, runner


def interrupt_code(e: KeyboardInterrupt) -> tuple[str, int]:
    """(signal name, exit status 128 + signal number) of an interrupt."""
    signum = e.signum if isinstance(e, Interrupted) else 2
    return (e.args[0] if isinstance(e, Interrupted) else "SIGINT"), 128 + signum


# ---- sim ------------------------------------------------------------------------------------
# the run-config flags (vam_sim.run_config: generated from the fields, read back by run_config_from_args)
DEVICE_FLAGS = ("guidance_weights", "device", "backend")       # sim's and eval's
SIM_FLAGS = ("episodes", "seed", "guidance", "policy", "preset", "checkpoint", "first_task", "max_steps", "execute",
             "action_temperature")
SIM_DEFAULTS = {"episodes": 3, "backend": None}   # backend None: onnxruntime on a CPU, torch on CUDA (default_backend)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--robot", default="libero-mock", choices=("libero-mock", "libero-real", "yam-mujoco"),
                   help="libero-mock: mocked LIBERO bridge; libero-real: real LIBERO in its own environment "
                        "(libero_real); yam-mujoco: simulated bimanual YAM (yam_mujoco)")
    p.add_argument("--libero-python", help="libero-real: interpreter of the LIBERO environment "
                                           "(default $VAM_LIBERO_PYTHON)")
    p.add_argument("--task", help="yam-mujoco task (handover, relay, tray_lift); the LIBERO robot uses --suite")
    p.add_argument("--suite", default=None, type=suite_arg, metavar="SUITE",
                   help=f"LIBERO robots: one of {', '.join(SUITES)} (default goal; LIBERO's names work too: "
                        f"libero_goal, libero_10 / 10, ...)")
    add_run_arguments(p, SimConfig, ("mock_config", *SIM_FLAGS), SIM_DEFAULTS)
    add_executor_arguments(p)
    add_run_arguments(p, SimConfig, ("image_transport", "jpeg_quality", *DEVICE_FLAGS, "record", "record_image_every"),
                      SIM_DEFAULTS)
    p.add_argument("--out", required=True, help="output directory (must be empty or new unless --overwrite)")
    p.add_argument("--overwrite", action="store_true",
                   help="write into a non-empty --out, replacing the files this run writes (others are left)")


def _sim_summary(cfg: SimConfig, runner, episodes: list[dict], t0: float) -> dict:
    policy = getattr(runner, "policy", None)
    mock = runner.mock if runner is not None else LiberoMockConfig.load(cfg.mock_config)
    return {"config": cfg.as_dict(),
            "mock": mock.as_dict(),
            "machine": {"cpus": os.cpu_count(), "load_1min_end": load_1min()},
            "fell_back_to_lockstep": getattr(runner, "fell_back", None),
            "weights": getattr(policy, "checkpoint", None) if policy is not None else None,
            "episodes": episodes, "success_rate": success_rates(episodes),
            "success_ci95": success_intervals(episodes), "stats": summarise(episodes),
            "wall_s": round(time.perf_counter() - t0, 2)}


def _lockstep_hint() -> str:
    """The command a user reruns for the deterministic result: this one with --executor lockstep."""
    argv, skip = [], False
    for a in sys.argv[1:]:
        if skip or a.startswith(("--executor=", "--overload=")):
            skip = False
            continue
        if a in ("--executor", "--overload"):
            skip = True
            continue
        argv.append(shlex.quote(a))
    if not argv or argv[0] != "sim":
        return "the same command with --executor lockstep"
    return "`vam-stack " + " ".join(argv + ["--executor", "lockstep"]) + "`"


class _FirstFew(logging.Filter):
    """Lets the first `n` warnings of the chunk executor through (a chunk dropped, an overrun): a loaded
    machine printed 68 such lines; the run's closing lines count them all."""

    def __init__(self, n: int = 3):
        super().__init__()
        self.n, self.seen = n, 0

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        self.seen += 1
        if self.seen == self.n + 1:
            record.msg, record.args = "(further chunk-timing warnings are not printed; the summary counts them)", ()
            return True
        return self.seen <= self.n


def run(args: argparse.Namespace) -> int:
    quiet = _FirstFew()
    logging.getLogger("vam_control.executor").addFilter(quiet)
    try:
        return _run(args)
    finally:
        logging.getLogger("vam_control.executor").removeFilter(quiet)


def _run(args: argparse.Namespace) -> int:
    if args.backend is None:                         # CPU: onnxruntime (its parity and episode agreement: bench eval)
        args.backend = default_backend(args.policy, args.device)
    transport = (getattr(args, "image_transport", "raw"), getattr(args, "jpeg_quality", JPEG_QUALITY_DEFAULT))
    latency = latency_options(args)
    if args.robot == "yam-mujoco":
        if args.suite is not None:
            raise SystemExit(f"--suite {args.suite!r} is for the LIBERO robots; --robot yam-mujoco takes --task "
                             f"(handover, relay, tray_lift)")
        if transport != ("raw", JPEG_QUALITY_DEFAULT):
            raise SystemExit("--image-transport/--jpeg-quality are options of the LIBERO robots; the yam-mujoco "
                             "run feeds its policy raw frames")
        from vam_sim.yam_mujoco.cli import run as run_yam  # lazy: imports mujoco only when asked for

        return run_yam(args)
    if args.task is not None:
        raise SystemExit(f"--task {args.task!r} is for --robot yam-mujoco; the LIBERO robot takes --suite/--first-task")
    cfg = run_config_from_args(SimConfig, args, suite=args.suite or "goal", executor=args.executor, rtc=args.rtc,
                               **latency)
    if args.robot == "libero-real":                  # nothing (not even an empty recording) before this check
        libero_python(args.libero_python)
    out = claim_out_dir(args.out, args.overwrite)
    t0 = time.perf_counter()
    runner_cls = SimRunner
    if args.robot == "libero-real":
        runner_cls = partial(RealLiberoRunner, python=args.libero_python)
    episodes: list[dict] = []
    started: list = []                   # the runner, once it has passed its checks

    def write(complete: bool, **extra) -> None:
        summary = _sim_summary(cfg, started[0] if started else None, episodes, t0)
        write_json_atomic(out / "summary.json", summary | {"complete": complete} | extra)

    try:
        with stop_on_signals():
            _, runner = run_suite(cfg, out, runner_cls=runner_cls, overwrite=args.overwrite, episodes=episodes,
                                  on_start=started.append, on_episode=lambda r: write(False))
            write(True)
    except KeyboardInterrupt as e:
        name, code = interrupt_code(e)
        if not started:
            print(f"\ninterrupted ({name}) before the first episode; nothing written", file=sys.stderr)
            return code
        write(False, interrupted=name)
        rec = f" and {out / 'recording.mcap'} (closed)" if cfg.record else ""
        print(f"\ninterrupted ({name}) after {len(episodes)}/{cfg.episodes} episodes; kept "
              f"{out / 'summary.json'} (complete: false){rec}", file=sys.stderr)
        return code
    rates = success_rates(episodes)
    stats = summarise(episodes)
    ci = success_intervals(episodes)
    print("\nsuccess: " + ", ".join(f"{s} {100 * r:.0f} % (95 % interval {100 * ci[s][0]:.0f}-{100 * ci[s][1]:.0f} %)"
                                      for s, r in rates.items())
          + f" ({sum(e['success'] for e in episodes)}/{len(episodes)} episodes)")
    if stats["replans"]:
        print(f"replans: {stats['replans']}, latency p50 {stats['latency_ms_p50']:.0f} ms, "
              f"p95 {stats['latency_ms_p95']:.0f} ms")
        print(f"TR: mean {stats['tr_mean']:.3f} (min {stats['tr_min']:.3f}, max {stats['tr_max']:.3f}); "
              f"guidance branches computed on {100 * stats['guided_fraction']:.0f} % of replans")
    if stats.get("reach"):
        print("reach: " + reach_line(stats["reach"]))
    if stats.get("realtime"):
        print("realtime: " + realtime_line(stats["realtime"]))
        print("real time: " + realtime_verdict(stats["realtime"], os.cpu_count(), _lockstep_hint()))
    err = stats["errors"]
    if err["inference_errors"] or err["error_episodes"]:
        print("inference errors: " + errors_line(err))
    for e in episodes:
        status = "success" if e["success"] else e["termination"]
        extra = f"  -> {out / e['tr_trace']}" if e.get("tr_trace") else ""
        att = e.get("realtime_attempt")
        how = "" if e.get("executor") != "lockstep" or cfg.executor == "lockstep" else (
            f" (lockstep; realtime attempt: {'success' if att['success'] else att['termination']}, {att['problem']})"
            if att else " (lockstep)")
        print(f"  {e['name']}: {status} in {e['steps']} steps{how}  \"{e['instruction']}\"{extra}")
    print(f"summary: {out / 'summary.json'}")
    if cfg.record:
        print(f"recording: {out / 'recording.mcap'} (ros2 bag play / Foxglove)")
    if cfg.policy == "vam" and err["replans_ok"] == 0 and err["error_episodes"]:
        print(f"vam-stack sim: error: no replan succeeded in {err['episodes']} episodes "
              f"({err['inference_errors']} failed, {err['refused_inputs']} refused inputs); "
              f"first: {err['first_error']}", file=sys.stderr)
        return 1
    return 0


def default_backend(policy: str, device: str) -> str:
    """sim's and eval's backend when none is given: onnxruntime for the vam policy on a CPU, else torch."""
    if policy != "vam":
        return "torch"
    from vam_model.backends import auto_backend   # lazy: torch, which a run of a scripted policy never needs
    from vam_model.device import resolve_device

    return auto_backend(resolve_device(device).type, lambda line: print(line, file=sys.stderr))
