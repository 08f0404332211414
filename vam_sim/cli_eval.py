"""`vam-stack eval`: success per task and suite, in and out of distribution, across guidance schedules.

Episodes run as `vam-stack sim` runs them (`vam_sim.cli.run_suite`), one cell per (schedule, suite,
seed), or spread over worker processes (`--workers`: the same results). `results.json` is rewritten
atomically after every finished episode with `"complete": false` until the run ends; an interrupt
keeps what finished (exit 128 + the signal number). A cell in which no replan succeeded exits 1
with the first error.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from vam_model.guidance import parse_guidance_label
from vam_stack.names import GUIDANCE_LABELS
from vam_stack.outputs import claim_out_dir, remove_empty_dirs, write_json_atomic
from vam_stack.progress import progress_bar
from vam_stack.recording import stop_on_signals

from .cli import DEVICE_FLAGS, default_backend, interrupt_code, run_suite, suite_arg
from .episode import error_stats, success_counts, success_intervals, success_rates, summarise
from .libero_mock.config import LiberoMockConfig
from .libero_mock.reach import reach_stats
from .libero_mock.runner import SimConfig
from .parallel import default_workers, run_parallel
from .reports import errors_table, markdown_table, per_task_counts, per_task_rates, per_task_table, reach_table
from .run_config import add_run_arguments, run_config_from_args


def add_arguments(p: argparse.ArgumentParser) -> None:
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


def run(args: argparse.Namespace) -> int:
    try:
        suites = [suite_arg(x) for x in _csv(args.suites, kind="suite")]
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
        args.backend = default_backend(args.policy, getattr(args, "device", "auto"))

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
        name, code = interrupt_code(e)
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
