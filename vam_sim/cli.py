"""`vam-stack sim` (closed-loop episodes) and `vam-stack eval` (success by suite and schedule),
for every simulator: the mocked LIBERO bridge here, real LIBERO (`vam_sim.libero_real`) and the
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
from dataclasses import replace
from functools import partial
from pathlib import Path

from vam_model.guidance import GUIDANCE_LABELS, parse_guidance_label
from vam_stack.msgs import JPEG_QUALITY_DEFAULT
from vam_stack.outputs import claim_out_dir, remove_empty_dirs, write_json_atomic
from vam_stack.progress import progress_bar
from vam_stack.recording import Interrupted, stop_on_signals

from .cli_executor import add_executor_arguments, latency_options
from .libero_mock.config import CONVENTIONS, LiberoMockConfig, checkpoint_conventions
from .libero_mock.reach import reach_stats
from .episode import error_stats, load_1min, success_counts, success_intervals, success_rates, summarise
from .libero_mock.runner import SimConfig, SimRunner
from .libero_mock.tasks import SUITES, canonical_suite
from .libero_real.client import libero_python
from .libero_real.runner import RealLiberoRunner
from .parallel import default_workers, run_parallel
from .run_config import add_run_arguments, run_config_from_args
from .reports import (errors_line, errors_table, markdown_table, per_task_counts, per_task_rates, per_task_table,
                       reach_line, reach_table, realtime_line, realtime_verdict)


def _suite(text: str) -> str:
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


def _interrupt_code(e: KeyboardInterrupt) -> tuple[str, int]:
    """(signal name, exit status 128 + signal number) of an interrupt."""
    signum = e.signum if isinstance(e, Interrupted) else 2
    return (e.args[0] if isinstance(e, Interrupted) else "SIGINT"), 128 + signum


# ---- sim ------------------------------------------------------------------------------------
# the run-config flags (vam_sim.run_config: generated from the fields, read back by run_config_from_args)
DEVICE_FLAGS = ("guidance_weights", "device", "backend")       # sim's and eval's
SIM_FLAGS = ("episodes", "seed", "guidance", "policy", "preset", "checkpoint", "first_task", "max_steps", "execute",
             "action_temperature")
SIM_DEFAULTS = {"episodes": 3, "backend": None}   # backend None: onnxruntime on a CPU, torch on CUDA (_default_backend)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--robot", default="libero-mock", choices=("libero-mock", "libero-real", "yam-mujoco"),
                   help="libero-mock: mocked LIBERO bridge; libero-real: real LIBERO in its own environment "
                        "(libero_real); yam-mujoco: simulated bimanual YAM (yam_mujoco)")
    p.add_argument("--libero-python", help="libero-real: interpreter of the LIBERO environment "
                                           "(default $VAM_LIBERO_PYTHON)")
    p.add_argument("--task", help="yam-mujoco task (handover, relay, tray_lift); the LIBERO robot uses --suite")
    p.add_argument("--suite", default=None, type=_suite, metavar="SUITE",
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
        args.backend = _default_backend(args.policy, args.device)
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
        name, code = _interrupt_code(e)
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


# ---- eval -----------------------------------------------------------------------------------
def add_eval_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--suites", default="goal,goal_ood", help="comma-separated suites")
    p.add_argument("--episodes-per-task", type=int, default=1)
    p.add_argument("--seeds", default="0", help="comma-separated seed ids, e.g. 0,1,2")
    p.add_argument("--guidance", default="none,flat,tr_adaptive",
                   help="comma-separated schedules to compare; 'tr_adaptive+running_min' is the labelled TR_0 "
                        "ablation of the paper study (docs/paper_study.md)")
    add_run_arguments(p, SimConfig, ("policy", "preset", "checkpoint"))
    p.add_argument("--plots", action="store_true", help="also write per-episode TR trace PNGs")
    add_run_arguments(p, SimConfig, ("max_steps", "execute", "mock_config"))
    p.add_argument("--workers", type=int, default=0,
                   help="vam: spread the episodes over N processes (results identical to one process: every "
                        "episode draws its own noise); default 0 = one per core")
    p.add_argument("--threads", type=int, default=0,
                   help="with --workers: torch/onnxruntime threads per worker (0: cores / workers)")
    add_run_arguments(p, SimConfig, DEVICE_FLAGS, {"backend": None})
    p.add_argument("--out", required=True, help="output directory (must be empty or new unless --overwrite)")
    p.add_argument("--overwrite", action="store_true",
                   help="write into a non-empty --out, replacing the files this run writes (others are left)")


def _csv(text: str, allowed=None, kind="value") -> list[str]:
    items = [x.strip() for x in text.split(",") if x.strip()]
    if not items:
        raise SystemExit(f"empty {kind} list: {text!r}")
    for x in items:
        if allowed is not None and x not in allowed:
            raise SystemExit(f"unknown {kind} {x!r}; choose from {', '.join(allowed)}")
    return items


def _default_backend(policy: str, device: str) -> str:
    """sim's and eval's backend when none is given: onnxruntime for the vam policy on a CPU, else torch."""
    if policy != "vam":
        return "torch"
    from vam_model.backends import auto_backend   # lazy: torch, which a run of a scripted policy never needs
    from vam_model.device import resolve_device

    return auto_backend(resolve_device(device).type, lambda line: print(line, file=sys.stderr))


def _eval_parallel(cfgs: dict, out: Path, workers: int, threads: int, by_schedule: dict, write) -> None:
    """Every episode of every (schedule, suite, seed) run as one job on `workers` processes
    (vam_sim.parallel); `by_schedule` ends up in job order, as the sequential run fills it."""
    jobs, labels = [], []
    for (g, suite, seed), cfg in cfgs.items():
        for i in range(cfg.episodes):
            jobs.append((cfg, out / g / f"{suite}_s{seed}", i))
            labels.append(g)
    bar = progress_bar(total=len(jobs), desc=f"{len(jobs)} episodes on {workers} workers", unit="ep", file=sys.stdout)
    ok = 0

    def done(n: int, ep: dict) -> None:
        nonlocal ok
        by_schedule.setdefault(labels[n], []).append(ep)
        ok += bool(ep["success"])
        bar.set_postfix_str(f"success {ok}/{bar.n + 1}", refresh=False)
        bar.update(1)
        write(False)

    episodes = run_parallel(jobs, workers, threads, on_result=done)
    bar.close()
    by_schedule.clear()
    for g, ep in zip(labels, episodes):
        by_schedule.setdefault(g, []).append(ep)


def run_eval(args: argparse.Namespace) -> int:
    try:
        suites = [_suite(x) for x in _csv(args.suites, kind="suite")]
    except argparse.ArgumentTypeError as e:
        raise SystemExit(str(e)) from None
    schedules = _csv(args.guidance, GUIDANCE_LABELS, "guidance") if args.policy == "vam" else ["expert"]
    try:
        seeds = [int(s) for s in _csv(args.seeds, kind="seed")]
    except ValueError:
        raise SystemExit(f"--seeds must be comma-separated integers, got {args.seeds!r}") from None
    if args.episodes_per_task < 1:
        raise SystemExit(f"--episodes-per-task must be >= 1, got {args.episodes_per_task}")
    if getattr(args, "workers", 1) < 0 or getattr(args, "threads", 0) < 0:
        raise SystemExit(f"--workers and --threads must be >= 0, got {args.workers} and {args.threads}")
    if args.policy != "vam":
        args.workers = 1                                   # the scripted expert has no networks to spread
    elif not args.workers:
        args.workers = default_workers()
    if args.workers > 1 and not args.threads:
        args.threads = max(1, default_workers() // args.workers)
    if args.backend is None:                               # CPU: onnxruntime (bench eval: 2.3x torch with workers)
        args.backend = _default_backend(args.policy, getattr(args, "device", "auto"))

    mock = LiberoMockConfig.load(getattr(args, "mock_config", None))
    cfgs = {(g, suite, seed): run_config_from_args(
                SimConfig, args, suite=suite, episodes=10 * args.episodes_per_task, seed=seed,
                guidance=g if g != "expert" else "none", record=False, plots=args.plots)
            for g in schedules for suite in suites for seed in seeds}   # every config checked up front
    out = claim_out_dir(args.out, getattr(args, "overwrite", False))
    out_existed = out.exists()
    by_schedule: dict[str, list[dict]] = {}          # schedule -> finished episodes, in run order
    weights = _weights_of(args)

    def write(complete: bool, **extra) -> dict:
        results = _eval_results(args, suites, seeds, schedules, mock, by_schedule) | {"complete": complete,
                                                                                      "weights": weights} | extra
        out.mkdir(parents=True, exist_ok=True)
        write_json_atomic(out / "results.json", results)
        return results

    policy = None
    workers = getattr(args, "workers", 1)
    try:
        with stop_on_signals():
            if workers > 1 and args.policy == "vam":
                _eval_parallel(cfgs, out, workers, args.threads, by_schedule, write)
                cfgs = {}
            for (g, suite, seed), cfg in cfgs.items():
                run_out = out / f"{g}" / f"{suite}_s{seed}"
                if policy is not None:           # one model for every schedule; only the schedule changes
                    schedule, baseline = parse_guidance_label(g)
                    policy.configure(guidance=replace(policy.cfg.guidance, schedule=schedule, tr_baseline=baseline))
                _, runner = run_suite(cfg, run_out, policy=policy, overwrite=getattr(args, "overwrite", False),
                                      episodes=by_schedule.setdefault(g, []), on_episode=lambda r: write(False))
                policy = runner.policy if args.policy == "vam" else None
            results = write(True)
    except KeyboardInterrupt as e:
        name, code = _interrupt_code(e)
        done = sum(len(v) for v in by_schedule.values())
        if done:
            results = write(False, interrupted=name)
            _write_md(out, suites, schedules, results["by_guidance"])
            print(f"\ninterrupted ({name}) after {done} episodes; kept {out / 'results.json'} and "
                  f"{out / 'results.md'} (complete: false)", file=sys.stderr)
        elif remove_empty_dirs(out, keep_root=out_existed):   # the cell folders it had made, still empty
            print(f"\ninterrupted ({name}) before the first episode finished; nothing kept, and --out "
                  f"{str(out)!r} is as it was (a rerun starts there)", file=sys.stderr)
        else:
            print(f"\ninterrupted ({name}) before the first episode finished; no results, but {out} holds "
                  f"files: rerun with --overwrite to write over them", file=sys.stderr)
        return code
    table = _write_md(out, suites, schedules, results["by_guidance"])
    print(table)
    print(f"\nresults: {out / 'results.json'}, {out / 'results.md'}")
    dead = [(g, s, c) for g, cells in results["by_guidance"].items() for s, c in cells["errors"].items()
            if c["episodes"] and c["replans_ok"] == 0 and c["error_episodes"]]
    if args.policy == "vam" and dead:
        first = next(c["first_error"] for _, _, c in dead if c["first_error"])
        print(f"vam-stack eval: error: no replan succeeded in {len(dead)} of "
              f"{len(schedules) * len(suites)} cells ({', '.join(f'{s}/{g}' for g, s, _ in dead)}): their "
              f"success rates measure a policy that never acted; first error: {first}", file=sys.stderr)
        return 1
    return 0


def _weights_of(args) -> dict | None:
    """The checkpoint an evaluation ran (path and tensor hash), so pooled results can be checked
    to come from one model; None for the expert and for seeded random weights."""
    if args.policy != "vam":
        return None
    from vam_model.networks.checkpoint import resolve_checkpoint, verify_checkpoint   # lazy: torch

    ckpt, _ = resolve_checkpoint(args.checkpoint, args.preset, "libero64")
    return None if ckpt is None else {"checkpoint": ckpt, "tensor_sha256": verify_checkpoint(ckpt)}


def _eval_results(args, suites: list[str], seeds: list[int], schedules: list[str], mock,
                  by_schedule: dict[str, list[dict]]) -> dict:
    """results.json from the episodes finished so far (schedules not started yet are absent)."""
    by_guidance = {}
    for g, eps in by_schedule.items():
        if not eps:
            continue
        by_guidance[g] = {"success_rate": success_rates(eps), "counts": success_counts(eps),
                          "ci95": success_intervals(eps), "per_task": per_task_rates(eps),
                          "per_task_counts": per_task_counts(eps),
                          "stats": summarise(eps),
                          "errors": {s: error_stats([e for e in eps if e["suite"] == s]) for s in suites
                                     if any(e["suite"] == s for e in eps)},
                          "reach": {s: reach_stats([e for e in eps if e["suite"] == s]) for s in suites}}
    all_eps = [e for eps in by_schedule.values() for e in eps]
    first = next(iter(by_guidance.values()), {"success_rate": {}})
    return {"suites": suites, "seeds": seeds, "episodes_per_task": args.episodes_per_task,
            "mock": mock.as_dict(),
            "max_steps": getattr(args, "max_steps", None), "execute": getattr(args, "execute", None),
            "device": getattr(args, "device", "auto"), "backend": getattr(args, "backend", "torch"),
            "workers": getattr(args, "workers", 1),
            "guidance": schedules, "success_rate": by_guidance.get(schedules[0], first)["success_rate"],
            "by_guidance": by_guidance,
            "episodes": [{k: e[k] for k in ("suite", "task", "seed", "episode", "guidance", "success", "steps",
                                             "termination")}
                         | {k: e.get(k) for k in ("inference_errors", "refused_inputs", "first_error")}
                         | {"tr_summary": e.get("tr_summary"), "reach": e.get("reach"),
                            # per replan: when, TR, the guidance in force (TR-by-phase and paired analyses)
                            "replans": [{k: r.get(k) for k in ("step", "tr", "tr0", "s", "w_lang", "w_plan")}
                                        for r in e.get("replans", [])]}
                         for e in all_eps]}


def _write_md(out: Path, suites: list[str], schedules: list[str], by_guidance: dict) -> str:
    table = markdown_table(suites, schedules, by_guidance)
    table += "\n\nSuccesses per task:\n\n" + per_task_table(suites, schedules, by_guidance)
    if schedules != ["expert"]:                  # the scripted expert runs no inference
        table += ("\n\nFailed replans per cell (inference errors, of them inputs the policy refused; error "
                  "episodes: no replan succeeded, the arm held still throughout):\n\n"
                  + errors_table(suites, schedules, by_guidance))
    reach = reach_table(suites, schedules, by_guidance)
    table += ("\n\nWhy episodes fail (named movable object grasped / episodes whose task names one, another "
              "object grasped, median closest xy approach to the first named object):\n\n" + reach) if reach else ""
    (out / "results.md").write_text(table + "\n")
    return table
